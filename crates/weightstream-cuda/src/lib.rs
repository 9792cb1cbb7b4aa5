//! weightstream-cuda: the device path.
//!
//! [`probe`] answers "is there a usable GPU?" without panicking; [`Gpu`]
//! holds a device's primary context and the kernels; [`pipeline`] streams
//! chunks of file bytes through a ring of pinned buffers into device scratch
//! memory and dequantizes them into their destinations; [`gds`] reads
//! chunks with cuFile straight into device memory instead (GPUDirect
//! Storage); [`ring_pool`] keeps rings between loads in a process; [`trim`] cuts chunks whose slice edge falls inside a block.
//!
//! cudarc loads `libcuda` at run time, so this crate builds and runs on
//! machines without CUDA; every entry point then returns
//! [`CudaError::Unavailable`].

pub mod error;
pub mod gds;
pub mod gpu;
pub mod memory;
pub mod pipeline;
pub mod probe;
pub mod ring_pool;
pub mod trim;

pub use cudarc::driver::CudaStream;
pub use error::{CudaError, Result};
pub use gds::{Gds, GdsFile};
pub use gpu::{DeviceInfo, Gpu};
pub use memory::{DeviceBuffer, PinnedBuffer};
pub use pipeline::{run, ChunkOp, ChunkWork, RunTimes, StagingConfig, StagingRing, SLOT_PAD};
pub use probe::{check_available, device_count, gpu_present};
pub use ring_pool::{idle_rings, keep_ring, release_rings, take_ring};
