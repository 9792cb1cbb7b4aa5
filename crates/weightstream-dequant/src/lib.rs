//! weightstream-dequant: CPU kernels from stored bytes to BF16.
//!
//! Bit-exact by contract (see [`numerics`]): the scalar kernels, the AVX2, AVX-512
//! and NEON kernels, any thread count and any chunking produce the same bits, and so
//! do the CUDA kernels, which the parity tests check against these.

#[cfg(target_arch = "aarch64")]
mod arm;
#[cfg(feature = "testing")]
pub mod cases;
pub mod chunk;
pub mod isa;
pub mod kernel;
pub mod numerics;
pub mod output;
pub mod par;
pub mod scalar;
pub mod scales;
#[cfg(target_arch = "x86_64")]
mod x86;

pub use chunk::{dequantize, runs_on};
pub use isa::Isa;
pub use kernel::{DequantError, Kernel, ScaleGrid};
pub use output::{f32_to_f16, Bf16Out, F16Out, Output};
pub use par::{dequantize_par, dequantize_par_fetch, FetchError, DEFAULT_PIECE};
pub use scales::{fold_global, scales_to_f32, unpack_zeros};
pub use weightstream_blocks::OutDtype;
