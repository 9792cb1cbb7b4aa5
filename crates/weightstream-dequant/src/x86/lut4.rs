//! AVX2 kernels of the 4-bit codebook formats: IQ4_NL, IQ4_XS, MXFP4 and
//! NVFP4 (a nibble picks one of 16 levels; lookup.rs), for either output
//! (the tables are built with its rounding). Under
//! `Isa::Avx512` these run too: already faster than memcpy on one thread.

use std::arch::x86_64::*;

use super::avx2::Out256;
use super::emit::{blocks, load32};
use super::lookup::*;
use crate::scalar::{e8m0_half, f16_at, iq4_xs_scale, ue4m3_half};
use weightstream_blocks::block;
use weightstream_blocks::block_tables::*;

/// The 32 values of 16 bytes of nibbles (low nibbles, then high), looked
/// up in `levels` and scaled by `d`, to `out`: the 16 possible outputs
/// computed once (`products16`), then a `pshufb` per byte of them.
#[inline(always)]
pub(super) unsafe fn lut32<O: Out256>(qs: *const u8, levels: (__m256, __m256), d: f32, out: *mut u16) {
    // SAFETY: inside a kernel with avx2 and f16c enabled (below).
    unsafe {
        let mask = _mm_set1_epi8(0x0F);
        // SAFETY: the caller guarantees 16 readable bytes at qs and 32 writable u16 at out.
        let v = _mm_loadu_si128(qs as *const __m128i);
        let idx = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16::<4>(v), mask), _mm_and_si128(v, mask));
        let (lo, hi) = products16::<O>(levels, d);
        store_bytes(_mm256_shuffle_epi8(lo, idx), _mm256_shuffle_epi8(hi, idx), out, out.add(16));
    }
}

#[target_feature(enable = "avx2,f16c")]
pub unsafe fn iq4_nl<O: Out256>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables, and the pointers and lengths are as documented.
    unsafe {
        use block::iq4_nl::*;
        let levels = levels_f32(&IQ4NL_VALUES);
        for (b, o) in blocks(src, dst, BYTES, ELEMS) {
            // SAFETY: 16 bytes of qs inside the block; 32 outputs at o.
            lut32::<O>(b.as_ptr().add(QS), levels, f16_at(b, D), o);
        }
    }
}

#[target_feature(enable = "avx2,f16c")]
pub unsafe fn iq4_xs<O: Out256>(src: &[u8], dst: &mut [u16]) {
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
                lut32::<O>(b.as_ptr().add(QS + 16 * k), levels, dl, o.add(32 * k));
            }
        }
    }
}

#[target_feature(enable = "avx2,f16c")]
pub unsafe fn mxfp4<O: Out256>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables, and the pointers and lengths are as documented.
    unsafe {
        use block::mxfp4::*;
        let levels = levels_f32(&E2M1_DOUBLED);
        for (b, o) in blocks(src, dst, BYTES, ELEMS) {
            // SAFETY: 16 bytes of qs inside the block; 32 outputs at o.
            lut32::<O>(b.as_ptr().add(QS), levels, e8m0_half(b[E]), o);
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
/// magnitude q & 7, negated for q > 8 by flipping the sign bit (bit 15).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn signed_lookup(q: __m256i, t: __m256i, out0: *mut u16, out1: *mut u16) {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables, and the pointers and lengths are as documented.
    unsafe {
        let sign = _mm256_and_si256(_mm256_cmpgt_epi8(q, _mm256_set1_epi8(8)), _mm256_set1_epi8(-128));
        // SAFETY: the caller guarantees 16 writable u16 at out0 and at out1.
        lookup32(_mm256_and_si256(q, _mm256_set1_epi8(7)), t, sign, out0, out1);
    }
}

/// NVFP4: per sub-block scale s, the 8 outputs O(s * |level|) are
/// computed once (4 `vmulps` per 64 values), and a nibble's output is one
/// of them, with the sign bit set for the negative levels (q > 8). The same
/// bits as the scalar `s * level`: s (`ue4m3_half`) is finite and >= +0, so
/// `s * -|l|` is exactly `-(s * |l|)` (no NaN can arise), and round to
/// nearest even is symmetric, so its output is the positive one's with the
/// sign bit flipped, zero included (`s = 0`: -0, 0x8000, as in the scalar
/// kernel). Level 0 at q = 8 is +0 (an i8 has no -0): not flipped.
#[target_feature(enable = "avx2,f16c")]
pub unsafe fn nvfp4<O: Out256>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables, and the pointers and lengths are as documented.
    unsafe {
        use block::nvfp4::*;
        let mags = levels_f32(&E2M1_DOUBLED).0;
        let f = _mm256_set1_epi8(0x0F);
        for (b, o) in blocks(src, dst, BYTES, ELEMS) {
            let x = |k: usize| _mm256_mul_ps(mags, _mm256_set1_ps(ue4m3_half(b[D + k])));
            // Lane 0: sub-block 0 (1), lane 1: sub-block 2 (3).
            let (t02, t13) = (split_bytes(O::pack16(x(0), x(2))), split_bytes(O::pack16(x(1), x(3))));
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
