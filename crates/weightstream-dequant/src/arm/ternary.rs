//! NEON kernels of the ternary formats TQ1_0 and TQ2_0 (lookup.rs).

use std::arch::aarch64::*;

use super::lookup::*;
use super::neon::*;
use crate::scalar::f16_at;
use weightstream_blocks::block;

/// A ternary table: entry q is O(d * (q - 1)) for q = 0, 1, 2 and, for
/// TQ2_0's crumbs, 3 (the scalar kernel's one multiply each).
#[inline(always)]
pub(super) unsafe fn ternary_table<O: Out128>(d: f32) -> Table {
    const VALUES: [f32; 4] = [-1.0, 0.0, 1.0, 2.0];
    // SAFETY: 4 readable f32 in VALUES; NEON is always present on aarch64.
    unsafe {
        let x = vmulq_f32(vld1q_f32(VALUES.as_ptr()), vdupq_n_f32(d));
        table8::<O>(x, x)
    }
}

#[target_feature(enable = "neon")]
pub(super) unsafe fn tq2_0<O: Out128>(src: &[u8], dst: &mut [u16]) {
    use block::tq2_0::*;
    let (three, zero) = (vdupq_n_u8(3), vdupq_n_u8(0));
    for (b, o) in sized_blocks(src, dst, BYTES, ELEMS) {
        // SAFETY: NEON is always present on aarch64.
        let t = unsafe { ternary_table::<O>(f16_at(b, D)) };
        // Element 128h + 32s + j is crumb s of qs[32h + j] (Q2_K's layout).
        for h in 0..2 {
            for half in 0..2 {
                // SAFETY: qs[32h + 16half ..][..16] inside the block's 64;
                // outputs 128h + 32s + 16half .. + 16 inside its 256.
                unsafe {
                    let v = load16(b.as_ptr().add(QS + 32 * h + 16 * half));
                    for s in 0..4 {
                        let q = vandq_u8(vshlq_u8(v, vdupq_n_s8(-2 * s as i8)), three);
                        lookup16(q, t, zero, o.add(128 * h + 32 * s + 16 * half));
                    }
                }
            }
        }
    }
}

/// Base-3 digits (0, 1, 2) of 16 bytes: digit k of byte b is
/// ((b * 3^k mod 256) * 3) >> 8 (scalar/ternary.rs), with `pow3` holding
/// each byte's 3^k: a wrapping u8 multiply, then the high bytes of the
/// widening multiply by 3.
#[inline(always)]
pub(super) unsafe fn trits16(bytes: uint8x16_t, pow3: uint8x16_t) -> uint8x16_t {
    // SAFETY: NEON is always present on aarch64; no memory is touched.
    unsafe {
        let q = vmulq_u8(bytes, pow3);
        let lo = vmull_u8(vget_low_u8(q), vdup_n_u8(3));
        let hi = vmull_high_u8(q, vdupq_n_u8(3));
        vuzp2q_u8(vreinterpretq_u8_u16(lo), vreinterpretq_u8_u16(hi))
    }
}

#[target_feature(enable = "neon")]
pub(super) unsafe fn tq1_0<O: Out128>(src: &[u8], dst: &mut [u16]) {
    use block::tq1_0::*;
    const POW3: [u8; 5] = [1, 3, 9, 27, 81];
    // Elements 240..256: digit e/4 of qh[e % 4], so bytes qh[0..4] four
    // times with the powers 1, 3, 9, 27 in steps of four.
    const TAIL_POW: [u8; 16] = [1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27];
    // SAFETY: 16 readable bytes.
    let tail_pow = unsafe { load16(TAIL_POW.as_ptr()) };
    let zero = vdupq_n_u8(0);
    for (b, o) in sized_blocks(src, dst, BYTES, ELEMS) {
        // SAFETY: qs[0..48] and qh[0..4] lie inside the block; outputs
        // 0..256 inside its elements.
        unsafe {
            let t = ternary_table::<O>(f16_at(b, D));
            let p = b.as_ptr();
            let (q0, q1, q2) = (load16(p.add(QS)), load16(p.add(QS + 16)), load16(p.add(QS + 32)));
            // Elements 0..160: digit k of qs[j] (j < 32) is 32k + j; 160..240:
            // digit k of qs[32 + j] (j < 16) is 160 + 16k + j.
            for (k, &pw) in POW3.iter().enumerate() {
                let pow = vdupq_n_u8(pw);
                lookup16(trits16(q0, pow), t, zero, o.add(32 * k));
                lookup16(trits16(q1, pow), t, zero, o.add(32 * k + 16));
                lookup16(trits16(q2, pow), t, zero, o.add(160 + 16 * k));
            }
            let qh = vreinterpretq_u8_u32(vdupq_n_u32(u32::from_le_bytes([b[QH], b[QH + 1], b[QH + 2], b[QH + 3]])));
            lookup16(trits16(qh, tail_pow), t, zero, o.add(240));
        }
    }
}
