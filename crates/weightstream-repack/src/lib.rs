//! weightstream-repack: GGUF blocks moved, bit for bit, into the quantized
//! layouts that inference runtimes' fast kernels take, so a model can stay
//! quantized in memory where the move is exact (no value is computed: the
//! integer codes are carried over, the block scale becomes the group scale).
//!
//! One table ([`gptq::target`]) says which block format maps onto which
//! layout (its codes: `codes.rs`); one CPU kernel per layout
//! ([`gptq::repack`]).

mod codes;
pub mod gptq;

pub use gptq::{repack, target, GptqTarget, RepackError};
