//! AVX2 kernels of the safetensors packs (format/packed.rs), as
//! x86/packed512.rs does them with AVX-512: E2M1 (NVFP4, MXFP4) and INT4
//! through the 16 outputs a run of one scale can have, each value's output
//! then looked up by its code with a `pshufb` on the outputs' low bytes and
//! one on their high bytes (as x86/lookup.rs does for GGUF's 4-bit
//! formats); INT8 value by value. Each reproduces its scalar kernel bit for
//! bit: a table entry is the scalar kernel's own operations on one code
//! (the exact f32 level, one `vmulps`, F16 rounding where the scales are
//! F16, the output's rounding of avx2.rs `Out256`, every NaN canonical). What a run
//! leaves under 16 values goes through the scalar kernel.
//!
//! Every function is `unsafe`: callers must have checked
//! `Isa::Avx2.supported()`.

use std::arch::x86_64::*;

use super::avx2::Out256;
use crate::kernel::{grid_runs, IntPack, ScaleGrid};
use crate::scalar;
use weightstream_blocks::E2M1_VALUES;

/// INT4 codes 0..16 as values before the zero point: q - 8.
const INT4_LEVELS: [f32; 16] = [-8.0, -7.0, -6.0, -5.0, -4.0, -3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0];

/// `numerics::round_f16` on 8 lanes (packed512.rs's, with blends).
#[inline(always)]
unsafe fn round_f16(x: __m256) -> __m256 {
    // SAFETY: inside a kernel with avx2 enabled.
    unsafe {
        let bits = _mm256_castps_si256(x);
        let sign = _mm256_and_si256(bits, _mm256_set1_epi32(i32::MIN));
        let mag = _mm256_and_si256(bits, _mm256_set1_epi32(0x7FFF_FFFF));
        let a = _mm256_castsi256_ps(mag);
        let half = _mm256_set1_ps(0.5);
        let small = _mm256_sub_ps(_mm256_add_ps(a, half), half);
        let c = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_and_si256(mag, _mm256_set1_epi32(0x7F80_0000)), _mm256_set1_epi32(13 << 23)));
        let normal = _mm256_sub_ps(_mm256_add_ps(a, c), c);
        let r = _mm256_blendv_ps(normal, small, _mm256_cmp_ps::<_CMP_LT_OQ>(a, _mm256_set1_ps(6.103_515_6e-5)));
        let r = _mm256_blendv_ps(r, _mm256_set1_ps(f32::INFINITY), _mm256_cmp_ps::<_CMP_GE_OQ>(a, _mm256_set1_ps(65520.0)));
        let r = _mm256_castsi256_ps(_mm256_or_si256(_mm256_castps_si256(r), sign));
        _mm256_blendv_ps(r, x, _mm256_cmp_ps::<_CMP_UNORD_Q>(x, x))
    }
}

/// The 16 outputs of a run, O(R(level * scale)), as two `pshufb`
/// tables: their low bytes and their high bytes, each in both lanes.
#[inline(always)]
unsafe fn table16<O: Out256>(levels: (__m256, __m256), scale: f32, to_f16: bool) -> (__m256i, __m256i) {
    // SAFETY: inside a kernel with avx2 enabled.
    unsafe {
        let s = _mm256_set1_ps(scale);
        let (mut a, mut b) = (_mm256_mul_ps(levels.0, s), _mm256_mul_ps(levels.1, s));
        if to_f16 {
            a = round_f16(a);
            b = round_f16(b);
        }
        let t = O::pack16(a, b);
        let order =
            _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
        // [low bytes of 0..8, of 8..16 | high bytes of 0..8, of 8..16]
        let s = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_shuffle_epi8(t, order));
        (_mm256_permute2x128_si256::<0x00>(s, s), _mm256_permute2x128_si256::<0x11>(s, s))
    }
}

/// The codes of bytes of nibble pairs in element order (each byte's low
/// nibble first): (codes of bytes 0..8, of bytes 8..16).
#[inline(always)]
unsafe fn nibbles(b: __m128i) -> (__m128i, __m128i) {
    // SAFETY: inside a kernel with avx2 enabled.
    unsafe {
        let m = _mm_set1_epi8(0x0F);
        let (lo, hi) = (_mm_and_si128(b, m), _mm_and_si128(_mm_srli_epi16::<4>(b), m));
        (_mm_unpacklo_epi8(lo, hi), _mm_unpackhi_epi8(lo, hi))
    }
}

/// Values `[0, n - n % 16)` of a run of nibble pairs through the table
/// `(tlo, thi)`; returns how many were written.
#[inline(always)]
unsafe fn nibble_run((tlo, thi): (__m256i, __m256i), src: &[u8], dst: &mut [u16]) -> usize {
    let n = dst.len();
    let mut i = 0;
    // SAFETY: inside a kernel with avx2 enabled; each step reads
    // src[i / 2..i / 2 + 16 or 8] and writes dst[i..i + 32 or 16], inside
    // the run (src holds n / 2 bytes).
    unsafe {
        while i + 32 <= n {
            let (e0, e1) = nibbles(_mm_loadu_si128(src.as_ptr().add(i / 2) as *const __m128i));
            let idx = _mm256_set_m128i(e1, e0);
            let (lo, hi) = (_mm256_shuffle_epi8(tlo, idx), _mm256_shuffle_epi8(thi, idx));
            // Per lane: values 0..8, then 8..16, of that lane's 16.
            let (a, b) = (_mm256_unpacklo_epi8(lo, hi), _mm256_unpackhi_epi8(lo, hi));
            let out = dst.as_mut_ptr().add(i);
            _mm256_storeu_si256(out as *mut __m256i, _mm256_permute2x128_si256::<0x20>(a, b));
            _mm256_storeu_si256(out.add(16) as *mut __m256i, _mm256_permute2x128_si256::<0x31>(a, b));
            i += 32;
        }
        if i + 16 <= n {
            let (e0, _) = nibbles(_mm_loadl_epi64(src.as_ptr().add(i / 2) as *const __m128i));
            let (lo, hi) = (_mm_shuffle_epi8(_mm256_castsi256_si128(tlo), e0), _mm_shuffle_epi8(_mm256_castsi256_si128(thi), e0));
            let out = dst.as_mut_ptr().add(i);
            _mm_storeu_si128(out as *mut __m128i, _mm_unpacklo_epi8(lo, hi));
            _mm_storeu_si128(out.add(8) as *mut __m128i, _mm_unpackhi_epi8(lo, hi));
            i += 16;
        }
    }
    i
}

/// 16 f32 levels as two vectors (entries 0..8, 8..16).
#[inline(always)]
unsafe fn levels(t: &[f32; 16]) -> (__m256, __m256) {
    // SAFETY: 16 readable f32, inside a kernel with avx enabled.
    unsafe { (_mm256_loadu_ps(t.as_ptr()), _mm256_loadu_ps(t.as_ptr().add(8))) }
}

/// A whole E2M1 chunk (chunk.rs checked it: even rows and groups).
///
/// # Safety
/// `Isa::Avx2.supported()`; `src.len() * 2 == dst.len()`.
#[target_feature(enable = "avx2,f16c")]
pub unsafe fn e2m1<O: Out256>(cols: u64, scales: &ScaleGrid, first: u64, src: &[u8], dst: &mut [u16]) {
    // SAFETY: this function's features.
    let l = unsafe { levels(&E2M1_VALUES) };
    grid_runs(cols, scales, first, dst.len(), |k, i, len| {
        let scale = scales.value(k);
        let (s, d) = (&src[i / 2..(i + len) / 2], &mut dst[i..i + len]);
        // SAFETY: this function's features; the run lies within src and dst.
        let done = unsafe { nibble_run(table16::<O>(l, scale, false), s, d) };
        scalar::e2m1_run::<O>(scale, &s[done / 2..], &mut d[done..]);
    });
}

/// A whole INT4 or INT8 chunk (chunk.rs checked it: whole words per row
/// and group).
///
/// # Safety
/// `Isa::Avx2.supported()`; `src` holds `dst.len()` values of `bits` bits.
#[target_feature(enable = "avx2,f16c")]
pub unsafe fn int<O: Out256>(pack: IntPack, first: u64, src: &[u8], dst: &mut [u16]) {
    let IntPack { bits, cols, ref scales, zeros, to_f16 } = pack;
    let zeros = zeros.as_ref();
    // SAFETY: this function's features.
    let int4 = unsafe { levels(&INT4_LEVELS) };
    let per_byte = 8 / bits as usize;
    grid_runs(cols, scales, first, dst.len(), |k, i, len| {
        let (scale, zero) = (scales.value(k), zeros.map_or(0.0, |z| z.value(k)));
        let (s, d) = (&src[i / per_byte..(i + len) / per_byte], &mut dst[i..i + len]);
        // SAFETY: this function's features; the run lies within src and dst.
        let done = unsafe {
            if bits == 4 {
                let z = _mm256_set1_ps(zero);
                nibble_run(table16::<O>((_mm256_sub_ps(int4.0, z), _mm256_sub_ps(int4.1, z)), scale, to_f16), s, d)
            } else {
                int8_run::<O>(scale, zero, to_f16, s, d)
            }
        };
        scalar::int_run::<O>(bits, scale, zero, to_f16, &s[done / per_byte..], &mut d[done..]);
    });
}

/// 8 INT8 values (offset bytes, the low 8 of `b`) as f32 outputs before
/// the output's rounding: R((q - zero) * scale).
#[inline(always)]
unsafe fn int8_values(b: __m128i, s: __m256, z: __m256, to_f16: bool) -> __m256 {
    // SAFETY: inside a kernel with avx2 enabled.
    unsafe {
        let q = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_cvtepu8_epi32(b), _mm256_set1_epi32(128)));
        let x = _mm256_mul_ps(_mm256_sub_ps(q, z), s);
        if to_f16 {
            round_f16(x)
        } else {
            x
        }
    }
}

/// INT8 values `[0, n - n % 16)` of a run, value by value: returns how
/// many were written.
#[inline(always)]
unsafe fn int8_run<O: Out256>(scale: f32, zero: f32, to_f16: bool, src: &[u8], dst: &mut [u16]) -> usize {
    let n = dst.len();
    let mut i = 0;
    // SAFETY: inside a kernel with avx2 enabled; each step reads
    // src[i..i + 16] and writes dst[i..i + 16], inside the run.
    unsafe {
        let (s, z) = (_mm256_set1_ps(scale), _mm256_set1_ps(zero));
        while i + 16 <= n {
            let b = _mm_loadu_si128(src.as_ptr().add(i) as *const __m128i);
            let v = O::pack16(int8_values(b, s, z, to_f16), int8_values(_mm_srli_si128::<8>(b), s, z, to_f16));
            _mm256_storeu_si256(dst.as_mut_ptr().add(i) as *mut __m256i, v);
            i += 16;
        }
    }
    i
}
