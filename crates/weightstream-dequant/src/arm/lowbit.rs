//! NEON kernels of Q1_0 and Q2_0 (scalar/lowbit.rs), for either output
//! `O`: a block's two (Q1_0: O(d) and O(-d)) or four (Q2_0: O((q - 1) * d)) possible
//! outputs are rounded once per block with the scalar kernel's operations,
//! then each element's is selected: Q1_0 by `vbslq` on a mask from its bit
//! (`vtstq`), Q2_0 by looking its code up (`vqtbl1q_u8`, two bytes per
//! output).

use std::arch::aarch64::*;

use super::lookup::sized_blocks;
use super::neon::*;
use crate::scalar::f16_at;
use weightstream_blocks::block;

#[target_feature(enable = "neon")]
pub(super) unsafe fn q1_0<O: Out128>(src: &[u8], dst: &mut [u16]) {
    use block::q1_0::*;
    const BITS: [u16; 16] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768];
    // SAFETY: 16 readable u16 in BITS.
    let (lo, hi) = unsafe { (vld1q_u16(BITS.as_ptr()), vld1q_u16(BITS.as_ptr().add(8))) };
    for (b, o) in sized_blocks(src, dst, BYTES, ELEMS) {
        let d = f16_at(b, D);
        let (pos, neg) = (vdupq_n_u16(O::from_f32(d)), vdupq_n_u16(O::from_f32(-d)));
        for k in 0..8 {
            // Elements 16k .. 16k + 16: bits 0..16 of the LE u16 at qs[2k].
            let w = vdupq_n_u16(u16::from_le_bytes([b[QS + 2 * k], b[QS + 2 * k + 1]]));
            // SAFETY: outputs 16k .. 16k + 16 lie inside the block's 128.
            unsafe {
                vst1q_u16(o.add(16 * k), vbslq_u16(vtstq_u16(w, lo), pos, neg));
                vst1q_u16(o.add(16 * k + 8), vbslq_u16(vtstq_u16(w, hi), pos, neg));
            }
        }
    }
}

#[target_feature(enable = "neon")]
pub(super) unsafe fn q2_0<O: Out128>(src: &[u8], dst: &mut [u16]) {
    use block::q2_0::*;
    const LEVELS: [f32; 4] = [-1.0, 0.0, 1.0, 2.0];
    // Element 8k + e is bits 2e of the LE u16 at qs[2k].
    const SHIFTS: [i16; 8] = [0, -2, -4, -6, -8, -10, -12, -14];
    // SAFETY: 4 readable f32 in LEVELS, 8 i16 in SHIFTS.
    let (levels, shifts) = unsafe { (vld1q_f32(LEVELS.as_ptr()), vld1q_s16(SHIFTS.as_ptr())) };
    let (three, high) = (vdupq_n_u16(3), vdupq_n_u16(0x0100));
    for (b, o) in sized_blocks(src, dst, BYTES, ELEMS) {
        // SAFETY: NEON is always present on aarch64; no memory is touched.
        let t = unsafe {
            let x = vmulq_f32(levels, vdupq_n_f32(f16_at(b, D)));
            vreinterpretq_u8_u16(O::round8(x, x))
        };
        for k in 0..8 {
            let w = vdupq_n_u16(u16::from_le_bytes([b[QS + 2 * k], b[QS + 2 * k + 1]]));
            let q = vandq_u16(vshlq_u16(w, shifts), three);
            // Output q of the table: bytes 2q and 2q + 1.
            let idx = vmlaq_n_u16(high, q, 0x0202);
            // SAFETY: outputs 8k .. 8k + 8 lie inside the block's 64.
            unsafe { vst1q_u16(o.add(8 * k), vreinterpretq_u16_u8(vqtbl1q_u8(t, vreinterpretq_u8_u16(idx)))) };
        }
    }
}
