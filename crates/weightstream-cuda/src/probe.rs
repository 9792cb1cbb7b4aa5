//! Is there a GPU? Answered without panicking: cudarc panics when libcuda
//! or one of its symbols is missing, so the library is probed first and the
//! first driver calls run under `catch_unwind`.

use std::panic::{catch_unwind, AssertUnwindSafe};

use cudarc::driver::{sys, CudaContext, DriverError};

use crate::error::{CudaError, Result};

/// Run a driver call; a panic (missing symbol) becomes `Unavailable`.
pub(crate) fn guarded<T>(call: &'static str, f: impl FnOnce() -> Result<T, DriverError>) -> Result<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r.map_err(|e| CudaError::driver(call, e)),
        Err(p) => {
            let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
            Err(CudaError::Unavailable(format!("{call}: the CUDA driver library is unusable: {msg}")))
        }
    }
}

/// Why GPU loads cannot work in this process, if they cannot.
pub fn check_available() -> Result<()> {
    if !weightstream_kernels::has_gpu_kernels() {
        return Err(CudaError::Unavailable(
            "this build has no GPU kernels: nvcc was not found when it was compiled (run scripts/setup.sh, \
             or set WEIGHTSTREAM_NVCC, then rebuild)"
                .into(),
        ));
    }
    // SAFETY: only attempts to dlopen the driver library by name.
    if !unsafe { sys::is_culib_present() } {
        return Err(CudaError::Unavailable("no NVIDIA driver: libcuda.so was not found".into()));
    }
    Ok(())
}

/// Number of CUDA devices; an error says why there are none usable.
pub fn device_count() -> Result<usize> {
    check_available()?;
    match guarded("cuDeviceGetCount", CudaContext::device_count) {
        Ok(n) if n > 0 => Ok(n as usize),
        Ok(_) => Err(CudaError::Unavailable("the driver reports no CUDA device".into())),
        Err(CudaError::Driver { name, description, .. }) => {
            Err(CudaError::Unavailable(format!("the driver cannot start: {name}: {description}")))
        }
        Err(e) => Err(e),
    }
}

/// Whether `auto` should pick the GPU.
pub fn gpu_present() -> bool {
    device_count().is_ok()
}
