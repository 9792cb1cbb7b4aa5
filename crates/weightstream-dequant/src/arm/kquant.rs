//! NEON kernels of the K-quants Q2_K ... Q6_K (256-element super-blocks;
//! legacy.rs has Q4_1, Q5_0 and Q5_1, read by the same helpers in
//! neon.rs). Each reproduces its scalar kernel (scalar.rs) bit for
//! bit: the per-block scale products (`d * sc`, `dmin * m`) are the same
//! scalar f32 multiplies (through the same scalar helpers), and per element
//! `neon::emit16` does the exact int -> f32 conversion, one `fmul`, then
//! `fadd`/`fsub` as the formula says (never a fused multiply-add), and the
//! output's rounding (`neon::Out128`: BF16 or float16).
//!
//! One extraction helper, [`field16`], serves every format: ggml packs all
//! of these quant fields (Q4_1's nibbles, the K-quants' 2-bit crumbs,
//! nibbles, and their high bits in `hmask`/`qh`) the same way, a run of
//! bytes holding `8 / width` runs of consecutive elements at rising bit
//! offsets. So a kernel is its formula: which fields, how their bits
//! combine (`vsli`: low | high << n), which scale per 16 elements. Only
//! Q5_0/Q5_1's `qh`, a 32-bit word of one bit per element, has its own
//! ([`bits_of_word16`]).
//!
//! Every kernel is `unsafe` with `#[target_feature(enable = "neon")]` (NEON
//! is baseline on aarch64: `Isa::Neon` is supported everywhere); helpers
//! are `#[inline(always)]`. Lengths: `src` whole blocks, `dst` their
//! elements (checked by `Kernel::check`).

use std::arch::aarch64::*;

use super::neon::*;
use crate::scalar::{f16_at, k4_scale_min, q3_k_scale};
use weightstream_blocks::{block, BlockLayout};

/// x = (d * sc) * q - (dmin * m): q the 2-bit crumbs of `QS`, sc and m 4
/// bits each per 16 elements.
#[target_feature(enable = "neon")]
pub(super) unsafe fn q2_k<O: Out128>(src: &[u8], dst: &mut [u16]) {
    use block::q2_k::*;
    for (b, o) in blocks(src, dst, &LAYOUT) {
        let (d, dmin) = (f16_at(b, D), f16_at(b, DMIN));
        // SAFETY: the 64 qs bytes lie inside the block; 256 outputs at o.
        unsafe {
            let qs: [_; 4] = load(b.as_ptr().add(QS));
            for k in 0..16 {
                let sm = b[SCALES + k];
                emit16::<O, false, SUB>(field16::<2>(&qs, k, 32), d * (sm & 0x0F) as f32, dmin * (sm >> 4) as f32, o.add(16 * k));
            }
        }
    }
}

/// Q3_K and Q6_K: per 16 elements k, x = (d * sc(b, k)) * q with the
/// signed q = (low | high << LOW) - offset: `low` the LOW-bit field of
/// the `NL` vectors at byte `low.0` of the block, in runs of `low.1` bytes
/// (as [`field16`] reads them), `high` the HIGH-bit field of the `NH` at
/// `high.0`.
#[inline(always)]
pub(super) unsafe fn low_high16<O: Out128, const LOW: i32, const HIGH: i32, const NL: usize, const NH: usize>(
    src: &[u8],
    dst: &mut [u16],
    layout: &BlockLayout,
    low: (usize, usize),
    high: (usize, usize),
    offset: u8,
    sc: impl Fn(&[u8], usize) -> i32,
) {
    let d_at = layout.field("D").expect("K-quant field").0;
    for (b, o) in blocks(src, dst, layout) {
        let d = f16_at(b, d_at);
        // SAFETY: both fields' 16 * NL and 16 * NH bytes lie inside the block; 256 outputs at o.
        unsafe {
            let (lv, hv): ([_; NL], [_; NH]) = (load(b.as_ptr().add(low.0)), load(b.as_ptr().add(high.0)));
            for k in 0..16 {
                let q = vsliq_n_u8::<LOW>(field16::<LOW>(&lv, k, low.1), field16::<HIGH>(&hv, k, high.1));
                emit16::<O, true, NONE>(vsubq_u8(q, vdupq_n_u8(offset)), d * sc(b, k) as f32, 0.0, o.add(16 * k));
            }
        }
    }
}

/// x = (d * sc) * q: q the crumb of `QS` minus 4 where the element's
/// `HMASK` bit is clear (crumb | h << 2, minus 4), sc 6 bits signed per
/// 16 elements.
#[target_feature(enable = "neon")]
pub(super) unsafe fn q3_k<O: Out128>(src: &[u8], dst: &mut [u16]) {
    use block::q3_k::*;
    // SAFETY: as in q4_1; QS holds 4 vectors, HMASK 2.
    unsafe { low_high16::<O, 2, 1, 4, 2>(src, dst, &LAYOUT, (QS, 32), (HMASK, 32), 4, |b, k| q3_k_scale(&b[SCALES..], k)) }
}

/// Q4_K and Q5_K: x = (d * sc) * q - (dmin * m), sc and m 6 bits per 32
/// elements; q a nibble of `QS`, with Q5_K's fifth bit from `qh` (the
/// offset of its `QH`; None for Q4_K).
#[inline(always)]
pub(super) unsafe fn k4_family<O: Out128>(src: &[u8], dst: &mut [u16], layout: &BlockLayout, qh: Option<usize>) {
    let field = |name| layout.field(name).expect("K-quant field").0;
    let (d_at, dmin_at, sc_at, qs_at) = (field("D"), field("DMIN"), field("SCALES"), field("QS"));
    for (b, o) in blocks(src, dst, layout) {
        let (d, dmin) = (f16_at(b, d_at), f16_at(b, dmin_at));
        // SAFETY: the 128 qs bytes and 32 qh bytes lie inside the block; 256 outputs at o.
        unsafe {
            let qs: [_; 8] = load(b.as_ptr().add(qs_at));
            let qh: Option<[_; 2]> = qh.map(|at| load(b.as_ptr().add(at)));
            for k in 0..8 {
                let (sc, m) = k4_scale_min(&b[sc_at..], k);
                let (dl, ml) = (d * sc as f32, dmin * m as f32);
                for j in [2 * k, 2 * k + 1] {
                    let mut q = field16::<4>(&qs, j, 32);
                    if let Some(h) = &qh {
                        q = vsliq_n_u8::<4>(q, field16::<1>(h, j, 32));
                    }
                    emit16::<O, false, SUB>(q, dl, ml, o.add(16 * j));
                }
            }
        }
    }
}

#[target_feature(enable = "neon")]
pub(super) unsafe fn q4_k<O: Out128>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: as in q4_1.
    unsafe { k4_family::<O>(src, dst, &block::q4_k::LAYOUT, None) }
}

#[target_feature(enable = "neon")]
pub(super) unsafe fn q5_k<O: Out128>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: as in q4_1.
    unsafe { k4_family::<O>(src, dst, &block::q5_k::LAYOUT, Some(block::q5_k::QH)) }
}

/// x = (d * sc) * (q - 32): q a nibble of `QL` (runs of 64 bytes) with a
/// crumb of `QH` as bits 4 and 5, sc an i8 per 16 elements.
#[target_feature(enable = "neon")]
pub(super) unsafe fn q6_k<O: Out128>(src: &[u8], dst: &mut [u16]) {
    use block::q6_k::*;
    // SAFETY: as in q4_1; QL holds 8 vectors, QH 4.
    unsafe { low_high16::<O, 4, 2, 8, 4>(src, dst, &LAYOUT, (QL, 64), (QH, 32), 32, |b, k| (b[SCALES + k] as i8) as i32) }
}
