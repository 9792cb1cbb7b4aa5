//! weightstream-kernels: the CUDA dequant kernels of `kernels/`.
//!
//! - [`fatbin`]: the GPU images nvcc built (empty without nvcc);
//! - [`host_grid`]: the same sources compiled for the host, each call
//!   running a kernel's complete launch grid on the CPU;
//! - [`Launch`]: which kernel a job needs, its arguments and its geometry,
//!   shared by the GPU executor and the host grid so both run the same launch.

#[cfg(feature = "host-grid")]
pub mod host_grid;
mod launch;

pub use launch::{divisor, geometry, Element, Fp4Args, GptqArgs, Launch, ScaledArgs, BLOCK_DIM};
// The block formats a `Launch::Block` names and the outputs a launch
// writes (their one definition).
pub use weightstream_blocks::{BlockFormat, OutDtype};

/// GPU images, one per kernel source file: (file stem, fatbin bytes).
pub const FATBINS: &[(&str, &[u8])] = include!(concat!(env!("OUT_DIR"), "/fatbins.rs"));

/// The nvcc that built [`FATBINS`] (empty when none was found).
pub const NVCC_VERSION: &str = env!("WS_NVCC_VERSION");

/// The fatbin that holds `function`'s module, if the kernels were built.
pub fn fatbin(module: &str) -> Option<&'static [u8]> {
    FATBINS.iter().find(|(n, _)| *n == module).map(|(_, b)| *b)
}

pub fn has_gpu_kernels() -> bool {
    !FATBINS.is_empty()
}
