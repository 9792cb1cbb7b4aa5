//! One GPU: its primary context (the one PyTorch uses, so torch pointers and
//! streams work directly), the kernels loaded from the embedded fatbins, and
//! launches.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::{result, sys, CudaContext, CudaFunction, CudaStream};
use cudarc::nvrtc::Ptx;
use weightstream_kernels::{fatbin, geometry, Launch};

use crate::error::{CudaError, Result};
use crate::memory::{DeviceBuffer, PinnedBuffer};
use crate::probe::{device_count, guarded};

#[derive(Debug, Clone)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    pub total_mem: usize,
    pub sm_count: u32,
    pub compute_capability: (i32, i32),
}

pub struct Gpu {
    ctx: Arc<CudaContext>,
    functions: HashMap<&'static str, CudaFunction>,
    info: DeviceInfo,
}

fn attr(ctx: &CudaContext, a: sys::CUdevice_attribute) -> Result<i32> {
    ctx.attribute(a).map_err(|e| CudaError::driver("cuDeviceGetAttribute", e))
}

impl Gpu {
    /// Open device `ordinal`: retain its primary context and load the kernels.
    pub fn open(ordinal: usize) -> Result<Gpu> {
        let n = device_count()?;
        if ordinal >= n {
            return Err(CudaError::Unavailable(format!("cuda:{ordinal} does not exist: {n} device(s), cuda:0..cuda:{}", n - 1)));
        }
        let ctx = guarded("cuDevicePrimaryCtxRetain", || CudaContext::new(ordinal))?;
        // cudarc's event tracking makes the first `new_stream` synchronize
        // the whole primary context (all of torch's queued work) and tags
        // every CudaSlice use with events. We allocate no CudaSlice (our
        // buffers are memory.rs's) and order our streams with explicit
        // events, so turn it off.
        // SAFETY: nothing in this crate creates a CudaSlice, the only kind of
        // allocation event tracking protects; stream ordering is ours.
        unsafe { ctx.disable_event_tracking() };
        let mut modules = HashMap::new();
        let mut functions = HashMap::new();
        // Every kernel the executor launches, from the one list (Launch::every).
        for (module, name) in Launch::every().map(|l| l.function()) {
            if !modules.contains_key(module) {
                let image =
                    fatbin(module).ok_or_else(|| CudaError::Unavailable(format!("kernel module {module} missing from this build")))?;
                let m = guarded("cuModuleLoadData", || ctx.load_module(Ptx::from_binary(image.to_vec())))?;
                modules.insert(module, m);
            }
            let f = modules[module].load_function(name).map_err(|e| CudaError::driver("cuModuleGetFunction", e))?;
            functions.insert(name, f);
        }
        use sys::CUdevice_attribute::*;
        let info = DeviceInfo {
            ordinal,
            name: ctx.name().unwrap_or_default(),
            total_mem: ctx.total_mem().unwrap_or(0),
            sm_count: attr(&ctx, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?.max(1) as u32,
            compute_capability: (
                attr(&ctx, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
                attr(&ctx, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
            ),
        };
        Ok(Gpu { ctx, functions, info })
    }

    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    pub fn ctx(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    pub fn bind(&self) -> Result<()> {
        self.ctx.bind_to_thread().map_err(|e| CudaError::driver("cuCtxSetCurrent", e))
    }

    pub fn alloc(&self, bytes: usize, what: &str) -> Result<DeviceBuffer> {
        DeviceBuffer::alloc(&self.ctx, bytes, what)
    }

    pub fn alloc_pinned(&self, bytes: usize, write_combined: bool) -> Result<PinnedBuffer> {
        PinnedBuffer::alloc(&self.ctx, bytes, write_combined)
    }

    pub fn new_stream(&self) -> Result<Arc<CudaStream>> {
        self.ctx.new_stream().map_err(|e| CudaError::driver("cuStreamCreate", e))
    }

    /// A stream owned by someone else (PyTorch's current stream, a caller's
    /// `cudaStream_t`); not destroyed when dropped.
    ///
    /// # Safety
    /// `stream` must be 0 (the legacy default stream) or a live stream of
    /// this device's primary context that outlives the returned value.
    pub unsafe fn borrow_stream(&self, stream: u64) -> Arc<CudaStream> {
        // SAFETY: the caller guarantees a live stream of this context (or 0).
        unsafe { self.ctx.wrap_borrowed_stream(stream as sys::CUstream) }
    }

    /// Copy host bytes to a device address (synchronous).
    ///
    /// # Safety
    /// `dst` must be device memory of this context with room for `src.len()` bytes.
    pub unsafe fn copy_to_device(&self, dst: u64, src: &[u8]) -> Result<()> {
        self.bind()?;
        // SAFETY: the caller guarantees device memory of this context with room for src.
        unsafe { result::memcpy_htod_sync(dst, src) }.map_err(|e| CudaError::driver("cuMemcpyHtoD", e))
    }

    /// (free, total) device memory in bytes.
    pub fn mem_info(&self) -> Result<(usize, usize)> {
        self.bind()?;
        self.ctx.mem_get_info().map_err(|e| CudaError::driver("cuMemGetInfo", e))
    }

    /// Launch `launch` over `n` elements from device `src` into device `dst`
    /// on `stream`.
    ///
    /// # Safety
    /// `src` must hold the bytes of `n` elements of the launch's encoding,
    /// `dst` room for `n` BF16 values, the scale pointer of a scaled launch (if any) a scale
    /// grid covering the elements, all alive until the launch completes.
    pub unsafe fn launch(&self, launch: &Launch, src: u64, dst: u64, n: u64, stream: &CudaStream) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        let (_, name) = launch.function();
        let f = &self.functions[name];
        let mut args: Vec<u64> = launch.args(src, dst, n).into_iter().map(|(_, v)| v).collect();
        let mut ptrs: Vec<*mut c_void> = args.iter_mut().map(|a| a as *mut u64 as *mut c_void).collect();
        // Enough blocks to fill every SM several times over; the kernels
        // stride beyond that.
        let (grid, block) = geometry(launch.groups(n), self.info.sm_count * 32);
        self.bind()?;
        // SAFETY: the function came from our fatbin and takes exactly these
        // u64 arguments (Launch::args, kernels/cuda/*.cu); the caller vouches for the pointers.
        unsafe { result::launch_kernel(f.cu_function(), (grid, 1, 1), (block, 1, 1), 0, stream.cu_stream(), &mut ptrs) }
            .map_err(|e| CudaError::driver("cuLaunchKernel", e))
    }
}
