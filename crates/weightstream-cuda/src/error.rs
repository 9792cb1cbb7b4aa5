//! Device errors: every failure is a value, never a panic.

use std::path::PathBuf;

use cudarc::driver::DriverError;

#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    /// No usable GPU: no kernels in this build, no driver, no device.
    #[error("no usable GPU: {0}")]
    Unavailable(String),
    #[error("CUDA {call} failed: {name}: {description}")]
    Driver { call: &'static str, name: String, description: String },
    #[error("out of GPU memory: {what} needs {bytes} bytes ({free} of {total} free)")]
    OutOfMemory { what: String, bytes: usize, free: usize, total: usize },
    #[error("{file}: at byte {offset}: read failed: {source}")]
    Read { file: PathBuf, offset: u64, tensor: usize, source: std::io::Error },
    #[error("cancelled")]
    Cancelled,
    #[error("{0}")]
    Invalid(String),
}

impl CudaError {
    pub fn driver(call: &'static str, e: DriverError) -> CudaError {
        let name = e.error_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|_| format!("{:?}", e.0));
        let description = e.error_string().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        CudaError::Driver { call, name, description }
    }

    pub fn is_out_of_memory(&self) -> bool {
        matches!(self, CudaError::OutOfMemory { .. })
    }
}

pub type Result<T, E = CudaError> = std::result::Result<T, E>;
