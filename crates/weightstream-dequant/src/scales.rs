//! Scale tensors to f32 (every supported scale dtype converts exactly), and
//! a packed weight's global scale folded into its group scales.

use crate::numerics::{bf16_to_f32, e4m3_to_f32, e8m0_to_f32, exp2_u8_to_f32, f16_to_f32};
use weightstream_blocks::{GlobalOp, ScaleDtype};

/// Decode little-endian scale values; `None` if `bytes` is not a whole
/// number of values.
pub fn scales_to_f32(dtype: ScaleDtype, bytes: &[u8]) -> Option<Vec<f32>> {
    let size = dtype.size() as usize;
    if !bytes.len().is_multiple_of(size) {
        return None;
    }
    Some(match dtype {
        ScaleDtype::F32 => bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
        ScaleDtype::BF16 => bytes.chunks_exact(2).map(|b| bf16_to_f32(u16::from_le_bytes([b[0], b[1]]))).collect(),
        ScaleDtype::F16 => bytes.chunks_exact(2).map(|b| f16_to_f32(u16::from_le_bytes([b[0], b[1]]))).collect(),
        ScaleDtype::E8M0 => bytes.iter().map(|&b| e8m0_to_f32(b)).collect(),
        ScaleDtype::E4M3 => bytes.iter().map(|&b| e4m3_to_f32(b)).collect(),
        ScaleDtype::Exp2U8 => bytes.iter().map(|&b| exp2_u8_to_f32(b)).collect(),
    })
}

/// Fold a global scale into group scales as the references do, one rounded
/// f32 operation per group: `s * g` (ModelOpt's `weight_scale_2`) or
/// `s / g` (compressed-tensors' `weight_global_scale`).
pub fn fold_global(values: &mut [f32], global: f32, op: GlobalOp) {
    match op {
        GlobalOp::Multiply => values.iter_mut().for_each(|v| *v *= global),
        GlobalOp::Divide => values.iter_mut().for_each(|v| *v /= global),
    }
}

/// compressed-tensors' zero points: `bits`-bit values with a `2^(bits-1)`
/// offset packed along the rows into int32 words (`[ceil(rows / per_word),
/// groups]`, the first row in the low bits), as an f32 `[rows, groups]`
/// grid. The reader's layout check (format/packed.rs) fixed the shape;
/// words past the end of `raw` read as 0.
pub fn unpack_zeros(raw: &[u8], bits: u8, rows: u64, groups: u64) -> Vec<f32> {
    let per_word = 32 / bits as u64;
    let mask = (1u32 << bits) - 1;
    let offset = 1i32 << (bits - 1);
    let mut out = Vec::with_capacity((rows * groups) as usize);
    for r in 0..rows {
        for g in 0..groups {
            let w = ((r / per_word) * groups + g) as usize * 4;
            let word = raw.get(w..w + 4).map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
            out.push((((word >> (bits as u64 * (r % per_word))) & mask) as i32 - offset) as f32);
        }
    }
    out
}
