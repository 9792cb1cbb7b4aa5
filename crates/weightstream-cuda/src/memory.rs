//! Device and pinned host buffers that free themselves.

use std::sync::Arc;

use cudarc::driver::{result, sys, CudaContext};

use crate::error::{CudaError, Result};
use crate::probe::guarded;

/// Device memory from `cuMemAlloc`, freed on drop.
pub struct DeviceBuffer {
    ctx: Arc<CudaContext>,
    ptr: sys::CUdeviceptr,
    bytes: usize,
}

impl DeviceBuffer {
    pub fn alloc(ctx: &Arc<CudaContext>, bytes: usize, what: &str) -> Result<DeviceBuffer> {
        ctx.bind_to_thread().map_err(|e| CudaError::driver("cuCtxSetCurrent", e))?;
        // cuMemAlloc refuses 0 bytes; an empty tensor still gets a valid handle.
        let n = bytes.max(1);
        // SAFETY: a plain allocation in the current context; the pointer is
        // owned by the returned value and freed once, on drop.
        match guarded("cuMemAlloc", || unsafe { result::malloc_sync(n) }) {
            Ok(ptr) => Ok(DeviceBuffer { ctx: ctx.clone(), ptr, bytes }),
            Err(CudaError::Driver { name, .. }) if name.contains("OUT_OF_MEMORY") => {
                let (free, total) = ctx.mem_get_info().unwrap_or((0, 0));
                Err(CudaError::OutOfMemory { what: what.to_string(), bytes, free, total })
            }
            Err(e) => Err(e),
        }
    }

    /// The device address (as a kernel argument takes it).
    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// Copy to the host (synchronous).
    pub fn to_host(&self, out: &mut [u8]) -> Result<()> {
        self.to_host_at(0, out)
    }

    /// Copy the bytes from `offset` on to the host (synchronous).
    pub fn to_host_at(&self, offset: u64, out: &mut [u8]) -> Result<()> {
        if offset.checked_add(out.len() as u64).is_none_or(|end| end > self.bytes as u64) {
            return Err(CudaError::Invalid(format!("copy of {} bytes at {offset} from a {}-byte buffer", out.len(), self.bytes)));
        }
        self.ctx.bind_to_thread().map_err(|e| CudaError::driver("cuCtxSetCurrent", e))?;
        // SAFETY: the buffer holds offset + out.len() bytes (checked above).
        unsafe { result::memcpy_dtoh_sync(out, self.ptr + offset) }.map_err(|e| CudaError::driver("cuMemcpyDtoH", e))
    }

    /// Copy from the host, landed when this returns. `cuMemcpyHtoD` from
    /// pageable memory may return once the bytes are staged, before the DMA
    /// to the device completes, and our streams are non-blocking (they do
    /// not wait for the legacy stream): a kernel launched next could read
    /// the old contents (issue 33, item 2). So the context is synchronized
    /// after the copy.
    pub fn from_host(&self, data: &[u8]) -> Result<()> {
        if data.len() > self.bytes {
            return Err(CudaError::Invalid(format!("copy of {} bytes into a {}-byte buffer", data.len(), self.bytes)));
        }
        self.ctx.bind_to_thread().map_err(|e| CudaError::driver("cuCtxSetCurrent", e))?;
        // SAFETY: the buffer holds at least data.len() bytes (checked above).
        unsafe { result::memcpy_htod_sync(self.ptr, data) }.map_err(|e| CudaError::driver("cuMemcpyHtoD", e))?;
        result::ctx::synchronize().map_err(|e| CudaError::driver("cuCtxSynchronize", e))
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // Errors cannot propagate from drop; a failed free leaves nothing to retry.
        let _ = self.ctx.bind_to_thread();
        // SAFETY: ptr came from malloc_sync in this context and is freed once.
        let _ = unsafe { result::free_sync(self.ptr) };
    }
}

/// Page-locked host memory from `cuMemHostAlloc` (portable; write-combined
/// when asked: then reading it from the host is slow, so only buffers the
/// host never reads back may be), freed on drop. The DMA engine reads it
/// directly.
pub struct PinnedBuffer {
    ctx: Arc<CudaContext>,
    ptr: *mut u8,
    bytes: usize,
}

// SAFETY: the buffer is plain memory owned by this value; the pipeline
// hands each slot to one thread at a time.
unsafe impl Send for PinnedBuffer {}
// SAFETY: as for Send: shared access only reads the pointer and length.
unsafe impl Sync for PinnedBuffer {}

impl PinnedBuffer {
    pub fn alloc(ctx: &Arc<CudaContext>, bytes: usize, write_combined: bool) -> Result<PinnedBuffer> {
        ctx.bind_to_thread().map_err(|e| CudaError::driver("cuCtxSetCurrent", e))?;
        let flags = sys::CU_MEMHOSTALLOC_PORTABLE | if write_combined { sys::CU_MEMHOSTALLOC_WRITECOMBINED } else { 0 };
        // SAFETY: an allocation owned by the returned value, freed once on drop.
        let ptr = guarded("cuMemHostAlloc", || unsafe { result::malloc_host(bytes.max(1), flags) })?;
        Ok(PinnedBuffer { ctx: ctx.clone(), ptr: ptr as *mut u8, bytes })
    }

    pub fn len(&self) -> usize {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    pub fn as_ptr(&self) -> *const u8 {
        self.ptr
    }

    /// # Safety
    /// The caller must be the only user of the buffer while the slice lives
    /// (no DMA from it in flight).
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn slice_mut(&self, len: usize) -> &mut [u8] {
        // SAFETY: at most `bytes` bytes of this allocation; the caller is its only user.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, len.min(self.bytes)) }
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: ptr came from malloc_host and is freed once.
        let _ = unsafe { result::free_host(self.ptr as *mut std::ffi::c_void) };
    }
}
