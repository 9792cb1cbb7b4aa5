//! weightstream-blocks: the vocabulary at the bottom of the crate graph.
//!
//! What a weight's bytes are, defined once: the block formats' geometry
//! and field offsets ([`block`], one table row each), the lookup tables the
//! IQ, FP4 and ternary formats index ([`block_tables`], generated from
//! gguf-py), the encodings a tensor can have, the E2M1 values, and the
//! scale layouts of FP8 and packed weights. The file readers
//! (weightstream-format), the CPU kernels (weightstream-dequant) and the
//! CUDA kernels (weightstream-kernels) all depend on this crate and on no
//! one else for it: the kernels never link the file readers.

pub mod block;
// Generated (scripts/gen_block_tables.py, checked in CI): left as generated.
#[rustfmt::skip]
pub mod block_tables;
pub mod encoding;
pub mod out_dtype;
pub mod scale;

pub use block::{BlockFormat, BlockLayout, Field};
pub use encoding::{Encoding, Fp8Format, E2M1_VALUES};
pub use out_dtype::OutDtype;
pub use scale::{GlobalOp, ScaleDtype, ScaleKind, ScaleLayout};
