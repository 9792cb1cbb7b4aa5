//! The output tables the x86 lookup kernels share (lut4.rs: IQ4_NL,
//! IQ4_XS, MXFP4, NVFP4; ternary.rs: TQ1_0, TQ2_0; grid.rs: the IQ2, IQ3
//! and IQ1 grids), and the `Lut` trait that gives the grid kernels an AVX2
//! and an AVX-512 table. Each kernel reproduces its scalar kernel
//! (scalar/lut4.rs, ternary.rs, grid.rs) bit for bit.
//!
//! They compute per possible output rather than per value: a scale (the
//! same scalar f32 operations, in the same order, as the scalar kernel)
//! times a format's few values gives few output values (BF16 or float16): 16 for the 4-bit
//! formats, 3 or 4 ternary, 3 or 8 grid magnitudes, 6 for IQ1 (-1, 0, 1
//! plus either delta). Those are computed once per scale with the scalar
//! kernel's operations (exact i8 -> f32, `vmulps`, for IQ1 the `vaddps` of
//! the delta first; the output's rounding, `Out256`), and each value's result is
//! then looked up: its low and its high byte with a `vpshufb` each.
//!
//! NVFP4 and the IQ2/IQ3 grids keep only the magnitudes and set the sign
//! bit of the negative values' outputs (bit 15 in BF16 and float16): gguf-py negates a product (`s * -|l|`,
//! `(db * g) * -1`), which is exact, and round to nearest even is
//! symmetric, so the result is the positive one's with its sign bit
//! flipped, zeros and infinities included; the one exception, NaN (always
//! the canonical 0x7FC0), arises only from a NaN grid scale, whose flip is
//! then 0 (`grid16`), and never for NVFP4 (its scale is finite and >= 0).
//!
//! Every function is `unsafe` with `#[target_feature]`: callers must have
//! checked `Isa::Avx2.supported()`. Lengths: `src` whole blocks, `dst` their
//! elements (checked by `Kernel::check`).

use std::arch::x86_64::*;
use std::marker::PhantomData;

use super::avx2::Out256;
use super::avx512::Round;
use crate::output::Output;

/// A 16-entry i8 table for `pshufb`.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn table(t: &[i8; 16]) -> __m128i {
    // SAFETY: `t` is 16 readable bytes (an unaligned load).
    unsafe { _mm_loadu_si128(t.as_ptr() as *const __m128i) }
}

/// The 16 levels of a table as f32 (exact conversions): entries 0..8, 8..16.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn levels_f32(t: &[i8; 16]) -> (__m256, __m256) {
    let q = table(t);
    (_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128::<8>(q))))
}

/// `pshufb` order that turns 8 u16 per lane into their 8 low bytes, then
/// their 8 high bytes.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn split_bytes(t: __m256i) -> __m256i {
    let order =
        _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    _mm256_shuffle_epi8(t, order)
}

/// Every output a 32-value group with one scale can have: O(d * level)
/// for the 16 levels (the same `vmulps` and rounding as computing each
/// output, once per level instead of once per value), as two `pshufb`
/// tables, the low bytes and the high bytes, each in both lanes.
#[inline(always)]
pub(super) unsafe fn products16<O: Out256>(levels: (__m256, __m256), d: f32) -> (__m256i, __m256i) {
    // SAFETY: inside a kernel with avx2 and f16c enabled.
    unsafe {
        let dv = _mm256_set1_ps(d);
        let t = O::pack16(_mm256_mul_ps(levels.0, dv), _mm256_mul_ps(levels.1, dv));
        // [low bytes of 0..8, of 8..16 | high bytes of 0..8, of 8..16]
        let s = _mm256_permute4x64_epi64::<0b11_01_10_00>(split_bytes(t));
        (_mm256_permute2x128_si256::<0x00>(s, s), _mm256_permute2x128_si256::<0x11>(s, s))
    }
}

/// Low and high bytes of 32 BF16 values (lane 0: values 0..16 of `out0`,
/// lane 1: of `out1`), interleaved and stored.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn store_bytes(lo: __m256i, hi: __m256i, out0: *mut u16, out1: *mut u16) {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables, and the pointers and lengths are as documented.
    unsafe {
        // Values 0..8 of each lane, then 8..16.
        let (a, b) = (_mm256_unpacklo_epi8(lo, hi), _mm256_unpackhi_epi8(lo, hi));
        // SAFETY: the caller guarantees 16 writable u16 at out0 and at out1.
        _mm256_storeu_si256(out0 as *mut __m256i, _mm256_permute2x128_si256::<0x20>(a, b));
        _mm256_storeu_si256(out1 as *mut __m256i, _mm256_permute2x128_si256::<0x31>(a, b));
    }
}

/// 8 f32 values rounded to `O` as a `pshufb` table: the low bytes of the
/// 8, then their high bytes.
#[inline(always)]
pub(super) unsafe fn table8<O: Out256>(x: __m256) -> __m128i {
    // SAFETY: inside a kernel with avx2 and f16c enabled.
    unsafe { _mm256_castsi256_si128(split_bytes(_mm256_zextsi128_si256(O::pack8(x)))) }
}

/// 16 outputs: entry `idx[j]` (0..8) of a `table8` table, the high
/// byte XORed with `flip[j]`.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn lookup16(idx: __m128i, t: __m128i, flip: __m128i, out: *mut u16) {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables, and the pointers and lengths are as documented.
    unsafe {
        let lo = _mm_shuffle_epi8(t, idx);
        let hi = _mm_xor_si128(_mm_shuffle_epi8(t, _mm_or_si128(idx, _mm_set1_epi8(8))), flip);
        // SAFETY: the caller guarantees 16 writable u16 at out.
        _mm_storeu_si128(out as *mut __m128i, _mm_unpacklo_epi8(lo, hi));
        _mm_storeu_si128(out.add(8) as *mut __m128i, _mm_unpackhi_epi8(lo, hi));
    }
}

/// The table lookups of the grid and IQ1 kernels, per ISA and output: 8
/// f32 outputs rounded to the output as a table (`table8`), and 16 outputs looked up in it
/// (`lookup16`: entry `idx[j]`, 0..8, its sign bit flipped where `flip[j]`
/// is 0x80).
///
/// The methods are `#[inline(always)]` without target features: they are
/// only called from the `#[target_feature]` kernels of `kernels!`, into
/// which they (and the intrinsics in them) are inlined.
pub(super) trait Lut {
    type Table: Copy;
    unsafe fn table8(x: __m256) -> Self::Table;
    unsafe fn lookup16(idx: __m128i, t: Self::Table, flip: __m128i, out: *mut u16);
}

/// AVX2: `O`'s rounding, a `pshufb` per byte of the outputs.
pub(super) struct Avx2<O>(PhantomData<O>);

impl<O: Out256> Lut for Avx2<O> {
    type Table = __m128i;

    #[inline(always)]
    unsafe fn table8(x: __m256) -> __m128i {
        // SAFETY: inside a kernel with avx2 and f16c enabled.
        unsafe { table8::<O>(x) }
    }

    #[inline(always)]
    unsafe fn lookup16(idx: __m128i, t: __m128i, flip: __m128i, out: *mut u16) {
        // SAFETY: inside a kernel with avx2 enabled; the caller guarantees
        // 16 writable u16 at out.
        unsafe { lookup16(idx, t, flip, out) }
    }
}

/// AVX-512: the table is 16 words, the 8 outputs rounded by `R`
/// (`vcvtneps2bf16` where the CPU has AVX512_BF16, else the integer
/// formula; `vcvtps2ph` to float16) and the same with the sign bit
/// flipped (NaNs canonical in both halves); a lookup is one `vpermw` of 16 words, index `idx[j]`
/// plus 8 where flipped.
///
/// `vcvtneps2bf16` (`Bf16Round`) rounds like the scalar formula except that it flushes
/// f32 subnormal inputs to zero, and none reach it: every table entry is a
/// product of an f16 value `d` (a multiple of 2^-24; IQ1_M's `d` too, an
/// f16 pieced from the scale bits) and factors that are multiples of 2^-3
/// (IQ2: `(0.5 + s) * 0.25` and magnitudes 8..43; IQ3_XXS: `(0.5 + s) *
/// 0.5`, 4..62; IQ3_S: `1 + 2s`, 1..15; IQ1: `2s + 1` and `g + delta`,
/// delta +-0.125), so a multiple of 2^-27 exactly, and an f32 rounding of a
/// multiple of 2^-27 is one too (exact below 2^-4 in magnitude, a multiple
/// of its ulp above): zero or at least 2^-27 in magnitude. A NaN scale
/// gives 0x7FC0 in both halves, so its flip does not matter.
pub(super) struct Avx512<R>(PhantomData<R>);

impl<R: Round> Lut for Avx512<R> {
    type Table = __m256i;

    #[inline(always)]
    unsafe fn table8(x: __m256) -> __m256i {
        // SAFETY: inside a kernel with avx512f, avx512bw and avx512vl
        // enabled (and avx512bf16 for Bf16Round).
        unsafe {
            let t = R::round8(x);
            let both = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(t), _mm_xor_si128(t, _mm_set1_epi16(i16::MIN)));
            // A NaN input gives a NaN (sign and payload kept): magnitude
            // above infinity's, which no other input gives.
            let inf = _mm256_set1_epi16(R::Out::INF as i16);
            let nan = _mm256_cmpgt_epu16_mask(_mm256_and_si256(both, _mm256_set1_epi16(0x7FFF)), inf);
            _mm256_mask_mov_epi16(both, nan, _mm256_set1_epi16(R::Out::NAN as i16))
        }
    }

    #[inline(always)]
    unsafe fn lookup16(idx: __m128i, t: __m256i, flip: __m128i, out: *mut u16) {
        // SAFETY: as in table8; the caller guarantees 16 writable u16 at out.
        unsafe {
            // flip is 0x80 or 0: min(flip, 8) is 8 or 0.
            let i = _mm_or_si128(idx, _mm_min_epu8(flip, _mm_set1_epi8(8)));
            let v = _mm256_permutexvar_epi16(_mm256_cvtepu8_epi16(i), t);
            _mm256_storeu_si256(out as *mut __m256i, v);
        }
    }
}

/// The same for 32 outputs (lane 0 to `out0`, lane 1 to `out1`), from a
/// table per lane.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn lookup32(idx: __m256i, t: __m256i, flip: __m256i, out0: *mut u16, out1: *mut u16) {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables, and the pointers and lengths are as documented.
    unsafe {
        let hi = _mm256_xor_si256(_mm256_shuffle_epi8(t, _mm256_or_si256(idx, _mm256_set1_epi8(8))), flip);
        // SAFETY: the caller guarantees 16 writable u16 at out0 and at out1.
        store_bytes(_mm256_shuffle_epi8(t, idx), hi, out0, out1);
    }
}
