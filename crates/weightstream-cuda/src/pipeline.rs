//! The staging pipeline: file bytes -> pinned ring -> device scratch ->
//! kernel -> destination, with reads, copies and kernels overlapped.
//!
//! ```text
//! reader threads:  read chunk i into pinned[i % S]            (waits: slot free)
//! copy stream:     pinned[s] -> scratch[s], record copy_done[s]
//! compute stream:  wait copy_done[s]; kernel scratch[s] -> dst; record slot_free[s]
//! ```
//! Chunk `i` may use slot `s = i % S` once chunk `i - S` was submitted and its
//! `slot_free` event completed (its copy and kernel are done). Readers run
//! ahead of the submitter by up to S chunks; the submitter (the calling
//! thread) issues copies and kernels in chunk order. On any error or cancel
//! everything stops, both streams are drained, and every buffer is freed.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex};

use cudarc::driver::{result, sys, CudaEvent, CudaStream};
use weightstream_format::SharedSource;
use weightstream_kernels::Launch;

use crate::error::{CudaError, Result};
use crate::gpu::Gpu;
use crate::memory::{DeviceBuffer, PinnedBuffer};

/// Ring geometry and parallelism.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StagingConfig {
    /// Pinned buffers (and device scratch buffers) in the ring.
    pub slots: usize,
    /// Bytes per slot: the largest chunk of file bytes.
    pub slot_bytes: usize,
    /// Threads reading from the byte source.
    pub readers: usize,
}

impl Default for StagingConfig {
    fn default() -> Self {
        StagingConfig { slots: 8, slot_bytes: 16 << 20, readers: 4 }
    }
}

/// What happens on the device once a chunk's bytes are there.
#[derive(Debug, Clone, Copy)]
pub enum ChunkOp {
    Kernel(Launch),
    /// BF16 source: the bytes are already the output.
    Copy,
}

/// One chunk: `len` bytes at `offset` of `source`, becoming `n` BF16 values
/// at device address `dst`.
#[derive(Clone)]
pub struct ChunkWork {
    /// The caller's index of the tensor this chunk belongs to.
    pub tensor: usize,
    pub source: SharedSource,
    pub offset: u64,
    pub len: usize,
    pub op: ChunkOp,
    pub n: u64,
    pub dst: u64,
    /// The tensor is complete once this chunk is.
    pub last_of_tensor: bool,
}

struct State {
    next: usize,
    /// Per slot: the chunk whose bytes it holds, ready to submit.
    filled: Vec<Option<usize>>,
    submitted: usize,
    abort: bool,
    error: Option<CudaError>,
}

struct Shared {
    state: Mutex<State>,
    cv: Condvar,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A poisoned lock means a thread panicked holding it; the state is
        // still consistent enough to stop on.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn fail(&self, e: CudaError) {
        let mut st = self.lock();
        if st.error.is_none() {
            st.error = Some(e);
        }
        st.abort = true;
        self.cv.notify_all();
    }
}

fn event(gpu: &Gpu, flags: sys::CUevent_flags) -> Result<CudaEvent> {
    gpu.ctx().new_event(Some(flags)).map_err(|e| CudaError::driver("cuEventCreate", e))
}

/// The ring: pinned and device buffers, their events, and the two streams.
/// Made once and reused by every run (a loader called once per tensor would
/// otherwise allocate and free it hundreds of times); each run ends with
/// both streams drained, so the next starts with every slot free.
pub struct StagingRing {
    cfg: StagingConfig,
    pinned: Vec<PinnedBuffer>,
    scratch: Vec<DeviceBuffer>,
    copy_done: Vec<CudaEvent>,
    slot_free: Vec<CudaEvent>,
    copy: std::sync::Arc<CudaStream>,
    compute: std::sync::Arc<CudaStream>,
}

impl StagingRing {
    pub fn new(gpu: &Gpu, cfg: StagingConfig) -> Result<StagingRing> {
        if cfg.slots == 0 || cfg.slot_bytes == 0 || cfg.readers == 0 {
            return Err(CudaError::Invalid(format!("staging needs at least one slot, byte and reader: {cfg:?}")));
        }
        gpu.bind()?;
        let mut r = StagingRing {
            cfg,
            pinned: vec![],
            scratch: vec![],
            copy_done: vec![],
            slot_free: vec![],
            copy: gpu.new_stream()?,
            compute: gpu.new_stream()?,
        };
        for _ in 0..cfg.slots {
            r.pinned.push(gpu.alloc_pinned(cfg.slot_bytes)?);
            r.scratch.push(gpu.alloc(cfg.slot_bytes, "a staging scratch buffer")?);
            r.copy_done.push(event(gpu, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)?);
            // Readers block on these: sleep rather than spin.
            r.slot_free.push(event(gpu, sys::CUevent_flags::CU_EVENT_BLOCKING_SYNC)?);
        }
        Ok(r)
    }

    pub fn config(&self) -> StagingConfig {
        self.cfg
    }
}

/// Run every chunk. `on_tensor_done(t)` is called, in completion order, once
/// all of tensor `t`'s chunks have finished on the device. `after` (a
/// caller's stream) is waited on before the first write, so memory the
/// caller just allocated on it is safe to fill; everything is complete when
/// this returns.
pub fn run(
    gpu: &Gpu,
    ring: &StagingRing,
    work: &[ChunkWork],
    after: Option<&CudaStream>,
    cancelled: &(dyn Fn() -> bool + Sync),
    mut on_tensor_done: impl FnMut(usize) -> Result<()>,
) -> Result<()> {
    let cfg = ring.cfg;
    if let Some(w) = work.iter().find(|w| w.len > cfg.slot_bytes) {
        return Err(CudaError::Invalid(format!("a chunk of {} bytes does not fit {}-byte staging slots", w.len, cfg.slot_bytes)));
    }
    if work.is_empty() {
        return Ok(());
    }
    gpu.bind()?;
    let slots = cfg.slots;
    let (copy, compute) = (&*ring.copy, &*ring.compute);
    if let Some(s) = after {
        let ready = event(gpu, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)?;
        ready.record(s).map_err(|e| CudaError::driver("cuEventRecord", e))?;
        compute.wait(&ready).map_err(|e| CudaError::driver("cuStreamWaitEvent", e))?;
    }
    let shared = Shared {
        state: Mutex::new(State { next: 0, filled: vec![None; slots], submitted: 0, abort: false, error: None }),
        cv: Condvar::new(),
    };
    let readers = cfg.readers.clamp(1, slots.min(work.len()));

    let outcome = std::thread::scope(|scope| {
        for _ in 0..readers {
            scope.spawn(|| reader(gpu, ring, work, &shared, slots));
        }
        let r = submit_all(gpu, ring, work, &shared, slots, copy, compute, cancelled, &mut on_tensor_done);
        if r.is_err() {
            let mut st = shared.lock();
            st.abort = true;
            shared.cv.notify_all();
        }
        // Whatever happened, nothing may still be in flight when the ring is
        // freed: drain both streams before the readers are joined and the
        // buffers dropped.
        let drained = copy.synchronize().and(compute.synchronize()).map_err(|e| CudaError::driver("cuStreamSynchronize", e));
        (r, drained)
    });
    let reader_error = shared.lock().error.take();
    match (outcome, reader_error) {
        ((Err(Stop::Failed(e)), _), _) => Err(e),
        ((Err(Stop::Aborted), _), Some(e)) => Err(e),
        ((Err(Stop::Aborted), _), None) => Err(CudaError::Invalid("the staging pipeline stopped without a reason".into())),
        ((Ok(()), _), Some(e)) => Err(e),
        ((Ok(()), drained), None) => drained,
    }
}

/// Why the submitter stopped: its own error, or a reader's (kept in `State`).
enum Stop {
    Aborted,
    Failed(CudaError),
}

impl From<CudaError> for Stop {
    fn from(e: CudaError) -> Stop {
        Stop::Failed(e)
    }
}

fn reader(gpu: &Gpu, ring: &StagingRing, work: &[ChunkWork], shared: &Shared, slots: usize) {
    if let Err(e) = gpu.bind() {
        return shared.fail(e);
    }
    loop {
        let i = {
            let mut st = shared.lock();
            if st.abort || st.next >= work.len() {
                return;
            }
            st.next += 1;
            st.next - 1
        };
        let s = i % slots;
        if i >= slots {
            // Wait until the slot's previous chunk was submitted, then until
            // the device is done with it.
            let mut st = shared.lock();
            while !st.abort && st.submitted < i - slots + 1 {
                st = shared.cv.wait(st).unwrap_or_else(|p| p.into_inner());
            }
            if st.abort {
                return;
            }
            drop(st);
            if let Err(e) = ring.slot_free[s].synchronize() {
                return shared.fail(CudaError::driver("cuEventSynchronize", e));
            }
        }
        let w = &work[i];
        // SAFETY: slot s belongs to chunk i now: its previous chunk's copy and
        // kernel completed (slot_free), and the next chunk to use it waits
        // until this one is submitted.
        let buf = unsafe { ring.pinned[s].slice_mut(w.len) };
        if let Err(source) = w.source.read_at(w.offset, buf) {
            return shared.fail(CudaError::Read { file: w.source.path().to_path_buf(), offset: w.offset, tensor: w.tensor, source });
        }
        let mut st = shared.lock();
        st.filled[s] = Some(i);
        shared.cv.notify_all();
    }
}

#[allow(clippy::too_many_arguments)]
fn submit_all(
    gpu: &Gpu,
    ring: &StagingRing,
    work: &[ChunkWork],
    shared: &Shared,
    slots: usize,
    copy: &CudaStream,
    compute: &CudaStream,
    cancelled: &(dyn Fn() -> bool + Sync),
    on_tensor_done: &mut impl FnMut(usize) -> Result<()>,
) -> Result<(), Stop> {
    let mut pending: VecDeque<(usize, CudaEvent)> = VecDeque::new();
    for (i, w) in work.iter().enumerate() {
        if cancelled() {
            return Err(CudaError::Cancelled.into());
        }
        let s = i % slots;
        {
            let mut st = shared.lock();
            while st.filled[s] != Some(i) && !st.abort {
                st = shared.cv.wait(st).unwrap_or_else(|p| p.into_inner());
            }
            if st.abort {
                return Err(Stop::Aborted);
            }
            st.filled[s] = None;
        }
        let scratch = ring.scratch[s].ptr();
        // SAFETY: the reader finished writing w.len bytes to pinned[s]; the
        // slot is not reused before slot_free[s] (recorded below) completes.
        let host = unsafe { std::slice::from_raw_parts(ring.pinned[s].as_ptr(), w.len) };
        unsafe { result::memcpy_htod_async(scratch, host, copy.cu_stream()) }.map_err(|e| CudaError::driver("cuMemcpyHtoDAsync", e))?;
        ring.copy_done[s].record(copy).map_err(|e| CudaError::driver("cuEventRecord", e))?;
        compute.wait(&ring.copy_done[s]).map_err(|e| CudaError::driver("cuStreamWaitEvent", e))?;
        match w.op {
            // SAFETY: scratch[s] holds the chunk's bytes; the caller
            // guarantees dst has room for n BF16 values and valid scales.
            ChunkOp::Kernel(l) => unsafe { gpu.launch(&l, scratch, w.dst, w.n, compute)? },
            ChunkOp::Copy => unsafe { result::memcpy_dtod_async(w.dst, scratch, w.len, compute.cu_stream()) }
                .map_err(|e| CudaError::driver("cuMemcpyDtoDAsync", e))?,
        }
        ring.slot_free[s].record(compute).map_err(|e| CudaError::driver("cuEventRecord", e))?;
        if w.last_of_tensor {
            let done = event(gpu, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)?;
            done.record(compute).map_err(|e| CudaError::driver("cuEventRecord", e))?;
            pending.push_back((w.tensor, done));
        }
        {
            let mut st = shared.lock();
            st.submitted = i + 1;
            shared.cv.notify_all();
        }
        while pending.front().is_some_and(|(_, ev)| ev.is_complete()) {
            let (t, _) = pending.pop_front().expect("front exists");
            on_tensor_done(t)?;
        }
    }
    compute.synchronize().map_err(|e| CudaError::driver("cuStreamSynchronize", e))?;
    for (t, _) in pending {
        on_tensor_done(t)?;
    }
    Ok(())
}
