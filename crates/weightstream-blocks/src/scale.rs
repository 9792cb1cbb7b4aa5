//! Scale tensors: their storage types and how one scale value covers the
//! weight matrix, shared by the readers (which check them) and the kernels
//! (which apply them).

use serde::Serialize;

/// Storage type of an FP8 scale tensor. Each converts to f32 exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum ScaleDtype {
    F32,
    BF16,
    F16,
    /// Power-of-two exponents (OCP MX): 2^(e - 127), 0xFF is NaN.
    E8M0,
    /// FP8 E4M3FN (NVFP4's group scales).
    E4M3,
    /// U8 biased exponents of the MXFP4 safetensors schemes (gpt-oss,
    /// compressed-tensors `mxfp4-pack-quantized`): 2^(e - 127). 0xFF, NaN in
    /// OCP MX, is refused at load: its producers decode it differently.
    Exp2U8,
}

impl ScaleDtype {
    pub fn size(self) -> u64 {
        match self {
            ScaleDtype::F32 => 4,
            ScaleDtype::BF16 | ScaleDtype::F16 => 2,
            ScaleDtype::E8M0 | ScaleDtype::E4M3 | ScaleDtype::Exp2U8 => 1,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScaleKind {
    PerTensor,
    PerChannel,
    Block,
    /// One scale per `block_cols` consecutive elements of a row (the 4-bit
    /// schemes' groups of 16 or 32).
    Group,
}

/// How one scale value covers the weight matrix: element (r, c) of the
/// `[rows, cols]` weight uses scale `[r / block_rows][c / block_cols]` of a
/// `[grid_rows, grid_cols]` scale matrix. Per-tensor and per-channel scales
/// are blocks that span the whole matrix or a whole row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ScaleLayout {
    pub kind: ScaleKind,
    pub block_rows: u64,
    pub block_cols: u64,
    pub grid_rows: u64,
    pub grid_cols: u64,
}

impl ScaleLayout {
    pub fn describe(&self) -> String {
        match self.kind {
            ScaleKind::PerTensor => "per-tensor".into(),
            ScaleKind::PerChannel => format!("per-channel [{}, 1]", self.grid_rows),
            ScaleKind::Block => format!("block {}x{} [{}, {}]", self.block_rows, self.block_cols, self.grid_rows, self.grid_cols),
            ScaleKind::Group => format!("groups of {} [{}, {}]", self.block_cols, self.grid_rows, self.grid_cols),
        }
    }
}

/// How a packed weight's per-tensor global scale enters its group scales:
/// each group scale `s` becomes `s * value` (ModelOpt's `weight_scale_2`)
/// or `s / value` (compressed-tensors' `weight_global_scale`, the
/// reciprocal), one rounded f32 operation, before it scales the elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GlobalOp {
    Multiply,
    Divide,
}
