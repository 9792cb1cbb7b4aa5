//! NEON kernels of the legacy 32-element block formats: Q4_0, Q8_0,
//! Q4_1, Q5_0, Q5_1. Each reproduces its scalar kernel bit for bit
//! (kquant.rs says how the fields are read).

use std::arch::aarch64::*;

use super::neon::*;
use crate::scalar;
use crate::scalar::f16_at;
use weightstream_blocks::{block, BlockLayout};

#[target_feature(enable = "neon")]
pub(super) unsafe fn q4_0<O: Out128>(src: &[u8], dst: &mut [u16]) {
    use block::q4_0::*;
    for (b, o) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(ELEMS)) {
        let d = scalar::f16_at(b, D);
        // SAFETY: the 16 qs bytes lie inside the block; 32 outputs at o.
        unsafe {
            let qs = load16(b.as_ptr().add(QS));
            let eight = vdupq_n_u8(8);
            // Low nibbles are elements 0..16, high nibbles 16..32; minus 8 as i8.
            emit16::<O, true, NONE>(vsubq_u8(vandq_u8(qs, vdupq_n_u8(0x0F)), eight), d, 0.0, o.as_mut_ptr());
            emit16::<O, true, NONE>(vsubq_u8(vshrq_n_u8::<4>(qs), eight), d, 0.0, o.as_mut_ptr().add(16));
        }
    }
}

#[target_feature(enable = "neon")]
pub(super) unsafe fn q8_0<O: Out128>(src: &[u8], dst: &mut [u16]) {
    use block::q8_0::*;
    for (b, o) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(ELEMS)) {
        let d = scalar::f16_at(b, D);
        // SAFETY: the 32 qs bytes lie inside the block; 32 outputs at o.
        unsafe {
            emit16::<O, true, NONE>(load16(b.as_ptr().add(QS)), d, 0.0, o.as_mut_ptr());
            emit16::<O, true, NONE>(load16(b.as_ptr().add(QS + 16)), d, 0.0, o.as_mut_ptr().add(16));
        }
    }
}

/// Q4_1, Q5_0 and Q5_1: quant j is nibble j of `QS` (low nibbles first)
/// with, where the format has `QH`, bit j of that word as its bit 4; then
/// `d * (q - offset)`, or `d * q + m` (`OP` ADD, with the format's `M`).
#[inline(always)]
pub(super) unsafe fn legacy32<O: Out128, const SIGNED: bool, const OP: u8>(src: &[u8], dst: &mut [u16], layout: &BlockLayout, offset: u8) {
    let field = |name| layout.field(name).map(|(at, _)| at);
    let (d_at, qs_at) = (field("D").expect("D field"), field("QS").expect("QS field"));
    let (m_at, qh_at) = (field("M"), field("QH"));
    for (b, o) in blocks(src, dst, layout) {
        let d = f16_at(b, d_at);
        let m = m_at.map_or(0.0, |at| f16_at(b, at));
        // SAFETY: the 16 qs bytes lie inside the block; 32 outputs at o.
        unsafe {
            let qs: [_; 1] = load(b.as_ptr().add(qs_at));
            for k in 0..2 {
                let mut q = field16::<4>(&qs, k, 16);
                if let Some(at) = qh_at {
                    q = vsliq_n_u8::<4>(q, bits_of_word16(&b[at..], k));
                }
                emit16::<O, SIGNED, OP>(vsubq_u8(q, vdupq_n_u8(offset)), d, m, o.add(16 * k));
            }
        }
    }
}

/// x = d * q + m.
#[target_feature(enable = "neon")]
pub(super) unsafe fn q4_1<O: Out128>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: NEON present; lengths checked by Kernel::check.
    unsafe { legacy32::<O, false, ADD>(src, dst, &block::q4_1::LAYOUT, 0) }
}

/// x = d * (q - 16), q 5 bits.
#[target_feature(enable = "neon")]
pub(super) unsafe fn q5_0<O: Out128>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: as in q4_1.
    unsafe { legacy32::<O, true, NONE>(src, dst, &block::q5_0::LAYOUT, 16) }
}

/// x = d * q + m, q 5 bits.
#[target_feature(enable = "neon")]
pub(super) unsafe fn q5_1<O: Out128>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: as in q4_1.
    unsafe { legacy32::<O, false, ADD>(src, dst, &block::q5_1::LAYOUT, 0) }
}
