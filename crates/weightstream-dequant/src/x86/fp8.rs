//! FP8 (E4M3, E5M2) times its scales -> BF16 or float16 on x86, written
//! once for both vector widths and outputs ([`Width`]: AVX2's 16 lanes
//! with `Out256`'s rounding, AVX-512's 32 with any `Round`): a whole chunk in runs of
//! one scale, each run inside one target-feature function.
//!
//! Each code becomes a binary16 whose exact f32 conversion, times
//! `rebias`, is the code's exact value: E5M2 is the high byte of a
//! binary16 (`v << 8`, infinities and NaNs included, rebias 1); E4M3
//! magnitudes shifted into binary16 position read as the value times 2^-8
//! (normals and subnormals alike, rebias 2^8), its NaN codes becoming
//! binary16 NaNs. No f32 subnormal ever appears (AMD and Intel cores slow
//! down on those), unlike `numerics::e4m3_to_f32`'s construction. Then
//! `x = (h * rebias) * scale` with `h * rebias` exact: one multiply by the
//! folded factor where `rebias * scale` is exact and finite (a power-of-two
//! product), two otherwise; the scalar kernel takes what a run leaves
//! under one vector.

use std::arch::x86_64::*;
use std::marker::PhantomData;

use crate::kernel::{fp8_runs, ScaleGrid};
use crate::output::Output;
use crate::scalar;
use crate::x86::avx2::{store16, Out256};
use crate::x86::avx512::Out512;
use crate::x86::avx512::{store, Bf16Round, Round};
use weightstream_blocks::Fp8Format;

/// A vector width. The methods are `#[inline(always)]` without target
/// features: they are only called from the `#[target_feature]` entry
/// points below, into which they (and their intrinsics) inline.
trait Width {
    /// Codes per step.
    const LANES: usize;
    type F: Copy;
    /// Where [`Width::exact`] says no, the width that runs the scale instead.
    type Fallback: Width<Out = Self::Out>;
    /// What it writes.
    type Out: Output;
    /// `LANES` codes at `p` as f32 halves (times `rebias`: their values).
    unsafe fn codes(format: Fp8Format, p: *const u8) -> (Self::F, Self::F);
    unsafe fn splat(x: f32) -> Self::F;
    unsafe fn mul(a: Self::F, b: Self::F) -> Self::F;
    /// Round both halves to the output and store `LANES` outputs at `dst`.
    unsafe fn store(dst: *mut u16, a: Self::F, b: Self::F);
    /// Whether this width's rounding gives the formula's bits for every
    /// product `v * scale` of an FP8 value and `scale`.
    fn exact(scale: f32) -> bool;
}

/// AVX2 + F16C, `O`'s rounding.
struct Avx2<O>(PhantomData<O>);

impl<O: Out256> Width for Avx2<O> {
    const LANES: usize = 16;
    type F = __m256;
    type Fallback = Self;
    type Out = O;

    #[inline(always)]
    unsafe fn codes(format: Fp8Format, p: *const u8) -> (__m256, __m256) {
        // SAFETY: inside a kernel with avx2 and f16c enabled; 16 readable bytes at p.
        unsafe {
            let w = _mm256_cvtepu8_epi16(_mm_loadu_si128(p as *const __m128i));
            let h = match format {
                Fp8Format::E5M2 => _mm256_slli_epi16::<8>(w),
                Fp8Format::E4M3 => {
                    // Byte in the high half, then an arithmetic shift: the sign stays
                    // at bit 15, the magnitude lands at bits 7..13, and bit 14 (a copy
                    // of the sign) is cleared (0xBFFF). NaN codes (magnitude 0x7F)
                    // get an all-ones exponent.
                    let h = _mm256_and_si256(_mm256_srai_epi16::<1>(_mm256_slli_epi16::<8>(w)), _mm256_set1_epi16(-16385));
                    let exp = _mm256_set1_epi16(0x3F80);
                    let nan = _mm256_cmpeq_epi16(_mm256_and_si256(h, exp), exp);
                    _mm256_or_si256(h, _mm256_and_si256(nan, _mm256_set1_epi16(0x7C00)))
                }
            };
            (_mm256_cvtph_ps(_mm256_castsi256_si128(h)), _mm256_cvtph_ps(_mm256_extracti128_si256::<1>(h)))
        }
    }

    #[inline(always)]
    unsafe fn splat(x: f32) -> __m256 {
        // SAFETY: inside a kernel with avx enabled.
        unsafe { _mm256_set1_ps(x) }
    }

    #[inline(always)]
    unsafe fn mul(a: __m256, b: __m256) -> __m256 {
        // SAFETY: as in splat.
        unsafe { _mm256_mul_ps(a, b) }
    }

    #[inline(always)]
    unsafe fn store(dst: *mut u16, a: __m256, b: __m256) {
        // SAFETY: inside a kernel with avx2 enabled; 16 writable u16 at dst.
        unsafe { store16::<O>(dst, a, b) }
    }

    fn exact(_: f32) -> bool {
        true
    }
}

/// AVX-512 (F, BW, VL), rounding by `R`.
struct Avx512<R>(PhantomData<R>);

impl<R: Round> Width for Avx512<R> {
    const LANES: usize = 32;
    type F = __m512;
    type Fallback = Avx512<<R::Out as Out512>::Round512>;
    type Out = R::Out;

    #[inline(always)]
    unsafe fn codes(format: Fp8Format, p: *const u8) -> (__m512, __m512) {
        // SAFETY: inside a kernel with avx512f and avx512bw enabled; 32 readable bytes at p.
        unsafe {
            let w = _mm512_cvtepu8_epi16(_mm256_loadu_si256(p as *const __m256i));
            let h = match format {
                Fp8Format::E5M2 => _mm512_slli_epi16::<8>(w),
                Fp8Format::E4M3 => {
                    // As Avx2's, with a mask compare.
                    let h = _mm512_and_si512(_mm512_srai_epi16::<1>(_mm512_slli_epi16::<8>(w)), _mm512_set1_epi16(-16385));
                    let exp = _mm512_set1_epi16(0x3F80);
                    let nan = _mm512_cmpeq_epi16_mask(_mm512_and_si512(h, exp), exp);
                    _mm512_mask_mov_epi16(h, nan, _mm512_or_si512(h, _mm512_set1_epi16(0x7C00)))
                }
            };
            (_mm512_cvtph_ps(_mm512_castsi512_si256(h)), _mm512_cvtph_ps(_mm512_extracti64x4_epi64::<1>(h)))
        }
    }

    #[inline(always)]
    unsafe fn splat(x: f32) -> __m512 {
        // SAFETY: inside a kernel with avx512f enabled.
        unsafe { _mm512_set1_ps(x) }
    }

    #[inline(always)]
    unsafe fn mul(a: __m512, b: __m512) -> __m512 {
        // SAFETY: as in splat.
        unsafe { _mm512_mul_ps(a, b) }
    }

    #[inline(always)]
    unsafe fn store(dst: *mut u16, a: __m512, b: __m512) {
        // SAFETY: inside a kernel with R's features; 32 writable u16 at dst.
        unsafe { store(dst, R::pack(a, b)) }
    }

    /// `vcvtne2ps2bf16` flushes subnormal products: it is exact when none
    /// can occur. The smallest nonzero FP8 magnitudes are 2^-9 (E4M3) and
    /// 2^-16 (E5M2), so a scale of magnitude at least 2^-100 keeps every
    /// nonzero product at or above 2^-116; a zero, infinite or NaN scale
    /// gives zeros, infinities and NaNs.
    fn exact(scale: f32) -> bool {
        let s = scale.abs();
        !R::CVT || s == 0.0 || !s.is_finite() || s >= f32::from_bits((127 - 100) << 23)
    }
}

/// The factor that, applied to a code's binary16 value, gives the FP8 value.
const fn rebias(format: Fp8Format) -> f32 {
    match format {
        Fp8Format::E4M3 => 256.0,
        Fp8Format::E5M2 => 1.0,
    }
}

/// One run of one scale, through `W` where its rounding is exact for this
/// scale, else through its fallback.
#[inline(always)]
unsafe fn scaled_run<W: Width>(format: Fp8Format, scale: f32, src: &[u8], dst: &mut [u16]) {
    // SAFETY: inside an entry point below (its features enabled);
    // src.len() == dst.len().
    unsafe {
        if W::exact(scale) {
            run::<W>(format, scale, src, dst)
        } else {
            run::<W::Fallback>(format, scale, src, dst)
        }
    }
}

#[inline(always)]
unsafe fn run<W: Width>(format: Fp8Format, scale: f32, src: &[u8], dst: &mut [u16]) {
    // SAFETY: as in scaled_run.
    unsafe {
        let r = rebias(format);
        let folded = r * scale;
        let n = dst.len() / W::LANES * W::LANES;
        if folded.is_finite() || !scale.is_finite() {
            steps::<W, false>(format, src, dst, n, W::splat(folded), W::splat(1.0));
        } else {
            steps::<W, true>(format, src, dst, n, W::splat(r), W::splat(scale));
        }
        if n < dst.len() {
            scalar::fp8_run::<W::Out>(format, scale, &src[n..], &mut dst[n..]);
        }
    }
}

/// The first `n` values (a multiple of `W::LANES`): times `m1`, and `m2` too when `TWO`.
#[inline(always)]
unsafe fn steps<W: Width, const TWO: bool>(format: Fp8Format, src: &[u8], dst: &mut [u16], n: usize, m1: W::F, m2: W::F) {
    // SAFETY: as in scaled_run.
    unsafe {
        let mut i = 0;
        while i < n {
            // SAFETY: i + LANES <= n <= dst.len() == src.len().
            let (mut a, mut b) = W::codes(format, src.as_ptr().add(i));
            a = W::mul(a, m1);
            b = W::mul(b, m1);
            if TWO {
                a = W::mul(a, m2);
                b = W::mul(b, m2);
            }
            W::store(dst.as_mut_ptr().add(i), a, b);
            i += W::LANES;
        }
    }
}

/// A whole FP8 chunk on AVX2: runs of one scale (`kernel::fp8_runs`),
/// all inside this one target-feature function (the closure inherits it).
///
/// # Safety
/// `Isa::Avx2.supported()`; `src.len() == dst.len()`.
#[target_feature(enable = "avx2,f16c")]
pub unsafe fn avx2<O: Out256>(format: Fp8Format, cols: u64, scales: Option<&ScaleGrid>, first: u64, src: &[u8], dst: &mut [u16]) {
    fp8_runs(cols, scales, first, dst.len(), |scale, i, len| {
        // SAFETY: the features are enabled here; the run lies within src
        // and dst (fp8_runs covers [0, dst.len())).
        unsafe { scaled_run::<Avx2<O>>(format, scale, &src[i..i + len], &mut dst[i..i + len]) }
    });
}

/// A whole FP8 chunk on AVX-512 to `O`, with `vcvtne2ps2bf16` where
/// `bf16` (BF16 only).
///
/// # Safety
/// `Isa::Avx512.supported()`, and `avx512::has_bf16()` when `bf16`;
/// `src.len() == dst.len()`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn avx512<O: Out512>(
    bf16: bool,
    format: Fp8Format,
    cols: u64,
    scales: Option<&ScaleGrid>,
    first: u64,
    src: &[u8],
    dst: &mut [u16],
) {
    // SAFETY: the caller's contract above.
    unsafe {
        if bf16 && O::DTYPE == weightstream_blocks::OutDtype::BF16 {
            avx512_bf16(format, cols, scales, first, src, dst)
        } else {
            avx512_exact::<O::Round512>(format, cols, scales, first, src, dst)
        }
    }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,f16c")]
unsafe fn avx512_exact<R: Round>(format: Fp8Format, cols: u64, scales: Option<&ScaleGrid>, first: u64, src: &[u8], dst: &mut [u16]) {
    fp8_runs(cols, scales, first, dst.len(), |scale, i, len| {
        // SAFETY: as in `avx2`, with this function's features.
        unsafe { scaled_run::<Avx512<R>>(format, scale, &src[i..i + len], &mut dst[i..i + len]) }
    });
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,f16c,avx512bf16")]
unsafe fn avx512_bf16(format: Fp8Format, cols: u64, scales: Option<&ScaleGrid>, first: u64, src: &[u8], dst: &mut [u16]) {
    fp8_runs(cols, scales, first, dst.len(), |scale, i, len| {
        // SAFETY: as in `avx2`, with this function's features.
        unsafe { scaled_run::<Avx512<Bf16Round>>(format, scale, &src[i..i + len], &mut dst[i..i + len]) }
    });
}
