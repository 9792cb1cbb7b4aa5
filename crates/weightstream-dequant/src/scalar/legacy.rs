//! Portable kernels of the legacy 32-element block formats: Q4_0, Q4_1,
//! Q5_0, Q5_1, Q8_0.

use super::f16_at;
use crate::output::Output;
use weightstream_blocks::block;

/// Element `j` (0..32) of a 32-element nibble block: low nibbles first,
/// then high nibbles (Q4_0, Q4_1, Q5_0, Q5_1).
#[inline(always)]
fn nibble(qs: &[u8], j: usize) -> u8 {
    if j < 16 {
        qs[j] & 0x0F
    } else {
        qs[j - 16] >> 4
    }
}

// Every kernel below evaluates gguf-py 0.19's formula (docs/numerics.md)
// with the same f32 operations in the same order, each rounded to nearest
// even: Rust never contracts `a * b - c` into a fused multiply-add.

pub fn q4_0<O: Output>(src: &[u8], dst: &mut [u16]) {
    use block::q4_0::*;
    for (b, out) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(ELEMS)) {
        let d = f16_at(b, D);
        for (j, o) in out.iter_mut().enumerate() {
            *o = O::from_f32(d * (nibble(&b[QS..], j) as i32 - 8) as f32);
        }
    }
}

/// x = d * q + m.
pub fn q4_1<O: Output>(src: &[u8], dst: &mut [u16]) {
    use block::q4_1::*;
    for (b, out) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(ELEMS)) {
        let (d, m) = (f16_at(b, D), f16_at(b, M));
        for (j, o) in out.iter_mut().enumerate() {
            *o = O::from_f32(d * nibble(&b[QS..], j) as f32 + m);
        }
    }
}

/// Bit `j` of a 5-bit format's `qh` word, as the quant's bit 4.
#[inline(always)]
fn high_bit(qh: u32, j: usize) -> u8 {
    (((qh >> j) & 1) << 4) as u8
}

/// x = d * (q - 16), q 5 bits.
pub fn q5_0<O: Output>(src: &[u8], dst: &mut [u16]) {
    use block::q5_0::*;
    for (b, out) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(ELEMS)) {
        let d = f16_at(b, D);
        let h = u32::from_le_bytes([b[QH], b[QH + 1], b[QH + 2], b[QH + 3]]);
        for (j, o) in out.iter_mut().enumerate() {
            let q = (nibble(&b[QS..], j) | high_bit(h, j)) as i32 - 16;
            *o = O::from_f32(d * q as f32);
        }
    }
}

/// x = d * q + m, q 5 bits.
pub fn q5_1<O: Output>(src: &[u8], dst: &mut [u16]) {
    use block::q5_1::*;
    for (b, out) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(ELEMS)) {
        let (d, m) = (f16_at(b, D), f16_at(b, M));
        let h = u32::from_le_bytes([b[QH], b[QH + 1], b[QH + 2], b[QH + 3]]);
        for (j, o) in out.iter_mut().enumerate() {
            let q = nibble(&b[QS..], j) | high_bit(h, j);
            *o = O::from_f32(d * q as f32 + m);
        }
    }
}

pub fn q8_0<O: Output>(src: &[u8], dst: &mut [u16]) {
    use block::q8_0::*;
    for (b, out) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(ELEMS)) {
        let d = f16_at(b, D);
        for (j, o) in out.iter_mut().enumerate() {
            *o = O::from_f32(d * (b[QS + j] as i8) as f32);
        }
    }
}
