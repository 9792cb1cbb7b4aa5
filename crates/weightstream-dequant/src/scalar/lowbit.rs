//! Portable kernels of llama.cpp's 1- and 2-bit d-scaled formats: Q1_0 and
//! Q2_0 (ggml-quants.c `dequantize_row_q1_0`, `dequantize_row_q2_0`; gguf-py
//! 0.19 has no dequantizer for them).

use super::f16_at;
use crate::output::Output;
use weightstream_blocks::block;

/// x = d where bit j % 8 of qs[j / 8] is set, else -d (ggml's `bit ? d :
/// neg_d`: no multiply, and BF16 rounding is symmetric, NaN canonical).
pub fn q1_0<O: Output>(src: &[u8], dst: &mut [u16]) {
    use block::q1_0::*;
    for (b, out) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(ELEMS)) {
        let d = f16_at(b, D);
        let (pos, neg) = (O::from_f32(d), O::from_f32(-d));
        for (j, o) in out.iter_mut().enumerate() {
            *o = if (b[QS + j / 8] >> (j % 8)) & 1 == 1 { pos } else { neg };
        }
    }
}

/// x = (q - 1) * d, q bits 2(j % 4) of qs[j / 4]: -d, 0 (signed as d, NaN
/// for an infinite d), d, 2d, one rounded multiply (exact: f16 d).
pub fn q2_0<O: Output>(src: &[u8], dst: &mut [u16]) {
    use block::q2_0::*;
    for (b, out) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(ELEMS)) {
        let d = f16_at(b, D);
        for (j, o) in out.iter_mut().enumerate() {
            let q = (b[QS + j / 4] >> (2 * (j % 4))) & 3;
            *o = O::from_f32((q as i32 - 1) as f32 * d);
        }
    }
}
