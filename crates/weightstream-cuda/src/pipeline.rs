//! The staging pipeline: file bytes -> pinned ring -> device scratch ->
//! kernel -> destination, with reads, copies and kernels overlapped.
//!
//! ```text
//! reader threads:  wait slot_free[s]; read chunk i into pinned[s]   (s = i % S)
//!                  (cuFile chunks: read straight into scratch[s] instead)
//! submitter:       pinned[s] -> scratch[s] on the copy stream, record copy_done[s];
//!                  compute stream waits copy_done[s], runs the kernel, records slot_free[s]
//! ```
//! The ordering between readers and the submitter is weightstream-io's
//! ordered ring (`ordered::run`): chunk `i` gets slot `i % S` only after
//! chunk `i - S` was submitted; its reader then waits on `slot_free[s]`, so
//! the device is done with the slot before new bytes land in it. On any error
//! or cancel everything stops, both streams are drained, and the ring is
//! ready for the next run.
//!
//! Direct-I/O sources read the 4 KiB-aligned range around a chunk (so slots
//! carry [`SLOT_PAD`] spare bytes) and the copy starts past the skew.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cudarc::driver::{result, sys, CudaEvent, CudaStream};
use weightstream_io::aligned::{align_down, align_up};
use weightstream_io::ordered::{self, RingShape, RingTimes};
use weightstream_io::{SharedSource, DIRECT_ALIGN};
use weightstream_kernels::Launch;

use crate::error::{CudaError, Result};
use crate::gds::{Gds, GdsBuffer, GdsFile};
use crate::gpu::Gpu;
use crate::memory::{DeviceBuffer, PinnedBuffer};
use crate::trim::{self, Out, Step, Trim, MAX_TRIM_BLOCK};

/// Spare bytes per slot: a direct read covers the chunk's enclosing aligned
/// range, up to two blocks more than the chunk.
pub const SLOT_PAD: usize = 2 * DIRECT_ALIGN;

/// Ring geometry and parallelism.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StagingConfig {
    /// Pinned buffers (and device scratch buffers) in the ring.
    pub slots: usize,
    /// Bytes per slot: the largest chunk of file bytes.
    pub slot_bytes: usize,
    /// Threads reading from the byte source.
    pub readers: usize,
    /// Pin the ring write-combined (`CU_MEMHOSTALLOC_WRITECOMBINED`): the
    /// host only writes it and the DMA engine only reads it, which is the
    /// use that memory type is for; whether it is faster is measured by the
    /// GPU round (docs/gpu-round.md), so it is off unless asked for.
    pub write_combined: bool,
}

impl Default for StagingConfig {
    /// 8 slots of 4 MiB, 4 readers: the fastest of 24 configurations (4-16
    /// slots of 4-64 MiB, 2-8 readers) loading Llama-7B-shaped Q4_0 on an
    /// H200 (docs/PERFORMANCE.md, GPU round of 2026-11-27): 0.044 s against
    /// 0.103 s for the 8 x 16 MiB default before. A load pins its ring
    /// afresh, and pinning costs about 0.5 s per GiB there, more than
    /// larger reads save.
    fn default() -> Self {
        StagingConfig { slots: 8, slot_bytes: 4 << 20, readers: 4, write_combined: false }
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
    /// Read with cuFile straight into device scratch (GPUDirect Storage)
    /// instead of through pinned host memory.
    pub gds: Option<Arc<GdsFile>>,
    pub offset: u64,
    pub len: usize,
    pub op: ChunkOp,
    pub n: u64,
    /// Where the first output value goes (the first kept one when trimmed).
    pub dst: u64,
    /// Only part of the `n` dequantized values are output (a slice whose
    /// edge falls inside a block): see [`crate::trim`].
    pub trim: Option<Trim>,
    /// The tensor is complete once this chunk is.
    pub last_of_tensor: bool,
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
    /// cuFile registrations of the scratch buffers, made on the first GDS
    /// run. Declared before `scratch`: dropped (deregistered) first.
    gds_buffers: Mutex<Option<Vec<GdsBuffer>>>,
    pinned: Vec<PinnedBuffer>,
    scratch: Vec<DeviceBuffer>,
    /// One block's BF16 values for trimmed chunks (used in compute-stream
    /// order only, so one serves every slot).
    trim_scratch: DeviceBuffer,
    copy_done: Vec<CudaEvent>,
    slot_free: Vec<CudaEvent>,
    copy: Arc<CudaStream>,
    compute: Arc<CudaStream>,
}

impl StagingRing {
    pub fn new(gpu: &Gpu, cfg: StagingConfig) -> Result<StagingRing> {
        if cfg.slots == 0 || cfg.slot_bytes == 0 || cfg.readers == 0 {
            return Err(CudaError::Invalid(format!("staging needs at least one slot, byte and reader: {cfg:?}")));
        }
        gpu.bind()?;
        let mut r = StagingRing {
            cfg,
            gds_buffers: Mutex::new(None),
            pinned: vec![],
            scratch: vec![],
            trim_scratch: gpu.alloc(MAX_TRIM_BLOCK as usize * 2, "the trimmed-block scratch buffer")?,
            copy_done: vec![],
            slot_free: vec![],
            copy: gpu.new_stream()?,
            compute: gpu.new_stream()?,
        };
        // Device scratch first: a ring too large for the GPU fails there,
        // before gigabytes of host memory are pinned for nothing.
        for _ in 0..cfg.slots {
            r.scratch.push(gpu.alloc(cfg.slot_bytes + SLOT_PAD, "a staging scratch buffer")?);
            r.copy_done.push(event(gpu, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)?);
            // Readers block on these: sleep rather than spin.
            r.slot_free.push(event(gpu, sys::CUevent_flags::CU_EVENT_BLOCKING_SYNC)?);
        }
        for _ in 0..cfg.slots {
            // One block extra so the slot can start on a 4 KiB boundary
            // whatever alignment the allocator gives.
            r.pinned.push(gpu.alloc_pinned(cfg.slot_bytes + SLOT_PAD + DIRECT_ALIGN, cfg.write_combined)?);
        }
        Ok(r)
    }

    pub fn config(&self) -> StagingConfig {
        self.cfg
    }

    /// Slot `s` of pinned memory: 4 KiB aligned, `slot_bytes + SLOT_PAD` long.
    fn pinned_slot(&self, s: usize) -> *mut u8 {
        let p = self.pinned[s].as_ptr() as *mut u8;
        p.wrapping_add(p.align_offset(DIRECT_ALIGN))
    }

    /// Register the scratch buffers with cuFile (once per ring; a failure
    /// only costs speed, and is returned for the log).
    pub fn register_for_gds(&self, gds: &'static Gds) -> std::result::Result<(), String> {
        let mut regs = self.gds_buffers.lock().unwrap_or_else(|p| p.into_inner());
        if regs.is_some() {
            return Ok(());
        }
        let mut v = Vec::new();
        for b in &self.scratch {
            // SAFETY: the scratch buffers live as long as the ring, and the
            // registrations are dropped first (field order).
            v.push(unsafe { gds.register_buffer(b.ptr(), b.len()) }?);
        }
        *regs = Some(v);
        Ok(())
    }
}

/// Where a run's time went.
#[derive(Debug, Clone, Default)]
pub struct RunTimes {
    /// The readers' side: first chunk in, each reader's busy time.
    pub ring: RingTimes,
    /// Until every chunk's copy and kernel was queued.
    pub pipeline: Duration,
    /// Then until both streams were done.
    pub drain: Duration,
}

/// Where a reader left a chunk's bytes.
enum Filled {
    /// In the slot's pinned memory, at this range.
    Host(Range<usize>),
    /// Already in the slot's device scratch, this many bytes in.
    Device(u64),
}

/// Run every chunk. `on_tensor_done(t)` is called, in completion order, once
/// all of tensor `t`'s chunks have finished on the device. `after` (a
/// caller's stream) is waited on before the first write, so memory the
/// caller just allocated on it is safe to fill; everything is complete when
/// this returns, which also says where the time went.
pub fn run(
    gpu: &Gpu,
    ring: &StagingRing,
    work: &[ChunkWork],
    after: Option<&CudaStream>,
    cancelled: &(dyn Fn() -> bool + Sync),
    mut on_tensor_done: impl FnMut(usize) -> Result<()>,
) -> Result<RunTimes> {
    let cfg = ring.cfg;
    if let Some(w) = work.iter().find(|w| w.len > cfg.slot_bytes) {
        return Err(CudaError::Invalid(format!("a chunk of {} bytes does not fit {}-byte staging slots", w.len, cfg.slot_bytes)));
    }
    if work.is_empty() {
        return Ok(RunTimes::default());
    }
    let t0 = Instant::now();
    gpu.bind()?;
    let (copy, compute) = (&*ring.copy, &*ring.compute);
    if let Some(s) = after {
        let ready = event(gpu, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)?;
        ready.record(s).map_err(|e| CudaError::driver("cuEventRecord", e))?;
        compute.wait(&ready).map_err(|e| CudaError::driver("cuStreamWaitEvent", e))?;
    }
    let fill = |i: usize, s: usize| -> Result<Filled> {
        gpu.bind()?;
        if i >= cfg.slots {
            // The slot's previous chunk was submitted (the ring's promise);
            // wait until the device is done reading it.
            ring.slot_free[s].synchronize().map_err(|e| CudaError::driver("cuEventSynchronize", e))?;
        }
        let w = &work[i];
        match &w.gds {
            Some(f) => gds_fill(ring, s, w, f),
            None => host_fill(ring, s, w),
        }
    };
    let mut pending: VecDeque<(usize, CudaEvent)> = VecDeque::new();
    let consume = |i: usize, s: usize, filled: Filled| -> Result<()> {
        if cancelled() {
            return Err(CudaError::Cancelled);
        }
        let w = &work[i];
        let scratch = ring.scratch[s].ptr();
        let src = match filled {
            Filled::Host(r) => {
                // SAFETY: the reader finished writing r in slot s; the slot is
                // not refilled before slot_free[s] (recorded below) completes.
                let host = unsafe { std::slice::from_raw_parts(ring.pinned_slot(s).add(r.start), r.len()) };
                // SAFETY: scratch[s] holds a slot's bytes; the copy is ordered on `copy`
                // and the slot is not reused before slot_free[s].
                unsafe { result::memcpy_htod_async(scratch, host, copy.cu_stream()) }
                    .map_err(|e| CudaError::driver("cuMemcpyHtoDAsync", e))?;
                ring.copy_done[s].record(copy).map_err(|e| CudaError::driver("cuEventRecord", e))?;
                compute.wait(&ring.copy_done[s]).map_err(|e| CudaError::driver("cuStreamWaitEvent", e))?;
                scratch
            }
            // cuFileRead returned: the bytes are in device memory.
            Filled::Device(at) => scratch + at,
        };
        match (w.op, &w.trim) {
            // SAFETY: src holds the chunk's bytes; the caller guarantees dst
            // has room for the kept values and valid scales.
            (ChunkOp::Kernel(l), Some(t)) => unsafe { run_trimmed(gpu, &l, t, src, w, ring.trim_scratch.ptr(), compute)? },
            // SAFETY: src holds the chunk's bytes; the caller guarantees dst
            // has room for n BF16 values and valid scales.
            (ChunkOp::Kernel(l), None) => unsafe { gpu.launch(&l, src, w.dst, w.n, compute)? },
            (ChunkOp::Copy, Some(_)) => return Err(CudaError::Invalid("a BF16 chunk has no blocks to trim".into())),
            // SAFETY: as above; a BF16 chunk's bytes are its output.
            (ChunkOp::Copy, None) => unsafe { result::memcpy_dtod_async(w.dst, src, w.len, compute.cu_stream()) }
                .map_err(|e| CudaError::driver("cuMemcpyDtoDAsync", e))?,
        }
        ring.slot_free[s].record(compute).map_err(|e| CudaError::driver("cuEventRecord", e))?;
        if w.last_of_tensor {
            let done = event(gpu, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)?;
            done.record(compute).map_err(|e| CudaError::driver("cuEventRecord", e))?;
            pending.push_back((w.tensor, done));
        }
        while pending.front().is_some_and(|(_, ev)| ev.is_complete()) {
            let (t, _) = pending.pop_front().expect("front exists");
            on_tensor_done(t)?;
        }
        Ok(())
    };
    let outcome = ordered::run(work.len(), RingShape { slots: cfg.slots, workers: cfg.readers }, &fill, consume);
    let queued = t0.elapsed();
    // Whatever happened, nothing may be in flight when this returns: the
    // caller may free the destinations, and the next run reuses the slots.
    let drained = copy.synchronize().and(compute.synchronize()).map_err(|e| CudaError::driver("cuStreamSynchronize", e));
    let times = RunTimes { ring: outcome?, pipeline: queued, drain: t0.elapsed() - queued };
    drained?;
    for (t, _) in pending {
        on_tensor_done(t)?;
    }
    Ok(times)
}

/// A trimmed chunk on `stream`: whole blocks straight to the destination,
/// each edge block into `scratch` and its kept values copied out.
///
/// # Safety
/// `src` holds the chunk's bytes, `w.dst` has room for the kept values,
/// `scratch` for one block's; all in this GPU's context.
unsafe fn run_trimmed(gpu: &Gpu, launch: &Launch, t: &Trim, src: u64, w: &ChunkWork, scratch: u64, stream: &CudaStream) -> Result<()> {
    for step in trim::steps(launch, w.n, t)? {
        match step {
            Step::Kernel { launch, src_off, n, out } => {
                let dst = match out {
                    Out::Dst(off) => w.dst + off * 2,
                    Out::Scratch => scratch,
                };
                // SAFETY: the piece's bytes lie inside the chunk's, its output
                // inside the destination or the one-block scratch (steps()
                // checked the block fits it).
                unsafe { gpu.launch(&launch, src + src_off, dst, n, stream)? }
            }
            Step::Copy { from, dst_off } => {
                // SAFETY: kept values of the block just written to scratch, on
                // the same stream, into the destination's room for them.
                unsafe {
                    result::memcpy_dtod_async(
                        w.dst + dst_off * 2,
                        scratch + from.start * 2,
                        ((from.end - from.start) * 2) as usize,
                        stream.cu_stream(),
                    )
                }
                .map_err(|e| CudaError::driver("cuMemcpyDtoDAsync", e))?
            }
        }
    }
    Ok(())
}

fn read_error(w: &ChunkWork, source: std::io::Error) -> CudaError {
    CudaError::Read { file: w.source.path().to_path_buf(), offset: w.offset, tensor: w.tensor, source }
}

/// Read chunk `w` into slot `s`'s pinned memory.
fn host_fill(ring: &StagingRing, s: usize, w: &ChunkWork) -> Result<Filled> {
    // SAFETY: the ring gives slot s to this reader alone, and slot_free[s]
    // completed: no copy from it is in flight. The slot is slot_bytes +
    // SLOT_PAD bytes inside its pinned buffer (allocated with one block more
    // for the alignment).
    let buf = unsafe { std::slice::from_raw_parts_mut(ring.pinned_slot(s), ring.cfg.slot_bytes + SLOT_PAD) };
    w.source.read_staged(w.offset, w.len, buf).map(Filled::Host).map_err(|e| read_error(w, e))
}

/// Read chunk `w` with cuFile into slot `s`'s device scratch.
fn gds_fill(ring: &StagingRing, s: usize, w: &ChunkWork, f: &GdsFile) -> Result<Filled> {
    let start = align_down(w.offset);
    let skew = w.offset - start;
    let need = (align_up(w.offset + w.len as u64) - start) as usize;
    // The kernels read 2-byte fields: keep the chunk's first byte at an even
    // device address even when the file offset is odd.
    let pad = skew & 1;
    // SAFETY: scratch[s] holds slot_bytes + SLOT_PAD >= need + pad bytes;
    // slot_free[s] completed, so no kernel is reading it.
    let got = unsafe { f.read(ring.scratch[s].ptr(), pad, need, start) }.map_err(|m| read_error(w, std::io::Error::other(m)))?;
    if (got as u64) < skew + w.len as u64 {
        let msg = format!("the file ends at {} while reading {} bytes at {} (did it shrink?)", start + got as u64, w.len, w.offset);
        return Err(read_error(w, std::io::Error::new(std::io::ErrorKind::UnexpectedEof, msg)));
    }
    Ok(Filled::Device(pad + skew))
}
