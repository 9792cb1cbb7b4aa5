//! x86 kernels of the K-quants Q2_K ... Q6_K, each for AVX2 and AVX-512
//! through emit.rs's `Emit`.

use std::arch::x86_64::*;

use super::emit::*;
use crate::scalar::{f16_at, k4_scale_min, q3_k_scale};
use weightstream_blocks::block;

#[inline(always)]
pub(super) unsafe fn q2_k_body<E: Emit>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: as in q4_1_body.
    unsafe {
        use block::q2_k::*;
        for (b, o) in blocks(src, dst, BYTES, ELEMS) {
            let (d, dmin) = (f16_at(b, D), f16_at(b, DMIN));
            let finite = d.is_finite() && dmin.is_finite();
            let scale = |k: usize| (d * (b[SCALES + k] & 0x0F) as f32, dmin * (b[SCALES + k] >> 4) as f32);
            for h in 0..2 {
                // SAFETY: 32 of qs's 64 bytes; outputs h*128 + s*32 .. +32 inside the block's 256.
                let v = load32(b.as_ptr().add(QS + 32 * h));
                for s in 0..4 {
                    let k = 8 * h + 2 * s;
                    let ((d0, m0), (d1, m1)) = (scale(k), scale(k + 1));
                    E::emit32::<false, SUB>(bits(v, 2 * s as u32, 3), d0, m0, d1, m1, finite, o.add(128 * h + 32 * s));
                }
            }
        }
    }
}

#[inline(always)]
pub(super) unsafe fn q3_k_body<E: Emit>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: as in q4_1_body.
    unsafe {
        use block::q3_k::*;
        for (b, o) in blocks(src, dst, BYTES, ELEMS) {
            let d = f16_at(b, D);
            let scale = |k: usize| d * q3_k_scale(&b[SCALES..], k) as f32;
            // SAFETY: the 32 hmask bytes, 32 of the 64 qs bytes; outputs inside the block.
            let hmask = load32(b.as_ptr().add(HMASK));
            for h in 0..2 {
                let v = load32(b.as_ptr().add(QS + 32 * h));
                for s in 0..4 {
                    // q = 2 bits, minus 4 where bit 4h + s of hmask[l] is clear.
                    let minus = _mm256_andnot_si256(where_bit(hmask, (4 * h + s) as u32, -1), _mm256_set1_epi8(4));
                    let q = _mm256_sub_epi8(bits(v, 2 * s as u32, 3), minus);
                    let k = 8 * h + 2 * s;
                    E::emit32::<true, NONE>(q, scale(k), 0.0, scale(k + 1), 0.0, d.is_finite(), o.add(128 * h + 32 * s));
                }
            }
        }
    }
}

/// Q4_K and Q5_K: sub-blocks of 32 with (d * sc, dmin * m); `fifth` adds
/// Q5_K's bit from `qh` (None for Q4_K).
#[inline(always)]
pub(super) unsafe fn k4_family<E: Emit>(src: &[u8], dst: &mut [u16], layout: &block::BlockLayout, fifth: Option<usize>) {
    // SAFETY: as in q4_1_body.
    unsafe {
        let field = |n| layout.field(n).expect("K-quant field").0;
        let (d_at, dmin_at, sc_at, qs_at) = (field("D"), field("DMIN"), field("SCALES"), field("QS"));
        for (b, o) in blocks(src, dst, layout.bytes, layout.elems) {
            let (d, dmin) = (f16_at(b, d_at), f16_at(b, dmin_at));
            let finite = d.is_finite() && dmin.is_finite();
            // SAFETY: 32-byte loads at qs + 32c (c < 4) and qh lie inside the block.
            let qh = fifth.map(|at| load32(b.as_ptr().add(at)));
            for c in 0..4 {
                let v = load32(b.as_ptr().add(qs_at + 32 * c));
                for half in 0..2 {
                    let k = 2 * c + half;
                    let (sc, m) = k4_scale_min(&b[sc_at..], k);
                    let (dl, ml) = (d * sc as f32, dmin * m as f32);
                    let mut q = bits(v, 4 * half as u32, 0x0F);
                    if let Some(h) = qh {
                        q = _mm256_or_si256(q, where_bit(h, k as u32, 0x10));
                    }
                    E::emit32::<false, SUB>(q, dl, ml, dl, ml, finite, o.add(32 * k));
                }
            }
        }
    }
}

#[inline(always)]
pub(super) unsafe fn q4_k_body<E: Emit>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: as in q4_1_body.
    unsafe { k4_family::<E>(src, dst, &block::q4_k::LAYOUT, None) }
}

#[inline(always)]
pub(super) unsafe fn q5_k_body<E: Emit>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: as in q4_1_body.
    unsafe { k4_family::<E>(src, dst, &block::q5_k::LAYOUT, Some(block::q5_k::QH)) }
}

#[inline(always)]
pub(super) unsafe fn q6_k_body<E: Emit>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: as in q4_1_body.
    unsafe {
        use block::q6_k::*;
        for (b, o) in blocks(src, dst, BYTES, ELEMS) {
            let d = f16_at(b, D);
            let scale = |k: usize| d * (b[SCALES + k] as i8) as f32;
            for h in 0..2 {
                // SAFETY: ql[64h .. 64h + 64] and qh[32h .. 32h + 32] inside the block.
                let (l0, l1) = (load32(b.as_ptr().add(QL + 64 * h)), load32(b.as_ptr().add(QL + 64 * h + 32)));
                let hi = load32(b.as_ptr().add(QH + 32 * h));
                for t in 0..4 {
                    // Elements 32t .. 32t + 32 of the half: low nibbles of ql
                    // for t < 2, high nibbles after; two high bits at shift 2t.
                    let low = bits(if t % 2 == 0 { l0 } else { l1 }, 4 * (t / 2) as u32, 0x0F);
                    let q = _mm256_or_si256(low, _mm256_slli_epi16::<4>(bits(hi, 2 * t as u32, 3)));
                    let k = 8 * h + 2 * t;
                    E::emit32::<true, NONE>(
                        _mm256_sub_epi8(q, _mm256_set1_epi8(32)),
                        scale(k),
                        0.0,
                        scale(k + 1),
                        0.0,
                        d.is_finite(),
                        o.add(128 * h + 32 * t),
                    );
                }
            }
        }
    }
}

kernels! {
    q2_k, q2_k_avx512_int, q2_k_avx512 => q2_k_body;
    q3_k, q3_k_avx512_int, q3_k_avx512 => q3_k_body;
    q4_k, q4_k_avx512_int, q4_k_avx512 => q4_k_body;
    q5_k, q5_k_avx512_int, q5_k_avx512 => q5_k_body;
    q6_k, q6_k_avx512_int, q6_k_avx512 => q6_k_body;
}
