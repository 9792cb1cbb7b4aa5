//! x86 kernels of Q1_0 and Q2_0 (scalar/lowbit.rs), for either output
//! (`O`): every output is one of a block's two (Q1_0: O(d) and O(-d)) or
//! four (Q2_0: O((q - 1) * d)) values, rounded once per block with the scalar kernel's
//! operations, then selected per element: Q1_0 by a mask made from its bit
//! (`vpblendvb` on AVX2, a `k` register on AVX-512), Q2_0 by looking its
//! code up in the four values (`vpshufb` on AVX2, `vpermw` on AVX-512).
//! Only the per-block table is rounded (BF16: the integer formula;
//! float16: `vcvtps2ph` or `f32_to_f16`), so the AVX-512 kernels need no
//! AVX512_BF16 variant.
//!
//! Every function is `unsafe` with `#[target_feature]`: callers must have
//! checked `Isa::Avx2.supported()` (`Isa::Avx512.supported()` for the
//! `_avx512` ones). Lengths: `src` whole blocks, `dst` their elements
//! (checked by `Kernel::check`).

use std::arch::x86_64::*;

use super::avx2::Out256;
use super::emit::blocks;
use crate::scalar::f16_at;
use weightstream_blocks::block;

/// O(d) and O(-d), the two values of a Q1_0 block (scalar/lowbit.rs).
fn signs<O: Out256>(b: &[u8]) -> (i16, i16) {
    let d = f16_at(b, block::q1_0::D);
    (O::from_f32(d) as i16, O::from_f32(-d) as i16)
}

#[target_feature(enable = "avx2,f16c")]
pub unsafe fn q1_0<O: Out256>(src: &[u8], dst: &mut [u16]) {
    use block::q1_0::*;
    let bit = _mm256_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, i16::MIN);
    for (b, o) in blocks(src, dst, BYTES, ELEMS) {
        let (pos, neg) = signs::<O>(b);
        let (pos, neg) = (_mm256_set1_epi16(pos), _mm256_set1_epi16(neg));
        for k in 0..8 {
            // Elements 16k .. 16k + 16: bits 0..16 of the LE u16 at qs[2k].
            let w = _mm256_set1_epi16(i16::from_le_bytes([b[QS + 2 * k], b[QS + 2 * k + 1]]));
            let set = _mm256_cmpeq_epi16(_mm256_and_si256(w, bit), bit);
            // SAFETY: outputs 16k .. 16k + 16 lie inside the block's 128.
            unsafe { _mm256_storeu_si256(o.add(16 * k) as *mut __m256i, _mm256_blendv_epi8(neg, pos, set)) };
        }
    }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,f16c")]
pub unsafe fn q1_0_avx512<O: Out256>(src: &[u8], dst: &mut [u16]) {
    use block::q1_0::*;
    for (b, o) in blocks(src, dst, BYTES, ELEMS) {
        let (pos, neg) = signs::<O>(b);
        let (pos, neg) = (_mm512_set1_epi16(pos), _mm512_set1_epi16(neg));
        for k in 0..4 {
            // Elements 32k .. 32k + 32: bits of the LE u32 at qs[4k].
            let m = u32::from_le_bytes([b[QS + 4 * k], b[QS + 4 * k + 1], b[QS + 4 * k + 2], b[QS + 4 * k + 3]]);
            // SAFETY: outputs 32k .. 32k + 32 lie inside the block's 128.
            unsafe { _mm512_storeu_si512(o.add(32 * k) as *mut __m512i, _mm512_mask_blend_epi16(m, neg, pos)) };
        }
    }
}

/// The four values of a Q2_0 block, O((q - 1) * d) for q = 0..4, as four
/// words repeated through the vector: the scalar kernel's multiply (exact
/// int -> f32, one `vmulps`) and rounding.
#[inline(always)]
unsafe fn values4<O: Out256>(b: &[u8]) -> __m256i {
    // SAFETY: inside a kernel with avx2 and f16c enabled.
    unsafe {
        let levels = _mm256_setr_ps(-1.0, 0.0, 1.0, 2.0, 0.0, 0.0, 0.0, 0.0);
        let r = O::pack8(_mm256_mul_ps(levels, _mm256_set1_ps(f16_at(b, block::q2_0::D))));
        // The four values are the first 8 bytes; repeat them.
        _mm256_broadcastq_epi64(r)
    }
}

#[target_feature(enable = "avx2,f16c")]
pub unsafe fn q2_0<O: Out256>(src: &[u8], dst: &mut [u16]) {
    use block::q2_0::*;
    // The LE u16 at qs[2k] holds elements 8k + e at bits 2e. Each lane gets
    // one such word in all 8 words; the multiply puts code e at bits 14..16.
    let words = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
    let up = _mm256_broadcastsi128_si256(_mm_setr_epi16(1 << 14, 1 << 12, 1 << 10, 1 << 8, 1 << 6, 1 << 4, 1 << 2, 1));
    let (pair, high) = (_mm256_set1_epi16(0x0202), _mm256_set1_epi16(0x0100));
    for (b, o) in blocks(src, dst, BYTES, ELEMS) {
        // SAFETY: this kernel's features.
        let t = unsafe { values4::<O>(b) };
        for k in 0..4 {
            let p = QS + 4 * k;
            let v = _mm256_set1_epi32(i32::from_le_bytes([b[p], b[p + 1], b[p + 2], b[p + 3]]));
            let q = _mm256_srli_epi16::<14>(_mm256_mullo_epi16(_mm256_shuffle_epi8(v, words), up));
            // Word q of the table: bytes 2q and 2q + 1.
            let idx = _mm256_add_epi16(_mm256_mullo_epi16(q, pair), high);
            // SAFETY: outputs 16k .. 16k + 16 lie inside the block's 64.
            unsafe { _mm256_storeu_si256(o.add(16 * k) as *mut __m256i, _mm256_shuffle_epi8(t, idx)) };
        }
    }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,f16c")]
pub unsafe fn q2_0_avx512<O: Out256>(src: &[u8], dst: &mut [u16]) {
    use block::q2_0::*;
    // Byte j / 4 of 8 to word j of 32, shifted right by 2(j % 4); `vpermw`
    // reads the low 5 bits of each index, and the table repeats every 4.
    let spread = _mm256_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7);
    let shifts = _mm512_set1_epi64(0x0006_0004_0002_0000);
    for (b, o) in blocks(src, dst, BYTES, ELEMS) {
        // SAFETY: this kernel's features.
        let t = _mm512_broadcastq_epi64(_mm256_castsi256_si128(unsafe { values4::<O>(b) }));
        for k in 0..2 {
            let p = QS + 8 * k;
            let v = _mm256_set1_epi64x(i64::from_le_bytes(b[p..p + 8].try_into().unwrap()));
            // The broadcast puts bytes 4..8 in lane 1 at 4..8 as well.
            let bytes = _mm256_shuffle_epi8(v, spread);
            let q = _mm512_srlv_epi16(_mm512_cvtepu8_epi16(bytes), shifts);
            // SAFETY: outputs 32k .. 32k + 32 lie inside the block's 64.
            unsafe { _mm512_storeu_si512(o.add(32 * k) as *mut __m512i, _mm512_permutexvar_epi16(q, t)) };
        }
    }
}
