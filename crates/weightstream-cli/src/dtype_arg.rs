//! `--dtype bf16|f16`: the 16-bit float a load or convert writes.

pub use weightstream::dequant::OutDtype;

pub const HELP: &str = "What every tensor becomes: bf16 (the default) or f16 (IEEE float16, for fp16 \
serving and GPUs without BF16: each value rounded once from the format's exact value; F16 tensors \
copied as stored; values past float16's range become infinities)";

pub fn parse(s: &str) -> Result<OutDtype, String> {
    OutDtype::parse(s).ok_or_else(|| format!("'{s}': use bf16 or f16"))
}
