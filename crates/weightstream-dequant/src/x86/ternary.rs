//! AVX2 kernels of the ternary formats TQ1_0 and TQ2_0 (lookup.rs), for
//! either output.

use std::arch::x86_64::*;

use super::avx2::Out256;
use super::emit::{bits, blocks, load32};
use super::lookup::*;
use crate::scalar::f16_at;
use weightstream_blocks::block;

#[target_feature(enable = "avx2,f16c")]
pub unsafe fn tq2_0<O: Out256>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables, and the pointers and lengths are as documented.
    unsafe {
        use block::tq2_0::*;
        // Crumb q is the value q - 1: entry q of d * (-1, 0, 1, 2).
        let values = _mm256_setr_ps(-1.0, 0.0, 1.0, 2.0, 0.0, 0.0, 0.0, 0.0);
        for (b, o) in blocks(src, dst, BYTES, ELEMS) {
            let t = table8::<O>(_mm256_mul_ps(values, _mm256_set1_ps(f16_at(b, D))));
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
pub(super) fn trits16(bytes: __m128i, pow3: __m256i) -> __m128i {
    let lo8 = _mm256_set1_epi16(0xFF);
    let q = _mm256_and_si256(_mm256_mullo_epi16(_mm256_cvtepu8_epi16(bytes), pow3), lo8);
    let t = _mm256_srli_epi16::<8>(_mm256_mullo_epi16(q, _mm256_set1_epi16(3)));
    _mm_packs_epi16(_mm256_castsi256_si128(t), _mm256_extracti128_si256::<1>(t))
}

#[target_feature(enable = "avx2,f16c")]
pub unsafe fn tq1_0<O: Out256>(src: &[u8], dst: &mut [u16]) {
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
            let t = table8::<O>(_mm256_mul_ps(values, _mm256_set1_ps(f16_at(b, D))));
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
