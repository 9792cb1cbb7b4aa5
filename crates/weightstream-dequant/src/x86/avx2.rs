//! AVX2 + F16C kernels. Each reproduces `scalar` bit for bit: the same exact
//! conversions to f32, one `vmulps` (IEEE, round to nearest even; Rust never
//! sets FTZ/DAZ), and the same integer rounding to BF16. Full vectors here,
//! the remainder through the scalar kernel.
//!
//! Every function is `unsafe` with `#[target_feature]`: callers must have
//! checked `Isa::Avx2.supported()`.

use std::arch::x86_64::*;

use super::{blocks, lookup};
use crate::kernel::{fp8_runs, ScaleGrid};
use crate::numerics::f16_to_f32;
use crate::scalar;
use weightstream_format::{BlockFormat, Fp8Format};

/// f32 -> BF16 in the low half of each 32-bit lane (RNE, NaN canonical).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn round_bf16(x: __m256) -> __m256i {
    let b = _mm256_castps_si256(x);
    let lsb = _mm256_and_si256(_mm256_srli_epi32::<16>(b), _mm256_set1_epi32(1));
    let r = _mm256_srli_epi32::<16>(_mm256_add_epi32(b, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))));
    let nan = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_UNORD_Q>(x, x));
    _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7FC0), nan)
}

/// Two vectors of 8 rounded lanes -> 16 BF16 values in order.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn pack(a: __m256i, b: __m256i) -> __m256i {
    // packus interleaves 128-bit lanes: [a0-3 b0-3 a4-7 b4-7]; restore order.
    _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packus_epi32(a, b))
}

#[inline]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn store16(dst: *mut u16, a: __m256, b: __m256) {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables, and the pointers and lengths are as documented.
    unsafe {
        // SAFETY: the caller guarantees 16 writable u16 at dst.
        _mm256_storeu_si256(dst as *mut __m256i, pack(round_bf16(a), round_bf16(b)));
    }
}

/// 8 signed 32-bit integers scaled by d.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn scaled(q: __m256i, d: __m256) -> __m256 {
    _mm256_mul_ps(_mm256_cvtepi32_ps(q), d)
}

/// The AVX2 kernel of a block format (x86/blocks.rs for all but Q4_0 and Q8_0).
pub fn block_kernel(f: BlockFormat) -> Option<unsafe fn(&[u8], &mut [u16])> {
    // Callable only after `Isa::Avx2.supported()` (chunk::run checks).
    Some(match f {
        BlockFormat::Q4_0 => q4_0,
        BlockFormat::Q8_0 => q8_0,
        BlockFormat::Q4_1 => blocks::q4_1,
        BlockFormat::Q5_0 => blocks::q5_0,
        BlockFormat::Q5_1 => blocks::q5_1,
        BlockFormat::Q2_K => blocks::q2_k,
        BlockFormat::Q3_K => blocks::q3_k,
        BlockFormat::Q4_K => blocks::q4_k,
        BlockFormat::Q5_K => blocks::q5_k,
        BlockFormat::Q6_K => blocks::q6_k,
        BlockFormat::IQ4_NL => lookup::iq4_nl,
        BlockFormat::IQ4_XS => lookup::iq4_xs,
        BlockFormat::MXFP4 => lookup::mxfp4,
        BlockFormat::NVFP4 => lookup::nvfp4,
        BlockFormat::IQ2_XXS => lookup::iq2_xxs,
        BlockFormat::IQ2_XS => lookup::iq2_xs,
        BlockFormat::IQ2_S => lookup::iq2_s,
        BlockFormat::IQ3_XXS => lookup::iq3_xxs,
        BlockFormat::IQ3_S => lookup::iq3_s,
        BlockFormat::IQ1_S => lookup::iq1_s,
        BlockFormat::IQ1_M => lookup::iq1_m,
        BlockFormat::TQ1_0 => lookup::tq1_0,
        BlockFormat::TQ2_0 => lookup::tq2_0,
    })
}

#[target_feature(enable = "avx2,f16c")]
pub unsafe fn q4_0(src: &[u8], dst: &mut [u16]) {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables, and the pointers and lengths are as documented.
    unsafe {
        let n = src.len() / 18;
        let mask = _mm_set1_epi8(0x0F);
        let eight = _mm_set1_epi8(8);
        for k in 0..n {
            // SAFETY: block k lies inside src (k < src.len() / 18), its 32 outputs inside dst
            // (checked by Kernel::check: dst.len() == 32 * n).
            let p = src.as_ptr().add(k * 18);
            let o = dst.as_mut_ptr().add(k * 32);
            let d = _mm256_set1_ps(f16_to_f32(u16::from_le_bytes([*p, *p.add(1)])));
            let qs = _mm_loadu_si128(p.add(2) as *const __m128i);
            let lo = _mm_sub_epi8(_mm_and_si128(qs, mask), eight);
            let hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16::<4>(qs), mask), eight);
            store16(o, scaled(_mm256_cvtepi8_epi32(lo), d), scaled(_mm256_cvtepi8_epi32(_mm_srli_si128::<8>(lo)), d));
            store16(o.add(16), scaled(_mm256_cvtepi8_epi32(hi), d), scaled(_mm256_cvtepi8_epi32(_mm_srli_si128::<8>(hi)), d));
        }
    }
}

#[target_feature(enable = "avx2,f16c")]
pub unsafe fn q8_0(src: &[u8], dst: &mut [u16]) {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables, and the pointers and lengths are as documented.
    unsafe {
        let n = src.len() / 34;
        for k in 0..n {
            // SAFETY: as in q4_0, with 34-byte blocks.
            let p = src.as_ptr().add(k * 34);
            let o = dst.as_mut_ptr().add(k * 32);
            let d = _mm256_set1_ps(f16_to_f32(u16::from_le_bytes([*p, *p.add(1)])));
            let a = _mm_loadu_si128(p.add(2) as *const __m128i);
            let b = _mm_loadu_si128(p.add(18) as *const __m128i);
            store16(o, scaled(_mm256_cvtepi8_epi32(a), d), scaled(_mm256_cvtepi8_epi32(_mm_srli_si128::<8>(a)), d));
            store16(o.add(16), scaled(_mm256_cvtepi8_epi32(b), d), scaled(_mm256_cvtepi8_epi32(_mm_srli_si128::<8>(b)), d));
        }
    }
}

#[target_feature(enable = "avx2,f16c")]
pub unsafe fn f32(src: &[u8], dst: &mut [u16]) {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables, and the pointers and lengths are as documented.
    unsafe {
        let n = dst.len() / 16 * 16;
        for i in (0..n).step_by(16) {
            // SAFETY: i + 16 <= n <= dst.len(), and src holds 4 bytes per element.
            let p = src.as_ptr().add(i * 4) as *const f32;
            store16(dst.as_mut_ptr().add(i), _mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8)));
        }
        scalar::f32(&src[n * 4..], &mut dst[n..]);
    }
}

#[target_feature(enable = "avx2,f16c")]
pub unsafe fn f16(src: &[u8], dst: &mut [u16]) {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables, and the pointers and lengths are as documented.
    unsafe {
        let n = dst.len() / 16 * 16;
        for i in (0..n).step_by(16) {
            // SAFETY: as in f32, 2 bytes per element. vcvtph2ps is exact.
            let p = src.as_ptr().add(i * 2);
            let a = _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i));
            let b = _mm256_cvtph_ps(_mm_loadu_si128(p.add(16) as *const __m128i));
            store16(dst.as_mut_ptr().add(i), a, b);
        }
        scalar::f16(&src[n * 2..], &mut dst[n..]);
    }
}

/// 16 FP8 codes -> 16 binary16 values whose exact f32 conversions, times
/// `rebias`, are the codes' exact values.
///
/// E5M2 is the high byte of a binary16: `v << 8`, infinities and NaNs
/// included, rebias 1. E4M3 magnitudes shifted into binary16 position read
/// as the value times 2^-8 (normals and subnormals alike), rebias 2^8; its NaN
/// codes become binary16 NaNs. No f32 subnormal ever appears (AMD and Intel
/// cores slow down on those), unlike `numerics::e4m3_to_f32`'s construction.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn fp8_to_f16(format: Fp8Format, v: __m128i) -> __m256i {
    let w = _mm256_cvtepu8_epi16(v);
    match format {
        Fp8Format::E5M2 => _mm256_slli_epi16::<8>(w),
        Fp8Format::E4M3 => {
            // Byte in the high half, then an arithmetic shift: the sign stays
            // at bit 15, the magnitude lands at bits 7..13, and bit 14 (a copy
            // of the sign) is cleared.
            let h = _mm256_and_si256(_mm256_srai_epi16::<1>(_mm256_slli_epi16::<8>(w)), _mm256_set1_epi16(-16385)); // 0xBFFF
                                                                                                                    // NaN codes (magnitude 0x7F) get an all-ones exponent.
            let exp = _mm256_set1_epi16(0x3F80);
            let nan = _mm256_cmpeq_epi16(_mm256_and_si256(h, exp), exp);
            _mm256_or_si256(h, _mm256_and_si256(nan, _mm256_set1_epi16(0x7C00)))
        }
    }
}

/// The factor that, applied to `fp8_to_f16`'s value, gives the FP8 value.
const fn rebias(format: Fp8Format) -> f32 {
    match format {
        Fp8Format::E4M3 => 256.0,
        Fp8Format::E5M2 => 1.0,
    }
}

/// A whole FP8 chunk: runs of one scale (see `kernel::fp8_runs`), each
/// through the vector loop, all inside this one target-feature function.
#[target_feature(enable = "avx2,f16c")]
pub unsafe fn fp8(format: Fp8Format, cols: u64, scales: Option<&ScaleGrid>, first: u64, src: &[u8], dst: &mut [u16]) {
    fp8_runs(cols, scales, first, dst.len(), |scale, i, len| {
        // SAFETY: inside this function AVX2 and F16C are enabled; the run
        // lies within src and dst (fp8_runs covers [0, dst.len())).
        unsafe { fp8_run(format, scale, &src[i..i + len], &mut dst[i..i + len]) }
    });
}

#[inline]
#[target_feature(enable = "avx2,f16c")]
unsafe fn fp8_run(format: Fp8Format, scale: f32, src: &[u8], dst: &mut [u16]) {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables, and the pointers and lengths are as documented.
    unsafe {
        // x = (h * rebias) * scale, with h * rebias exact. Folding rebias into
        // the scale gives the same single rounding as long as rebias * scale is
        // itself exact and finite (it is a power-of-two product); otherwise keep
        // two multiplies.
        let r = rebias(format);
        let folded = r * scale;
        let n = dst.len() / 16 * 16;
        if folded.is_finite() || !scale.is_finite() {
            fp8_loop(format, src, dst, n, _mm256_set1_ps(folded), None);
        } else {
            fp8_loop(format, src, dst, n, _mm256_set1_ps(r), Some(_mm256_set1_ps(scale)));
        }
        if n < dst.len() {
            scalar::fp8_run(format, scale, &src[n..], &mut dst[n..]);
        }
    }
}

#[inline]
#[target_feature(enable = "avx2,f16c")]
unsafe fn fp8_loop(format: Fp8Format, src: &[u8], dst: &mut [u16], n: usize, m1: __m256, m2: Option<__m256>) {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables, and the pointers and lengths are as documented.
    unsafe {
        let mut i = 0;
        while i < n {
            // SAFETY: i + 16 <= n <= dst.len() == src.len().
            let h = fp8_to_f16(format, _mm_loadu_si128(src.as_ptr().add(i) as *const __m128i));
            let mut a = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(h)), m1);
            let mut b = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256::<1>(h)), m1);
            if let Some(m2) = m2 {
                a = _mm256_mul_ps(a, m2);
                b = _mm256_mul_ps(b, m2);
            }
            store16(dst.as_mut_ptr().add(i), a, b);
            i += 16;
        }
    }
}
