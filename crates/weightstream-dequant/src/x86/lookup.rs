//! AVX2 kernels of the lookup formats: IQ4_NL, IQ4_XS, MXFP4, NVFP4 (a
//! nibble picks one of 16 i8 levels), the ternary TQ1_0 and TQ2_0, and the
//! IQ grid formats (IQ2_*, IQ3_*, IQ1_*). Each reproduces its scalar kernel
//! (scalar/lut4.rs, ternary.rs, grid.rs) bit for bit.
//!
//! They compute per possible output rather than per value: a scale (the
//! same scalar f32 operations, in the same order, as the scalar kernel)
//! times a format's few values gives few BF16 results: 16 for the 4-bit
//! formats, 3 or 4 ternary, 3 or 8 grid magnitudes, 6 for IQ1 (-1, 0, 1
//! plus either delta). Those are computed once per scale with the scalar
//! kernel's operations (exact i8 -> f32, `vmulps`, for IQ1 the `vaddps` of
//! the delta first; the shared BF16 rounding), and each value's result is
//! then looked up: its low and its high byte with a `vpshufb` each.
//!
//! NVFP4 and the IQ2/IQ3 grids keep only the magnitudes and set the sign
//! bit of the negative values' BF16: gguf-py negates a product (`s * -|l|`,
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

use super::avx2::{pack, round_bf16};
use super::avx512::{Bf16Round, IntRound, Round};
use super::blocks::{bit_bytes32, bits, load32};
use crate::scalar::{e8m0_half, f16_at, iq1_m_d, iq4_xs_scale, ue4m3_half};
use weightstream_blocks::block;
use weightstream_blocks::block_tables::{
    E2M1_DOUBLED, IQ1S_GRID, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID, IQ4NL_VALUES, KSIGNS,
};

/// The blocks of `src` with their outputs: (block bytes, output pointer).
#[inline(always)]
fn blocks<'a>(src: &'a [u8], dst: &'a mut [u16], bytes: usize, elems: usize) -> impl Iterator<Item = (&'a [u8], *mut u16)> + 'a {
    src.chunks_exact(bytes).zip(dst.chunks_exact_mut(elems)).map(|(b, o)| (b, o.as_mut_ptr()))
}

/// A 16-entry i8 table for `pshufb`.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn table(t: &[i8; 16]) -> __m128i {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables, and the pointers and lengths are as documented.
    unsafe {
        // SAFETY: 16 readable bytes.
        _mm_loadu_si128(t.as_ptr() as *const __m128i)
    }
}

/// The 16 levels of a table as f32 (exact conversions): entries 0..8, 8..16.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn levels_f32(t: &[i8; 16]) -> (__m256, __m256) {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables.
    unsafe {
        let q = table(t);
        (_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128::<8>(q))))
    }
}

/// `pshufb` order that turns 8 u16 per lane into their 8 low bytes, then
/// their 8 high bytes.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn split_bytes(t: __m256i) -> __m256i {
    let order =
        _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    _mm256_shuffle_epi8(t, order)
}

/// Every output a 32-value group with one scale can have: BF16(d * level)
/// for the 16 levels (the same `vmulps` and rounding as computing each
/// output, once per level instead of once per value), as two `pshufb`
/// tables, the low bytes and the high bytes, each in both lanes.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn products16(levels: (__m256, __m256), d: f32) -> (__m256i, __m256i) {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables.
    unsafe {
        let dv = _mm256_set1_ps(d);
        let t = pack(round_bf16(_mm256_mul_ps(levels.0, dv)), round_bf16(_mm256_mul_ps(levels.1, dv)));
        // [low bytes of 0..8, of 8..16 | high bytes of 0..8, of 8..16]
        let s = _mm256_permute4x64_epi64::<0b11_01_10_00>(split_bytes(t));
        (_mm256_permute2x128_si256::<0x00>(s, s), _mm256_permute2x128_si256::<0x11>(s, s))
    }
}

/// Low and high bytes of 32 BF16 values (lane 0: values 0..16 of `out0`,
/// lane 1: of `out1`), interleaved and stored.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn store_bytes(lo: __m256i, hi: __m256i, out0: *mut u16, out1: *mut u16) {
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

/// 8 f32 values rounded to BF16 as a `pshufb` table: the low bytes of the
/// 8, then their high bytes.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn bf16_table8(x: __m256) -> __m128i {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables.
    unsafe {
        let r = round_bf16(x);
        let t = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256::<1>(r));
        _mm256_castsi256_si128(split_bytes(_mm256_zextsi128_si256(t)))
    }
}

/// 16 outputs: entry `idx[j]` (0..8) of a `bf16_table8` table, the high
/// byte XORed with `flip[j]`.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn lookup16(idx: __m128i, t: __m128i, flip: __m128i, out: *mut u16) {
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

/// The table lookups of the grid and IQ1 kernels, per ISA: 8 f32 outputs
/// rounded to BF16 as a table (`table8`), and 16 outputs looked up in it
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

    /// IQ1_M's whole blocks: by default a table per 16 outputs
    /// (`iq1_m_groups`); AVX-512 does a block's work in vectors.
    #[inline(always)]
    unsafe fn iq1_m(src: &[u8], dst: &mut [u16])
    where
        Self: Sized,
    {
        // SAFETY: as for the kernel calling this (features enabled, lengths checked).
        unsafe { iq1_m_groups::<Self>(src, dst) }
    }
}

/// AVX2: the integer rounding, a `pshufb` per byte of the outputs.
pub(super) struct Avx2;

impl Lut for Avx2 {
    type Table = __m128i;

    #[inline(always)]
    unsafe fn table8(x: __m256) -> __m128i {
        // SAFETY: inside a kernel with avx2 enabled.
        unsafe { bf16_table8(x) }
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
/// formula) and the same with the sign bit flipped (NaNs canonical
/// in both halves); a lookup is one `vpermw` of 16 words, index `idx[j]`
/// plus 8 where flipped.
///
/// `vcvtneps2bf16` (`Avx512Bf16`) rounds like the scalar formula except that it flushes
/// f32 subnormal inputs to zero, and none reach it: every table entry is a
/// product of an f16 value `d` (a multiple of 2^-24; IQ1_M's `d` too, an
/// f16 pieced from the scale bits) and factors that are multiples of 2^-3
/// (IQ2: `(0.5 + s) * 0.25` and magnitudes 8..43; IQ3_XXS: `(0.5 + s) *
/// 0.5`, 4..62; IQ3_S: `1 + 2s`, 1..15; IQ1: `2s + 1` and `g + delta`,
/// delta +-0.125), so a multiple of 2^-27 exactly, and an f32 rounding of a
/// multiple of 2^-27 is one too (exact below 2^-4 in magnitude, a multiple
/// of its ulp above): zero or at least 2^-27 in magnitude. A NaN scale
/// gives 0x7FC0 in both halves, so its flip does not matter.
pub(super) struct Avx512<R>(std::marker::PhantomData<R>);

/// AVX-512 with AVX512_BF16.
pub(super) type Avx512Bf16 = Avx512<Bf16Round>;

/// AVX-512 without it (what `Isa::Avx512` runs on CPUs without
/// AVX512_BF16, and `Isa::Avx512Int` everywhere).
pub(super) type Avx512Int = Avx512<IntRound>;

impl<R: Round> Lut for Avx512<R> {
    type Table = __m256i;

    #[inline(always)]
    unsafe fn table8(x: __m256) -> __m256i {
        // SAFETY: inside a kernel with avx512f, avx512bw and avx512vl
        // enabled (and avx512bf16 for Bf16Round).
        unsafe {
            let t = R::round8(x);
            let both = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(t), _mm_xor_si128(t, _mm_set1_epi16(i16::MIN)));
            // A NaN input gives a BF16 NaN (sign and payload kept):
            // magnitude above 0x7F80, which no other input gives.
            let nan = _mm256_cmpgt_epu16_mask(_mm256_and_si256(both, _mm256_set1_epi16(0x7FFF)), _mm256_set1_epi16(0x7F80));
            _mm256_mask_mov_epi16(both, nan, _mm256_set1_epi16(0x7FC0))
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

    #[inline(always)]
    unsafe fn iq1_m(src: &[u8], dst: &mut [u16]) {
        // SAFETY: as in table8; lengths as `Kernel::check` leaves them.
        unsafe { iq1_m_vectors::<R>(src, dst) }
    }
}

kernels! {
    iq2_xxs, iq2_xxs_avx512_int, iq2_xxs_avx512 => iq2_xxs_body;
    iq2_xs, iq2_xs_avx512_int, iq2_xs_avx512 => iq2_xs_body;
    iq2_s, iq2_s_avx512_int, iq2_s_avx512 => iq2_s_body;
    iq3_xxs, iq3_xxs_avx512_int, iq3_xxs_avx512 => iq3_xxs_body;
    iq3_s, iq3_s_avx512_int, iq3_s_avx512 => iq3_s_body;
    iq1_s, iq1_s_avx512_int, iq1_s_avx512 => iq1_s_body;
    iq1_m, iq1_m_avx512_int, iq1_m_avx512 => iq1_m_body;
}

/// The same for 32 outputs (lane 0 to `out0`, lane 1 to `out1`), from a
/// table per lane.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn lookup32(idx: __m256i, t: __m256i, flip: __m256i, out0: *mut u16, out1: *mut u16) {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables, and the pointers and lengths are as documented.
    unsafe {
        let hi = _mm256_xor_si256(_mm256_shuffle_epi8(t, _mm256_or_si256(idx, _mm256_set1_epi8(8))), flip);
        // SAFETY: the caller guarantees 16 writable u16 at out0 and at out1.
        store_bytes(_mm256_shuffle_epi8(t, idx), hi, out0, out1);
    }
}

/// The 32 values of 16 bytes of nibbles (low nibbles, then high), looked
/// up in `levels` and scaled by `d`, to `out`: the 16 possible outputs
/// computed once (`products16`), then a `pshufb` per byte of them.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn lut32(qs: *const u8, levels: (__m256, __m256), d: f32, out: *mut u16) {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables, and the pointers and lengths are as documented.
    unsafe {
        let mask = _mm_set1_epi8(0x0F);
        // SAFETY: the caller guarantees 16 readable bytes at qs and 32 writable u16 at out.
        let v = _mm_loadu_si128(qs as *const __m128i);
        let idx = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16::<4>(v), mask), _mm_and_si128(v, mask));
        let (lo, hi) = products16(levels, d);
        store_bytes(_mm256_shuffle_epi8(lo, idx), _mm256_shuffle_epi8(hi, idx), out, out.add(16));
    }
}

#[target_feature(enable = "avx2,f16c")]
pub unsafe fn iq4_nl(src: &[u8], dst: &mut [u16]) {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables, and the pointers and lengths are as documented.
    unsafe {
        use block::iq4_nl::*;
        let levels = levels_f32(&IQ4NL_VALUES);
        for (b, o) in blocks(src, dst, BYTES, ELEMS) {
            // SAFETY: 16 bytes of qs inside the block; 32 outputs at o.
            lut32(b.as_ptr().add(QS), levels, f16_at(b, D), o);
        }
    }
}

#[target_feature(enable = "avx2,f16c")]
pub unsafe fn iq4_xs(src: &[u8], dst: &mut [u16]) {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables, and the pointers and lengths are as documented.
    unsafe {
        use block::iq4_xs::*;
        let levels = levels_f32(&IQ4NL_VALUES);
        for (b, o) in blocks(src, dst, BYTES, ELEMS) {
            let d = f16_at(b, D);
            for k in 0..8 {
                let dl = d * iq4_xs_scale(b, k) as f32;
                // SAFETY: qs[16k .. 16k + 16] inside the block; outputs 32k .. 32k + 32 of its 256.
                lut32(b.as_ptr().add(QS + 16 * k), levels, dl, o.add(32 * k));
            }
        }
    }
}

#[target_feature(enable = "avx2,f16c")]
pub unsafe fn mxfp4(src: &[u8], dst: &mut [u16]) {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables, and the pointers and lengths are as documented.
    unsafe {
        use block::mxfp4::*;
        let levels = levels_f32(&E2M1_DOUBLED);
        for (b, o) in blocks(src, dst, BYTES, ELEMS) {
            // SAFETY: 16 bytes of qs inside the block; 32 outputs at o.
            lut32(b.as_ptr().add(QS), levels, e8m0_half(b[E]), o);
        }
    }
}

/// E2M1_DOUBLED is sign-symmetric: entry 8 + i is entry i negated (and 8 is 0).
const _: () = {
    let mut i = 0;
    while i < 8 {
        assert!(E2M1_DOUBLED[8 + i] == -E2M1_DOUBLED[i]);
        i += 1;
    }
};

/// 16 values of each lane's sub-block (nibbles `q`), from that lane's
/// table of 8 magnitudes (`t`: low bytes, then high bytes): nibble q gives
/// magnitude q & 7, negated for q > 8 by flipping the BF16 sign bit.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn signed_lookup(q: __m256i, t: __m256i, out0: *mut u16, out1: *mut u16) {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables, and the pointers and lengths are as documented.
    unsafe {
        let sign = _mm256_and_si256(_mm256_cmpgt_epi8(q, _mm256_set1_epi8(8)), _mm256_set1_epi8(-128));
        // SAFETY: the caller guarantees 16 writable u16 at out0 and at out1.
        lookup32(_mm256_and_si256(q, _mm256_set1_epi8(7)), t, sign, out0, out1);
    }
}

/// NVFP4: per sub-block scale s, the 8 outputs BF16(s * |level|) are
/// computed once (4 `vmulps` per 64 values), and a nibble's output is one
/// of them, with the sign bit set for the negative levels (q > 8). The same
/// bits as the scalar `s * level`: s (`ue4m3_half`) is finite and >= +0, so
/// `s * -|l|` is exactly `-(s * |l|)` (no NaN can arise), and round to
/// nearest even is symmetric, so its BF16 is the positive one's with the
/// sign bit flipped, zero included (`s = 0`: -0, 0x8000, as in the scalar
/// kernel). Level 0 at q = 8 is +0 (an i8 has no -0): not flipped.
#[target_feature(enable = "avx2,f16c")]
pub unsafe fn nvfp4(src: &[u8], dst: &mut [u16]) {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables, and the pointers and lengths are as documented.
    unsafe {
        use block::nvfp4::*;
        let mags = levels_f32(&E2M1_DOUBLED).0;
        let f = _mm256_set1_epi8(0x0F);
        for (b, o) in blocks(src, dst, BYTES, ELEMS) {
            let r = |k: usize| round_bf16(_mm256_mul_ps(mags, _mm256_set1_ps(ue4m3_half(b[D + k]))));
            // Lane 0: sub-block 0 (1), lane 1: sub-block 2 (3).
            let (t02, t13) = (split_bytes(pack(r(0), r(2))), split_bytes(pack(r(1), r(3))));
            // SAFETY: qs[0..32] inside the block.
            let v = load32(b.as_ptr().add(QS));
            let (lo, hi) = (_mm256_and_si256(v, f), _mm256_and_si256(_mm256_srli_epi16::<4>(v), f));
            // Sub-block k: the low nibbles of its 8 bytes, then the high ones.
            // SAFETY: outputs 16k .. 16k + 16 inside the block's 64.
            signed_lookup(_mm256_unpacklo_epi64(lo, hi), t02, o, o.add(32));
            signed_lookup(_mm256_unpackhi_epi64(lo, hi), t13, o.add(16), o.add(48));
        }
    }
}

#[target_feature(enable = "avx2,f16c")]
pub unsafe fn tq2_0(src: &[u8], dst: &mut [u16]) {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables, and the pointers and lengths are as documented.
    unsafe {
        use block::tq2_0::*;
        // Crumb q is the value q - 1: entry q of d * (-1, 0, 1, 2).
        let values = _mm256_setr_ps(-1.0, 0.0, 1.0, 2.0, 0.0, 0.0, 0.0, 0.0);
        for (b, o) in blocks(src, dst, BYTES, ELEMS) {
            let t = bf16_table8(_mm256_mul_ps(values, _mm256_set1_ps(f16_at(b, D))));
            let t = _mm256_broadcastsi128_si256(t);
            for h in 0..2 {
                // SAFETY: 32 of qs's 64 bytes; outputs 128h + 32s .. + 32 inside the block's 256.
                let v = load32(b.as_ptr().add(QS + 32 * h));
                for s in 0..4 {
                    let out = o.add(128 * h + 32 * s);
                    lookup32(bits(v, 2 * s as u32, 3), t, _mm256_setzero_si256(), out, out.add(16));
                }
            }
        }
    }
}

/// Base-3 digits (0, 1, 2) of 16 bytes: digit k of byte b is
/// ((b * 3^k mod 256) * 3) >> 8, with `pow3` holding each byte's 3^k.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn trits16(bytes: __m128i, pow3: __m256i) -> __m128i {
    let lo8 = _mm256_set1_epi16(0xFF);
    let q = _mm256_and_si256(_mm256_mullo_epi16(_mm256_cvtepu8_epi16(bytes), pow3), lo8);
    let t = _mm256_srli_epi16::<8>(_mm256_mullo_epi16(q, _mm256_set1_epi16(3)));
    _mm_packs_epi16(_mm256_castsi256_si128(t), _mm256_extracti128_si256::<1>(t))
}

#[target_feature(enable = "avx2,f16c")]
pub unsafe fn tq1_0(src: &[u8], dst: &mut [u16]) {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables, and the pointers and lengths are as documented.
    unsafe {
        use block::tq1_0::*;
        const POW3: [i16; 5] = [1, 3, 9, 27, 81];
        // Elements 240..256: digit e/4 of qh[e % 4], so bytes qh[0..4] four times
        // with the powers 1, 3, 9, 27 in steps of four.
        let tail_pow = _mm256_setr_epi16(1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27);
        // Digit q is the value q - 1: entry q of d * (-1, 0, 1).
        let values = _mm256_setr_ps(-1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0);
        let zero = _mm_setzero_si128();
        for (b, o) in blocks(src, dst, BYTES, ELEMS) {
            let t = bf16_table8(_mm256_mul_ps(values, _mm256_set1_ps(f16_at(b, D))));
            let p = b.as_ptr();
            // SAFETY (each load): qs[0..48] and qh[0..4] lie inside the block;
            // outputs 0..256 inside its elements.
            let (q0, q1) = (_mm_loadu_si128(p.add(QS) as *const __m128i), _mm_loadu_si128(p.add(QS + 16) as *const __m128i));
            let q2 = _mm_loadu_si128(p.add(QS + 32) as *const __m128i);
            for (k, &pw) in POW3.iter().enumerate() {
                let pow = _mm256_set1_epi16(pw);
                lookup16(trits16(q0, pow), t, zero, o.add(32 * k));
                lookup16(trits16(q1, pow), t, zero, o.add(32 * k + 16));
                lookup16(trits16(q2, pow), t, zero, o.add(160 + 16 * k));
            }
            let qh = _mm_set1_epi32(i32::from_le_bytes([b[QH], b[QH + 1], b[QH + 2], b[QH + 3]]));
            lookup16(trits16(qh, tail_pow), t, zero, o.add(240));
        }
    }
}

/// Two grid entries (8 bytes each) and their sign bytes: the 16 grid
/// bytes, and 0xFF where value j's sign bit (bit j of its sign byte) is set.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn entries16(e0: u64, s0: u8, e1: u64, s1: u8) -> (__m128i, __m128i) {
    let g = _mm_set_epi64x(e1 as i64, e0 as i64);
    let bit = _mm_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    let s = _mm_set_epi64x(i64::from_ne_bytes([s1; 8]), i64::from_ne_bytes([s0; 8]));
    (g, _mm_cmpeq_epi8(_mm_and_si128(s, bit), bit))
}

/// The grids' byte values: IQ2's three at index `byte >> 4` (and again at
/// 4 + that, for a second scale), IQ3_XXS's eight at `byte >> 3`, IQ3_S's
/// eight at `byte >> 1` (checked below).
const IQ2_MAGS: [u8; 8] = [0x08, 0x19, 0x2B, 0, 0x08, 0x19, 0x2B, 0];
const IQ3XXS_MAGS: [u8; 8] = [0x04, 0x0C, 0x14, 0x1C, 0x24, 0x2C, 0x34, 0x3E];
const IQ3S_MAGS: [u8; 8] = [1, 3, 5, 7, 9, 11, 13, 15];

/// Whether every byte of every entry (`width` bytes) is `mags[byte >> shift]`.
const fn grid_bytes_are(grid: &[u64], width: usize, mags: &[u8; 8], shift: u32) -> bool {
    let mut i = 0;
    while i < grid.len() {
        let mut k = 0;
        while k < width {
            let b = (grid[i] >> (8 * k)) as u8;
            if mags[(b >> shift) as usize & 7] != b {
                return false;
            }
            k += 1;
        }
        i += 1;
    }
    true
}

const fn widen<const N: usize>(g: &[u32; N]) -> [u64; N] {
    let mut w = [0u64; N];
    let mut i = 0;
    while i < g.len() {
        w[i] = g[i] as u64;
        i += 1;
    }
    w
}

const _: () = {
    assert!(grid_bytes_are(&IQ2XXS_GRID, 8, &IQ2_MAGS, 4));
    assert!(grid_bytes_are(&IQ2XS_GRID, 8, &IQ2_MAGS, 4));
    assert!(grid_bytes_are(&IQ2S_GRID, 8, &IQ2_MAGS, 4));
    assert!(grid_bytes_are(&widen(&IQ3XXS_GRID), 4, &IQ3XXS_MAGS, 3));
    assert!(grid_bytes_are(&widen(&IQ3S_GRID), 4, &IQ3S_MAGS, 1));
};

/// A grid's magnitudes as f32 (exact).
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn mags_f32(m: &[u8; 8]) -> __m256 {
    // SAFETY: 8 readable bytes.
    unsafe { _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(m.as_ptr() as *const __m128i))) }
}

/// BF16(db * m) for the 8 magnitudes m as a `pshufb` table (low bytes,
/// then high bytes), db0 for entries 0..4 and db1 for 4..8 (IQ2's three
/// magnitudes fit twice: two 16-value groups' scales in one table), and
/// the masks that flip a negative value's sign bit: 0x80, or 0 where db is
/// NaN (see `grid16`).
#[inline(always)]
unsafe fn grid_table<L: Lut>(mags: __m256, db0: f32, db1: f32) -> (L::Table, __m128i, __m128i) {
    // SAFETY: inside a kernel of `kernels!` (avx2 at least).
    unsafe {
        let t = L::table8(_mm256_mul_ps(mags, _mm256_set_m128(_mm_set1_ps(db1), _mm_set1_ps(db0))));
        let flip = |db: f32| _mm_set1_epi8(if db.is_nan() { 0 } else { -128 });
        (t, flip(db0), flip(db1))
    }
}

/// 16 grid values (bytes `g`, negative where `neg`) times db, from
/// `grid_table`'s outputs: entry `BASE | byte >> SHIFT`, sign bit flipped
/// (`flip`) for the negative ones. gguf-py computes `(db * g) * sign`;
/// `db * g` is never NaN unless db is (g > 0), and otherwise `* -1` negates
/// it exactly and round to nearest even is symmetric, so its BF16 is the
/// positive one's with the sign bit flipped (zeros and infinities
/// included). A NaN db gives the canonical NaN either way: its flip is 0.
#[inline(always)]
unsafe fn grid16<L: Lut, const SHIFT: i32, const BASE: i8>((g, neg): (__m128i, __m128i), t: L::Table, flip: __m128i, out: *mut u16) {
    // SAFETY: inside a kernel of `kernels!` (avx2 at least); the caller
    // guarantees 16 writable u16 at out.
    unsafe {
        let m = _mm_or_si128(_mm_and_si128(_mm_srli_epi16::<SHIFT>(g), _mm_set1_epi8(7)), _mm_set1_epi8(BASE));
        // SAFETY: the caller guarantees 16 writable u16 at out.
        L::lookup16(m, t, _mm_and_si128(neg, flip), out);
    }
}

/// Two grid entries of 4 values each as one of 8 (IQ3).
#[inline(always)]
fn pair(lo: u32, hi: u32) -> u64 {
    lo as u64 | ((hi as u64) << 32)
}

/// IQ2_XS/IQ2_S: the table of two 16-value groups whose scales are the
/// nibbles of `scales`, each d * (0.5 + nibble) * 0.25.
#[inline(always)]
unsafe fn iq2_table<L: Lut>(mags: __m256, d: f32, scales: u8) -> (L::Table, __m128i, __m128i) {
    let db = |s: u8| d * (0.5 + s as f32) * 0.25;
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables.
    unsafe { grid_table::<L>(mags, db(scales & 0x0F), db(scales >> 4)) }
}

#[inline(always)]
unsafe fn iq2_xxs_body<L: Lut>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: inside a kernel of `kernels!`: its features are enabled, the
    // lengths checked.
    unsafe {
        use block::iq2_xxs::*;
        let mags = mags_f32(&IQ2_MAGS);
        for (b, o) in blocks(src, dst, BYTES, ELEMS) {
            let d = f16_at(b, D);
            for ib in 0..8 {
                let at = QS + 8 * ib;
                let aux = u32::from_le_bytes([b[at + 4], b[at + 5], b[at + 6], b[at + 7]]);
                let db = d * (0.5 + (aux >> 28) as f32) * 0.25;
                let (t, flip, _) = grid_table::<L>(mags, db, db);
                let sign = |l: usize| KSIGNS[((aux >> (7 * l)) & 0x7F) as usize];
                let entry = |l: usize| IQ2XXS_GRID[b[at + l] as usize];
                for h in 0..2 {
                    let q = entries16(entry(2 * h), sign(2 * h), entry(2 * h + 1), sign(2 * h + 1));
                    // SAFETY: outputs 32ib + 16h .. + 16 inside the block's 256.
                    grid16::<L, 4, 0>(q, t, flip, o.add(32 * ib + 16 * h));
                }
            }
        }
    }
}

#[inline(always)]
unsafe fn iq2_xs_body<L: Lut>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: inside a kernel of `kernels!`: its features are enabled, the
    // lengths checked.
    unsafe {
        use block::iq2_xs::*;
        let mags = mags_f32(&IQ2_MAGS);
        for (b, o) in blocks(src, dst, BYTES, ELEMS) {
            let d = f16_at(b, D);
            // Two groups of 16 values: four u16, each a 9-bit grid index and a 7-bit sign index.
            let qs: [u64; 8] = std::array::from_fn(|j| u64::from_le_bytes(b[QS + 8 * j..QS + 8 * j + 8].try_into().unwrap()));
            let group = |w: u64| {
                let (a, c) = (w as usize & 0xFFFF, (w >> 16) as usize & 0xFFFF);
                entries16(IQ2XS_GRID[a & 511], KSIGNS[a >> 9], IQ2XS_GRID[c & 511], KSIGNS[c >> 9])
            };
            for (j, &w) in qs.iter().enumerate() {
                let (t, flip0, flip1) = iq2_table::<L>(mags, d, b[SCALES + j]);
                // SAFETY: outputs 32j .. 32j + 32 inside the block's 256.
                grid16::<L, 4, 0>(group(w), t, flip0, o.add(32 * j));
                grid16::<L, 4, 4>(group(w >> 32), t, flip1, o.add(32 * j + 16));
            }
        }
    }
}

#[inline(always)]
unsafe fn iq2_s_body<L: Lut>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: inside a kernel of `kernels!`: its features are enabled, the
    // lengths checked.
    unsafe {
        use block::iq2_s::*;
        let mags = mags_f32(&IQ2_MAGS);
        for (b, o) in blocks(src, dst, BYTES, ELEMS) {
            let d = f16_at(b, D);
            let entry = |i: usize| IQ2S_GRID[b[QS + i] as usize | ((((b[QH + i / 4] >> (2 * (i % 4))) & 3) as usize) << 8)];
            let group = |k: usize| entries16(entry(2 * k), b[SIGNS + 2 * k], entry(2 * k + 1), b[SIGNS + 2 * k + 1]);
            for j in 0..8 {
                let k = 2 * j;
                let (t, flip0, flip1) = iq2_table::<L>(mags, d, b[SCALES + j]);
                // SAFETY: outputs 16k .. 16k + 32 inside the block's 256.
                grid16::<L, 4, 0>(group(k), t, flip0, o.add(16 * k));
                grid16::<L, 4, 4>(group(k + 1), t, flip1, o.add(16 * k + 16));
            }
        }
    }
}

#[inline(always)]
unsafe fn iq3_xxs_body<L: Lut>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: inside a kernel of `kernels!`: its features are enabled, the
    // lengths checked.
    unsafe {
        use block::iq3_xxs::*;
        let mags = mags_f32(&IQ3XXS_MAGS);
        for (b, o) in blocks(src, dst, BYTES, ELEMS) {
            let d = f16_at(b, D);
            for ib in 0..8 {
                let at = SCALES + 4 * ib;
                let aux = u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
                let db = d * (0.5 + (aux >> 28) as f32) * 0.5;
                let (t, flip, _) = grid_table::<L>(mags, db, db);
                let sign = |l: usize| KSIGNS[((aux >> (7 * l)) & 0x7F) as usize];
                let entry = |l: usize| {
                    let i = QS + 8 * ib + 2 * l;
                    pair(IQ3XXS_GRID[b[i] as usize], IQ3XXS_GRID[b[i + 1] as usize])
                };
                for h in 0..2 {
                    let q = entries16(entry(2 * h), sign(2 * h), entry(2 * h + 1), sign(2 * h + 1));
                    // SAFETY: outputs 32ib + 16h .. + 16 inside the block's 256.
                    grid16::<L, 3, 0>(q, t, flip, o.add(32 * ib + 16 * h));
                }
            }
        }
    }
}

#[inline(always)]
unsafe fn iq3_s_body<L: Lut>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: inside a kernel of `kernels!`: its features are enabled, the
    // lengths checked.
    unsafe {
        use block::iq3_s::*;
        let mags = mags_f32(&IQ3S_MAGS);
        for (b, o) in blocks(src, dst, BYTES, ELEMS) {
            let d = f16_at(b, D);
            for ib in 0..8 {
                let s = (b[SCALES + ib / 2] >> (4 * (ib % 2))) & 0x0F;
                let db = d * (1 + 2 * s) as f32;
                let (t, flip, _) = grid_table::<L>(mags, db, db);
                // The 8 grid indices of the group: byte qs[8ib + j], bit j
                // of qh[ib] as bit 8 (< 512); their entries in order are
                // the group's 32 bytes, one `vpgatherdd`.
                // SAFETY: qs[8ib .. 8ib + 8] inside the block; every index
                // below 512 = IQ3S_GRID.len().
                let qs = _mm256_cvtepu8_epi32(_mm_loadl_epi64(b.as_ptr().add(QS + 8 * ib) as *const __m128i));
                let hi = _mm256_srlv_epi32(_mm256_set1_epi32(b[QH + ib] as i32), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
                let idx = _mm256_or_si256(qs, _mm256_slli_epi32::<8>(_mm256_and_si256(hi, _mm256_set1_epi32(1))));
                let g = _mm256_i32gather_epi32::<4>(IQ3S_GRID.as_ptr() as *const i32, idx);
                // Value j's sign: bit j % 8 of signs[4ib + j / 8].
                let neg = bit_bytes32(u32::from_le_bytes([
                    b[SIGNS + 4 * ib],
                    b[SIGNS + 4 * ib + 1],
                    b[SIGNS + 4 * ib + 2],
                    b[SIGNS + 4 * ib + 3],
                ]));
                // SAFETY: outputs 32ib .. 32ib + 32 inside the block's 256.
                let o = o.add(32 * ib);
                grid16::<L, 1, 0>((_mm256_castsi256_si128(g), _mm256_castsi256_si128(neg)), t, flip, o);
                grid16::<L, 1, 0>((_mm256_extracti128_si256::<1>(g), _mm256_extracti128_si256::<1>(neg)), t, flip, o.add(16));
            }
        }
    }
}

/// The IQ1 outputs dl * (g + delta) for g = -1, 0, 1: entries 0..3 with
/// `delta0`, 4..7 with `delta1` (the add and the multiply each rounded, as
/// in the scalar kernel), as a `bf16_table8` table.
#[inline(always)]
unsafe fn iq1_table<L: Lut>(dl: f32, delta0: f32, delta1: f32) -> L::Table {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables.
    unsafe {
        let g = _mm256_setr_ps(-1.0, 0.0, 1.0, 0.0, -1.0, 0.0, 1.0, 0.0);
        let delta = _mm256_set_m128(_mm_set1_ps(delta1), _mm_set1_ps(delta0));
        L::table8(_mm256_mul_ps(_mm256_add_ps(g, delta), _mm256_set1_ps(dl)))
    }
}

/// 16 IQ1 outputs: two grid entries (i8 values -1, 0, 1), the first with
/// `iq1_table`'s `delta0`, the second with its `delta1`.
#[inline(always)]
unsafe fn iq1_16<L: Lut>(e0: u64, e1: u64, t: L::Table, out: *mut u16) {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables, and the pointers and lengths are as documented.
    unsafe {
        let g = _mm_set_epi64x(e1 as i64, e0 as i64);
        let idx =
            _mm_or_si128(_mm_and_si128(_mm_add_epi8(g, _mm_set1_epi8(1)), _mm_set1_epi8(3)), _mm_set_epi64x(0x0404_0404_0404_0404, 0));
        // SAFETY: the caller guarantees 16 writable u16 at out.
        L::lookup16(idx, t, _mm_setzero_si128(), out);
    }
}

#[inline(always)]
unsafe fn iq1_s_body<L: Lut>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: inside a kernel of `kernels!`: its features are enabled, the
    // lengths checked.
    unsafe {
        use block::iq1_s::*;
        for (b, o) in blocks(src, dst, BYTES, ELEMS) {
            let d = f16_at(b, D);
            for ib in 0..8 {
                let qh = u16::from_le_bytes([b[QH + 2 * ib], b[QH + 2 * ib + 1]]);
                let dl = d * (2 * ((qh >> 12) & 7) + 1) as f32;
                let delta = f32::from_bits(0x3E00_0000 | (((qh & 0x8000) as u32) << 16)); // ±0.125 by bit 15
                let entry = |l: usize| IQ1S_GRID[b[QS + 4 * ib + l] as usize | ((((qh >> (3 * l)) & 7) as usize) << 8)];
                let t = iq1_table::<L>(dl, delta, delta);
                for h in 0..2 {
                    // SAFETY: outputs 32ib + 16h .. + 16 inside the block's 256.
                    iq1_16::<L>(entry(2 * h), entry(2 * h + 1), t, o.add(32 * ib + 16 * h));
                }
            }
        }
    }
}

#[inline(always)]
unsafe fn iq1_m_body<L: Lut>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: inside a kernel of `kernels!`: its features are enabled, the
    // lengths checked.
    unsafe { L::iq1_m(src, dst) }
}

/// IQ1_M per 16 outputs: a table of 8 (`iq1_table`), two grid entries
/// looked up in it (`iq1_16`).
#[inline(always)]
unsafe fn iq1_m_groups<L: Lut>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: inside a kernel of `kernels!`: its features are enabled, the
    // lengths checked.
    unsafe {
        use block::iq1_m::*;
        for (b, o) in blocks(src, dst, BYTES, ELEMS) {
            let d = iq1_m_d(b);
            // The four scale words as one u64: group k's 3 bits at 16 (k / 4) + 3 (k % 4).
            let sc = u64::from_le_bytes(b[SCALES..SCALES + 8].try_into().unwrap());
            for k in 0..16 {
                let s = ((sc >> (16 * (k / 4) + 3 * (k % 4))) & 7) as u16;
                let dl = d * (2 * s + 1) as f32;
                // Groups 2k and 2k + 1 share byte k of qh: a nibble each.
                let (h0, h1) = (b[QH + k] & 0x0F, b[QH + k] >> 4);
                let entry = |i: usize, h: u8| IQ1S_GRID[b[QS + i] as usize | (((h & 7) as usize) << 8)];
                let (e0, e1) = (entry(2 * k, h0), entry(2 * k + 1, h1));
                // ±0.125 by bit 3 of the nibble, without a branch (random bits mispredict).
                let delta = |h: u8| f32::from_bits(0x3E00_0000 | (((h & 8) as u32) << 28));
                // SAFETY: outputs 16k .. 16k + 16 inside the block's 256.
                iq1_16::<L>(e0, e1, iq1_table::<L>(dl, delta(h0), delta(h1)), o.add(16 * k));
            }
        }
    }
}

/// 16 i32 lanes (a vector constant): lane `l` is the expression.
macro_rules! lanes16 {
    (|$l:ident| $e:expr) => {{
        let mut t = [0i32; 16];
        let mut $l = 0i32;
        while $l < 16 {
            t[$l as usize] = $e;
            $l += 1;
        }
        t
    }};
}

/// A `lanes16` constant as a vector.
#[inline(always)]
unsafe fn vec16(t: &[i32; 16]) -> __m512i {
    // SAFETY: 64 readable bytes; callers run with avx512f enabled.
    unsafe { _mm512_loadu_si512(t.as_ptr() as *const __m512i) }
}

/// Group k's scale word (k / 4) for each lane k of `IQ1M_DL_SHIFT`.
static IQ1M_SCALE_WORD: [i32; 16] = lanes16!(|k| k / 4);
/// Its 3-bit scale at bit 3 (k % 4) of that word.
static IQ1M_DL_SHIFT: [i32; 16] = lanes16!(|k| 3 * (k % 4));
/// Grid index i's qh byte (i / 2 of the 16 qh bytes; plus 8 for i >= 16).
static IQ1M_QH_BYTE: [i32; 16] = lanes16!(|i| i / 2);
/// Left shift putting its nibble's 3 index bits at bit 8: the low nibble
/// by 8, the high one by 4.
static IQ1M_QH_SHIFT: [i32; 16] = lanes16!(|i| if i % 2 == 0 { 8 } else { 4 });
/// The table lanes of a pair of groups: lane l is group l / 8 of the pair,
/// its 8-value half (l / 4) % 2, grid value l % 4 - 1 (lane 3 unused).
/// The pair's group for each lane (add 2p for pair p).
static IQ1M_PAIR_GROUP: [i32; 16] = lanes16!(|l| l / 8);
/// Left shift bringing the delta sign bit of lane l's 8 values (bit 3 of
/// their nibble: bit 4 (l / 4) + 3 of the pair's two qh bytes) to bit 31.
static IQ1M_DELTA_SHIFT: [i32; 16] = lanes16!(|l| 28 - 4 * (l / 4));
/// Lane l's grid value as f32 bits (-1, 0, 1; 0 in the unused lane).
static IQ1M_GRID_VALUE: [i32; 16] = lanes16!(|l| match l % 4 {
    0 => (-1.0f32).to_bits() as i32,
    2 => 1.0f32.to_bits() as i32,
    _ => 0,
});

/// IQ1_M on AVX-512, a block at a time in vectors. The 32 grid indices
/// (qs byte, 3 bits of a qh nibble) are built 16 at a time and their
/// entries fetched 8 at a time (`vpgatherdq`: 64 values, 4 groups). The
/// outputs dl * (g + delta) are computed per pair of groups, 16 f32 lanes
/// (group, delta half, g = -1, 0, 1), with the scalar kernel's operations:
/// dl = d * (2s + 1) (exact integer -> f32, one `vmulps`), g + delta (a
/// `vaddps`; exact anyway), times dl (a `vmulps`); two pairs are rounded
/// together by `R::pack` (NaN -> 0x7FC0), the 32-word table of 4 groups,
/// and each value looks its output up in it with one `vpermw`: word
/// 4 * (its 8-value run within the 4 groups) + g + 1.
#[inline(always)]
unsafe fn iq1_m_vectors<R: Round>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: inside a kernel of `kernels!` with avx512f, avx512bw,
    // avx512vl and f16c (and avx512bf16 for Bf16Round) enabled; the
    // lengths checked.
    unsafe {
        use block::iq1_m::*;
        for (b, o) in blocks(src, dst, BYTES, ELEMS) {
            let p = b.as_ptr();
            // SAFETY: scales[0..8] inside the block.
            let sc = (p.add(SCALES) as *const u64).read_unaligned();
            // d: the top nibbles of the four scale words (`iq1_m_d`), converted exactly by F16C.
            let bits = ((sc >> 12) & 0xF) | ((sc >> 24) & 0xF0) | ((sc >> 36) & 0xF00) | ((sc >> 48) & 0xF000);
            let d = _mm512_cvtph_ps(_mm256_set1_epi16(bits as i16));
            // dl of the 16 groups: 2s + 1 is ((word << 1) >> 3 (k % 4)) & 0xE | 1.
            let words = _mm_slli_epi32::<1>(_mm_cvtepu16_epi32(_mm_cvtsi64_si128(sc as i64)));
            let s =
                _mm512_srlv_epi32(_mm512_permutexvar_epi32(vec16(&IQ1M_SCALE_WORD), _mm512_castsi128_si512(words)), vec16(&IQ1M_DL_SHIFT));
            let odd = _mm512_ternarylogic_epi32::<0xEA>(s, _mm512_set1_epi32(0xE), _mm512_set1_epi32(1));
            let dl = _mm512_mul_ps(d, _mm512_cvtepi32_ps(odd));
            // SAFETY: qh[0..16] inside the block.
            let qh = _mm512_cvtepu8_epi32(_mm_loadu_si128(p.add(QH) as *const __m128i));
            // Grid indices 16m .. 16m + 16: qs byte | 3 bits of the nibble << 8 (< 2048).
            let indices = |m: usize| {
                // SAFETY: qs[16m .. 16m + 16] inside the block (m < 2).
                let qs = _mm512_cvtepu8_epi32(_mm_loadu_si128(p.add(QS + 16 * m) as *const __m128i));
                let nib = _mm512_permutexvar_epi32(_mm512_add_epi32(vec16(&IQ1M_QH_BYTE), _mm512_set1_epi32(8 * m as i32)), qh);
                _mm512_ternarylogic_epi32::<0xF8>(qs, _mm512_sllv_epi32(nib, vec16(&IQ1M_QH_SHIFT)), _mm512_set1_epi32(0x700))
            };
            let (i0, i1) = (indices(0), indices(1));
            // SAFETY: outputs 64q .. 64q + 64 inside the block's 256 (q < 4).
            iq1_m_quad::<R>(p, dl, _mm512_castsi512_si256(i0), 0, o);
            iq1_m_quad::<R>(p, dl, _mm512_extracti64x4_epi64::<1>(i0), 1, o);
            iq1_m_quad::<R>(p, dl, _mm512_castsi512_si256(i1), 2, o);
            iq1_m_quad::<R>(p, dl, _mm512_extracti64x4_epi64::<1>(i1), 3, o);
        }
    }
}

/// `iq1_m_vectors`' groups 4q .. 4q + 4 of the block at `p` (grid indices
/// `idx`: 8q .. 8q + 8; `dl` of the 16 groups): outputs 64q .. 64q + 64 at `o`.
#[inline(always)]
unsafe fn iq1_m_quad<R: Round>(p: *const u8, dl: __m512, idx: __m256i, q: usize, o: *mut u16) {
    // SAFETY: as in iq1_m_vectors; the caller guarantees a whole block at
    // p, 64 writable u16 at o + 64q, and q < 4.
    unsafe {
        // SAFETY: every index below 2048 = IQ1S_GRID.len().
        let g = _mm512_i32gather_epi64::<8>(idx, IQ1S_GRID.as_ptr() as *const i64);
        let t = R::pack(iq1_m_pair(p, dl, 2 * q), iq1_m_pair(p, dl, 2 * q + 1));
        // Byte j of 64 (4 groups' values): 1 + 4 (j / 8), added to g.
        const B: i64 = 0x0101_0101_0101_0101;
        let i = _mm512_add_epi8(g, _mm512_setr_epi64(B, 5 * B, 9 * B, 13 * B, 17 * B, 21 * B, 25 * B, 29 * B));
        let out = o.add(64 * q);
        _mm512_storeu_si512(out as *mut __m512i, _mm512_permutexvar_epi16(_mm512_cvtepu8_epi16(_mm512_castsi512_si256(i)), t));
        _mm512_storeu_si512(
            out.add(32) as *mut __m512i,
            _mm512_permutexvar_epi16(_mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64::<1>(i)), t),
        );
    }
}

/// `iq1_m_vectors`' 16 f32 outputs of groups 2 pair, 2 pair + 1 of the
/// block at `p`: lane l is dl * (g + delta) for group 2 pair + l / 8, its
/// 8-value half (l / 4) % 2, g = l % 4 - 1 (0 in lane 3).
#[inline(always)]
unsafe fn iq1_m_pair(p: *const u8, dl: __m512, pair: usize) -> __m512 {
    // SAFETY: as in iq1_m_vectors; the caller guarantees a whole block at
    // p and pair < 8.
    unsafe {
        use block::iq1_m::*;
        // The pair's two qh bytes (and two more, shifted out).
        // SAFETY: qh[2 pair .. 2 pair + 4] inside the block (bytes 32..50 of 56).
        let bits = _mm512_set1_epi32((p.add(QH + 2 * pair) as *const i32).read_unaligned());
        // ±0.125: 0x3E00_0000 with the delta bit as the sign.
        let delta = _mm512_ternarylogic_epi32::<0xEA>(
            _mm512_sllv_epi32(bits, vec16(&IQ1M_DELTA_SHIFT)),
            _mm512_set1_epi32(i32::MIN),
            _mm512_set1_epi32(0x3E00_0000),
        );
        let dl = _mm512_permutexvar_ps(_mm512_add_epi32(vec16(&IQ1M_PAIR_GROUP), _mm512_set1_epi32(2 * pair as i32)), dl);
        _mm512_mul_ps(_mm512_add_ps(_mm512_castsi512_ps(vec16(&IQ1M_GRID_VALUE)), _mm512_castsi512_ps(delta)), dl)
    }
}
