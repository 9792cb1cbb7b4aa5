//! The ternary formats (BitNet b1.58): values -1, 0, 1 times an f16 d.

use super::{crumb, f16_at};
use crate::output::Output;
use weightstream_blocks::block;

/// Powers of 3 by which TQ1_0 bytes are multiplied (mod 256) to bring each
/// base-3 digit to the top: digit = (byte * 3^k mod 256) * 3 >> 8.
const POW3: [u8; 5] = [1, 3, 9, 27, 81];

#[inline(always)]
fn trit(byte: u8, k: usize) -> f32 {
    let q = byte.wrapping_mul(POW3[k]);
    (((q as u16 * 3) >> 8) as i32 - 1) as f32
}

/// Elements 0..160: digit k of qs[j] (j < 32) is element 32k + j; 160..240:
/// digit k of qs[32 + j] (j < 16) is 160 + 16k + j; 240..256: digit k
/// (k < 4) of qh[j] is 240 + 4k + j. x = d * t.
pub fn tq1_0<O: Output>(src: &[u8], dst: &mut [u16]) {
    use block::tq1_0::*;
    for (b, out) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(ELEMS)) {
        let d = f16_at(b, D);
        for (e, o) in out.iter_mut().enumerate() {
            let (byte, k) = match e {
                0..160 => (b[QS + e % 32], e / 32),
                160..240 => (b[QS + 32 + (e - 160) % 16], (e - 160) / 16),
                _ => (b[QH + (e - 240) % 4], (e - 240) / 4),
            };
            *o = O::from_f32(d * trit(byte, k));
        }
    }
}

/// 2-bit values laid out as Q2_K's; x = d * (q - 1).
pub fn tq2_0<O: Output>(src: &[u8], dst: &mut [u16]) {
    use block::tq2_0::*;
    for (b, out) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(ELEMS)) {
        let d = f16_at(b, D);
        for (e, o) in out.iter_mut().enumerate() {
            *o = O::from_f32(d * (crumb(&b[QS..], e) as i32 - 1) as f32);
        }
    }
}
