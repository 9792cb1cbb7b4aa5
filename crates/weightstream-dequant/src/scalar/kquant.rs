//! Portable kernels of the K-quants: Q2_K ... Q6_K (256-element
//! super-blocks with 6-bit or 4-bit sub-block scales).

use super::{crumb, f16_at};
use crate::output::Output;
use weightstream_blocks::{block, BlockLayout};

/// x = (d * sc) * q - (dmin * m), sc and m 4 bits per 16 elements.
pub fn q2_k<O: Output>(src: &[u8], dst: &mut [u16]) {
    use block::q2_k::*;
    for (b, out) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(ELEMS)) {
        let (d, dmin) = (f16_at(b, D), f16_at(b, DMIN));
        for (k, sub) in out.chunks_exact_mut(16).enumerate() {
            let sm = b[SCALES + k];
            let dl = d * (sm & 0x0F) as f32;
            let ml = dmin * (sm >> 4) as f32;
            for (l, o) in sub.iter_mut().enumerate() {
                *o = O::from_f32(dl * crumb(&b[QS..], 16 * k + l) as f32 - ml);
            }
        }
    }
}

/// The 6-bit signed scale `j` (0..16) of a Q3_K block: low nibbles from
/// bytes 0..8 (low halves first), two high bits from bytes 8..12.
#[inline(always)]
pub(crate) fn q3_k_scale(sc: &[u8], j: usize) -> i32 {
    let lo = if j < 8 { sc[j] & 0x0F } else { sc[j - 8] >> 4 };
    let hi = (sc[8 + j % 4] >> (2 * (j / 4))) & 3;
    (lo | (hi << 4)) as i32 - 32
}

/// x = (d * sc) * q, q = 2 low bits minus 4 where the `hmask` bit is clear.
pub fn q3_k<O: Output>(src: &[u8], dst: &mut [u16]) {
    use block::q3_k::*;
    for (b, out) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(ELEMS)) {
        let d = f16_at(b, D);
        for (k, sub) in out.chunks_exact_mut(16).enumerate() {
            let dl = d * q3_k_scale(&b[SCALES..], k) as f32;
            for (l, o) in sub.iter_mut().enumerate() {
                let e = 16 * k + l;
                let high = (b[HMASK + e % 32] >> (e / 32)) & 1;
                let q = crumb(&b[QS..], e) as i32 - if high == 0 { 4 } else { 0 };
                *o = O::from_f32(dl * q as f32);
            }
        }
    }
}

/// Scale and min `j` (0..8) of a Q4_K/Q5_K block's 12 packed bytes, 6 bits
/// each (ggml's get_scale_min_k4).
#[inline(always)]
pub(crate) fn k4_scale_min(sc: &[u8], j: usize) -> (u8, u8) {
    if j < 4 {
        (sc[j] & 0x3F, sc[j + 4] & 0x3F)
    } else {
        ((sc[j + 4] & 0x0F) | ((sc[j - 4] >> 2) & 0x30), (sc[j + 4] >> 4) | ((sc[j] >> 2) & 0x30))
    }
}

/// The nibble of element `e` (0..256) in 128 `qs` bytes: 32-byte groups,
/// low nibbles for the even 32-element sub-block, high for the odd (Q4_K, Q5_K).
#[inline(always)]
fn k_nibble(qs: &[u8], e: usize) -> u8 {
    let k = e / 32;
    (qs[32 * (k / 2) + e % 32] >> (4 * (k % 2))) & 0x0F
}

/// The Q4_K/Q5_K formula: x = (d * sc) * q - (dmin * m), sc and m per 32
/// elements; `quant(block, e)` gives element e's unsigned q.
#[inline(always)]
fn k4_family<O: Output>(src: &[u8], dst: &mut [u16], layout: &BlockLayout, quant: impl Fn(&[u8], usize) -> u8) {
    let field = |name| layout.field(name).expect("K-quant field").0;
    let (d_at, dmin_at, scales_at) = (field("D"), field("DMIN"), field("SCALES"));
    for (b, out) in src.chunks_exact(layout.bytes).zip(dst.chunks_exact_mut(layout.elems)) {
        let (d, dmin) = (f16_at(b, d_at), f16_at(b, dmin_at));
        for (k, sub) in out.chunks_exact_mut(32).enumerate() {
            let (sc, m) = k4_scale_min(&b[scales_at..], k);
            let (dl, ml) = (d * sc as f32, dmin * m as f32);
            for (l, o) in sub.iter_mut().enumerate() {
                *o = O::from_f32(dl * quant(b, 32 * k + l) as f32 - ml);
            }
        }
    }
}

pub fn q4_k<O: Output>(src: &[u8], dst: &mut [u16]) {
    use block::q4_k::*;
    k4_family::<O>(src, dst, &LAYOUT, |b, e| k_nibble(&b[QS..], e));
}

/// As Q4_K with a fifth bit: bit k of `qh[l]` for element 32k + l.
pub fn q5_k<O: Output>(src: &[u8], dst: &mut [u16]) {
    use block::q5_k::*;
    k4_family::<O>(src, dst, &LAYOUT, |b, e| k_nibble(&b[QS..], e) | (((b[QH + e % 32] >> (e / 32)) & 1) << 4));
}

/// x = (d * sc) * (q - 32), q 6 bits: a nibble of `ql` (64-byte groups,
/// low nibbles first) and two bits of `qh` (as Q2_K's crumbs), sc an i8
/// per 16 elements.
pub fn q6_k<O: Output>(src: &[u8], dst: &mut [u16]) {
    use block::q6_k::*;
    for (b, out) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(ELEMS)) {
        let d = f16_at(b, D);
        for (k, sub) in out.chunks_exact_mut(16).enumerate() {
            let dl = d * (b[SCALES + k] as i8) as f32;
            for (l, o) in sub.iter_mut().enumerate() {
                let e = 16 * k + l;
                let (half, i) = (e / 128, e % 128);
                let low = (b[QL + 64 * half + i % 64] >> (4 * (i / 64))) & 0x0F;
                let q = (low | (crumb(&b[QH..], e) << 4)) as i32 - 32;
                *o = O::from_f32(dl * q as f32);
            }
        }
    }
}
