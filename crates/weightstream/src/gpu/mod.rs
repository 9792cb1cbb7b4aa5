//! The GPU executor: a plan's jobs through the staging pipeline of
//! `weightstream-cuda`, into buffers it allocates or into the caller's.
//! Its pinned ring comes from the process's pool of rings and goes back
//! there when the executor is dropped, so later Loaders in the process do
//! not pin again (`weightstream_cuda::ring_pool`).

mod chunks;
mod grids;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use weightstream_cuda::{CudaError, DeviceBuffer, Gds, GdsFile, Gpu, StagingConfig, StagingRing};
use weightstream_format::io::GdsUse;
use weightstream_format::Catalog;
use weightstream_kernels::Launch;

use crate::access::JobKernel;
use crate::control::{Control, Tracker};
use crate::error::{Error, Result};
use crate::plan::Plan;
use crate::staging::Staging;
use crate::tensor::{LoadStats, Phases};
use chunks::chunks_for;

pub use weightstream_cuda::DeviceInfo;

/// A BF16 or float16 tensor (its job's output) in device memory the
/// library allocated: a piece of one allocation for the whole plan, freed
/// when the last of its tensors is dropped.
pub struct DeviceTensor {
    pub name: String,
    pub shape: Vec<u64>,
    slab: Arc<DeviceBuffer>,
    offset: u64,
    bytes: usize,
}

/// Where each tensor starts in the plan's allocation: a multiple of this,
/// so every chunk's output stays 512-byte aligned (chunks::chunk_elems).
const SLAB_ALIGN: u64 = 512;

impl DeviceTensor {
    /// Device address of the first element.
    pub fn ptr(&self) -> u64 {
        self.slab.ptr() + self.offset
    }

    /// Bytes of output.
    pub fn len(&self) -> usize {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// Copy the 16-bit values (BF16 or float16 bits) back to the host.
    pub fn to_host(&self) -> Result<Vec<u16>> {
        let mut bytes = vec![0u8; self.bytes];
        self.slab.to_host_at(self.offset, &mut bytes).map_err(device_error)?;
        Ok(bytes.chunks_exact(2).map(|b| u16::from_le_bytes([b[0], b[1]])).collect())
    }
}

fn device_error(e: CudaError) -> Error {
    match e {
        CudaError::Cancelled => Error::Cancelled,
        e => Error::Device(e),
    }
}

/// What a GPU load decided about storage, for the user: `fallback` when it
/// reads another way than the one asked for (fronts warn), else how and why
/// it reads as it does (fronts inform).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageNote {
    pub text: String,
    pub fallback: bool,
}

pub struct GpuExecutor {
    gpu: Gpu,
    staging: StagingConfig,
    /// Taken from the process's pool (or pinned) on first use, reused by
    /// every load (loads through one executor run one at a time), given
    /// back to the pool on drop.
    ring: Mutex<Option<StagingRing>>,
    /// How storage was read (cuFile or not, and why), for reports.
    notes: Mutex<Vec<StorageNote>>,
}

impl GpuExecutor {
    /// The executor of CUDA device `device`, staging as `staging` says (its
    /// `None`s take the GPU defaults: 8 pinned slots of 4 MiB, 4 readers).
    pub fn new(device: usize, staging: &Staging) -> Result<Self> {
        staging.check()?;
        let gpu = Gpu::open(device).map_err(device_error)?;
        Ok(GpuExecutor { gpu, staging: staging.gpu_ring(), ring: Mutex::new(None), notes: Mutex::new(Vec::new()) })
    }

    pub fn info(&self) -> &DeviceInfo {
        self.gpu.info()
    }

    /// Pinned staging slots.
    pub fn slots(&self) -> usize {
        self.staging.slots
    }

    /// Bytes per pinned staging slot.
    pub fn slot_bytes(&self) -> usize {
        self.staging.slot_bytes
    }

    /// Threads reading from storage into the slots.
    pub fn readers(&self) -> usize {
        self.staging.readers
    }

    /// What the loads so far decided about storage: which files cuFile read
    /// (and in which mode), and why it did not where GDS was asked for.
    pub fn notes(&self) -> Vec<StorageNote> {
        self.notes.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn note(&self, text: String, fallback: bool) {
        let mut notes = self.notes.lock().unwrap_or_else(|p| p.into_inner());
        if !notes.iter().any(|n| n.text == text) {
            notes.push(StorageNote { text, fallback });
        }
    }

    /// Per catalog file: a cuFile handle when this load reads the file with
    /// GPUDirect Storage. `--source gds` asks for it; `auto` takes it for a
    /// cold file only when the nvidia-fs driver makes it real DMA (compat
    /// mode is our own direct staging with an extra copy). Anything that
    /// stops it is noted and the file is read through pinned staging.
    fn gds_files(&self, cat: &Catalog, plan: &Plan, ring: &StagingRing) -> Vec<Option<Arc<GdsFile>>> {
        let mut out = vec![None; cat.files.len()];
        let mut used: Vec<usize> = plan.jobs.iter().map(|j| j.file).collect();
        used.sort_unstable();
        used.dedup();
        for f in used {
            let path = cat.files[f].path.display().to_string();
            let Some((file, want)) = cat.files[f].source.direct_file() else { continue };
            if want == GdsUse::Never {
                continue;
            }
            let gds = match Gds::open() {
                Ok(g) => g,
                Err(e) => {
                    if want == GdsUse::Always {
                        self.note(format!("gds: {e}; reading {path} through pinned staging instead"), true);
                    }
                    continue;
                }
            };
            if want == GdsUse::IfNative && !gds.native() {
                self.note(
                    "auto: no nvidia-fs, so cuFile would only run in compatibility mode (direct I/O plus a copy): \
                           cold files go through pinned staging"
                        .into(),
                    false,
                );
                continue;
            }
            match gds.register(file) {
                Ok(h) => {
                    if let Err(e) = ring.register_for_gds(gds) {
                        self.note(format!("gds: scratch buffers not registered ({e}); cuFile uses its bounce buffers"), true);
                    }
                    self.note(format!("gds: {path} read with cuFile, {}", gds.mode()), false);
                    out[f] = Some(Arc::new(h));
                }
                Err(e) => self.note(format!("gds: {e}; reading {path} through pinned staging instead"), true),
            }
        }
        out
    }

    /// Allocate every tensor first, in one allocation for the plan (so
    /// running out of memory stops the load before any transfer, and a
    /// plan of hundreds of tensors costs one `cuMemAlloc`), then load,
    /// handing each tensor to `sink` as it completes on the device.
    pub fn stream(
        &self,
        cat: &Catalog,
        plan: &Plan,
        control: Control,
        mut sink: impl FnMut(DeviceTensor) -> Result<()>,
    ) -> Result<LoadStats> {
        // Allocation is part of loading (baselines like safetensors pay it too).
        let t0 = Instant::now();
        let mut offsets = Vec::with_capacity(plan.jobs.len());
        let mut total = 0u64;
        for j in &plan.jobs {
            offsets.push(total);
            total += j.out_bytes().div_ceil(SLAB_ALIGN) * SLAB_ALIGN;
        }
        let what = format!("the outputs of {} tensors", plan.jobs.len());
        let bytes = usize::try_from(total).map_err(|_| Error::InvalidArgument(format!("{what}: {total} bytes")))?;
        let slab = Arc::new(self.gpu.alloc(bytes, &what).map_err(device_error)?);
        let alloc = t0.elapsed().as_secs_f64();
        let dsts: Vec<u64> = offsets.iter().map(|o| slab.ptr() + o).collect();
        let stats = self.run(cat, plan, &dsts, None, control, |i| {
            let job = &plan.jobs[i];
            let bytes = job.out_bytes() as usize;
            sink(DeviceTensor { name: job.name.clone(), shape: job.shape.clone(), slab: slab.clone(), offset: offsets[i], bytes })
        })?;
        let phases = Phases { alloc: alloc + stats.phases.alloc, ..stats.phases };
        Ok(LoadStats { seconds: t0.elapsed().as_secs_f64(), phases, ..stats })
    }

    /// Load into caller-owned device memory: `dsts[i]` receives job `i`
    /// (`out_bytes()` bytes). Work is ordered after everything already queued
    /// on `stream` (a `CUstream`/`cudaStream_t`, e.g. PyTorch's current
    /// stream; 0 is the legacy default stream, PyTorch's usual one, and is
    /// waited for like any other: our streams are non-blocking, so without
    /// that wait, memory the caller recycles on stream 0 could be written
    /// while a kernel there still reads it), and complete when this returns.
    ///
    /// # Safety
    /// Every `dsts[i]` must be device memory of this GPU's primary context
    /// with room for job `i`'s output, alive until this returns; `stream` 0
    /// or a live stream of that context.
    pub unsafe fn load_into(
        &self,
        cat: &Catalog,
        plan: &Plan,
        dsts: &[u64],
        stream: u64,
        control: Control,
        mut on_done: impl FnMut(usize) -> Result<()>,
    ) -> Result<LoadStats> {
        if dsts.len() != plan.jobs.len() {
            return Err(Error::InvalidArgument(format!("{} destinations for {} tensors", dsts.len(), plan.jobs.len())));
        }
        // SAFETY: the caller guarantees a live stream of this context (or 0).
        let borrowed = unsafe { self.gpu.borrow_stream(stream) };
        self.run(cat, plan, dsts, Some(&borrowed), control, &mut on_done)
    }

    /// Copy a tensor's stored bytes unchanged to device memory (when the
    /// wanted dtype is the stored one, e.g. F32 norms into an F32 buffer).
    ///
    /// # Safety
    /// `dst` must be device memory of this GPU's primary context with room
    /// for the tensor's `nbytes`.
    pub unsafe fn copy_raw(&self, cat: &Catalog, tensor: usize, dst: u64) -> Result<()> {
        let t = &cat.tensors[tensor];
        let bytes = crate::access::bytes(cat, t.file, t.offset..t.offset + t.nbytes, &t.name)?;
        // SAFETY: the caller guarantees device memory with room for nbytes.
        unsafe { self.gpu.copy_to_device(dst, &bytes) }.map_err(device_error)
    }

    /// Copy `src` (host bytes) to a device buffer of its own and run
    /// `launch` over `n` elements from it into `dst`, ordered after the
    /// work queued on `stream`; complete (the buffer freed) when this
    /// returns. For one-off moves such as the GPTQ repack.
    ///
    /// # Safety
    /// `dst` and every address inside `launch` must be device memory of
    /// this GPU's primary context with room for what the launch writes,
    /// alive until this returns; `stream` 0 or a live stream of it.
    pub unsafe fn launch_from_host(&self, src: &[u8], launch: &Launch, dst: u64, n: u64, stream: u64, what: &str) -> Result<()> {
        let buf = self.gpu.alloc(src.len().max(1), what).map_err(device_error)?;
        buf.from_host(src).map_err(device_error)?;
        // SAFETY: the caller guarantees a live stream of this context (or 0).
        let borrowed = unsafe { self.gpu.borrow_stream(stream) };
        // SAFETY: buf holds src; the caller vouches for dst and the launch's addresses.
        unsafe { self.gpu.launch(launch, buf.ptr(), dst, n, &borrowed) }.map_err(device_error)?;
        // The kernel reads buf: wait for it before buf is freed.
        borrowed.synchronize().map_err(|e| device_error(CudaError::driver("cuStreamSynchronize", e)))
    }

    fn run(
        &self,
        cat: &Catalog,
        plan: &Plan,
        dsts: &[u64],
        after: Option<&weightstream_cuda::CudaStream>,
        control: Control,
        mut on_done: impl FnMut(usize) -> Result<()>,
    ) -> Result<LoadStats> {
        let t0 = Instant::now();
        let tracker = Tracker::new(control, plan.jobs.len() as u64, plan.src_bytes());
        // Scales and zero points as f32 on the device, gathered into a few
        // buffers (grids.rs).
        let mut grids = grids::Grids::new(&self.gpu);
        let mut handles: Vec<(Option<usize>, Option<usize>)> = Vec::with_capacity(plan.jobs.len());
        for job in &plan.jobs {
            let jk = JobKernel::new(cat, job)?;
            // The CPU kernel's checks (scale count and cover, packing)
            // before any launch reads the scales.
            jk.kernel()?;
            let s = jk.scales().map(|v| grids.add(v)).transpose()?;
            let z = jk.zeros().map(|v| grids.add(v)).transpose()?;
            handles.push((s, z));
        }
        let grids = grids.finish()?;
        let alloc = t0.elapsed().as_secs_f64();
        let mut ring = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        if ring.is_none() {
            *ring = Some(weightstream_cuda::take_ring(&self.gpu, self.staging).map_err(device_error)?);
        }
        let ring = ring.as_ref().expect("made above");
        let ring_seconds = t0.elapsed().as_secs_f64() - alloc;
        let gds = self.gds_files(cat, plan, ring);
        let mut work = Vec::new();
        for (i, job) in plan.jobs.iter().enumerate() {
            if job.n_elems == 0 {
                on_done(i)?;
                tracker.tensor_done();
                continue;
            }
            let ptrs = (handles[i].0.map(|h| grids.ptr(h)), handles[i].1.map(|h| grids.ptr(h)));
            chunks_for(cat, job, i, dsts[i], ptrs, gds[job.file].clone(), self.staging.slot_bytes, &mut work)?;
        }
        let cancelled = || control.check().is_err();
        // The sink's own error, kept whole (the pipeline only carries CudaError).
        let mut sink_error = None;
        let times = weightstream_cuda::run(&self.gpu, ring, &work, after, &cancelled, |i| {
            tracker.add_bytes(plan.jobs[i].src_bytes());
            tracker.tensor_done();
            on_done(i).map_err(|e| {
                sink_error = Some(e);
                CudaError::Invalid("the consumer of a finished tensor failed".into())
            })
        });
        if let Some(e) = sink_error {
            return Err(e);
        }
        let times = times.map_err(|e| match e {
            CudaError::Read { file, offset, tensor, source } => {
                Error::Read { file, tensor: plan.jobs[tensor].name.clone(), offset, source }
            }
            e => device_error(e),
        })?;
        Ok(LoadStats {
            tensors: plan.jobs.len() as u64,
            src_bytes: plan.read_bytes(),
            out_bytes: plan.out_bytes(),
            seconds: t0.elapsed().as_secs_f64(),
            phases: Phases {
                alloc,
                ring: ring_seconds,
                pipeline: times.pipeline.as_secs_f64(),
                drain: times.drain.as_secs_f64(),
                ..Phases::from_ring(&times.ring)
            },
        })
    }
}

impl Drop for GpuExecutor {
    /// The ring goes back to the process's pool for the next executor of
    /// this device (every run leaves it drained).
    fn drop(&mut self) {
        let ring = self.ring.get_mut().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(r) = ring {
            weightstream_cuda::keep_ring(self.gpu.info().ordinal, r);
        }
    }
}
