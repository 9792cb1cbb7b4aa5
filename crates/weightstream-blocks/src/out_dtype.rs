//! The 16-bit float a load writes: BF16 (the default) or IEEE float16,
//! each rounded once, to nearest even, from the format's exact f32 value
//! (docs/numerics.md). One parameter of every kernel family, CPU and CUDA.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize)]
pub enum OutDtype {
    #[default]
    BF16,
    F16,
}

impl OutDtype {
    /// As safetensors and the CLI name it (`BF16`, `F16`).
    pub fn name(self) -> &'static str {
        match self {
            OutDtype::BF16 => "BF16",
            OutDtype::F16 => "F16",
        }
    }

    /// The spellings users type: `bf16`/`bfloat16`, `f16`/`fp16`/`float16`/`half`.
    pub fn parse(s: &str) -> Option<OutDtype> {
        match s.to_ascii_lowercase().as_str() {
            "bf16" | "bfloat16" => Some(OutDtype::BF16),
            "f16" | "fp16" | "float16" | "half" => Some(OutDtype::F16),
            _ => None,
        }
    }

    /// The one NaN pattern every path writes (a canonical quiet NaN).
    pub fn canonical_nan(self) -> u16 {
        match self {
            OutDtype::BF16 => 0x7FC0,
            OutDtype::F16 => 0x7E00,
        }
    }
}
