//! Scale tensors to f32 (every supported scale dtype converts exactly), and
//! a packed weight's global scale folded into its group scales.

use crate::numerics::{bf16_to_f32, e4m3_to_f32, e8m0_to_f32, exp2_u8_to_f32, f16_to_f32};
use weightstream_format::{GlobalOp, ScaleDtype};

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
