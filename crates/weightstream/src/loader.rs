//! The front door: a [`Loader`] owns an opened checkpoint, its staging
//! settings and the executors that serve it, made once and reused. Every
//! front (CLI, Python package, C API, and through Python the vLLM plugin)
//! goes through it: options in, a Loader call, results out. Before it, each
//! front rebuilt this glue itself, and the Python package built a new CPU
//! thread pool, or loaded the GPU kernels and pinned a new staging ring, on
//! every call.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use weightstream_format::{Catalog, SourceKind};

use crate::access::{read_into, JobKernel};
use crate::control::{Control, Tracker};
use crate::cpu::CpuExecutor;
use crate::error::{Error, Result};
use crate::gpu::{GpuExecutor, StorageNote};
use crate::plan::{Job, Plan, PlanOptions};
use crate::staging::Staging;
use crate::tensor::LoadStats;

/// An opened checkpoint with the executors that serve it.
pub struct Loader {
    cat: Arc<Catalog>,
    staging: Staging,
    cpu: OnceLock<Arc<CpuExecutor>>,
    gpus: Mutex<HashMap<usize, Arc<GpuExecutor>>>,
}

impl Loader {
    /// Open the checkpoint at `path` (headers only), reading data with `source`.
    pub fn open(path: impl AsRef<Path>, source: SourceKind, staging: Staging) -> Result<Loader> {
        Ok(Loader::new(Arc::new(crate::open_with_source(path, source)?), staging))
    }

    /// Serve an already opened catalog.
    pub fn new(cat: Arc<Catalog>, staging: Staging) -> Loader {
        Loader { cat, staging, cpu: OnceLock::new(), gpus: Mutex::new(HashMap::new()) }
    }

    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.cat
    }

    pub fn staging(&self) -> Staging {
        self.staging
    }

    /// A plan over this checkpoint.
    pub fn plan(&self, opts: &PlanOptions) -> Result<Plan> {
        Plan::new(&self.cat, opts)
    }

    /// The CPU executor, made on first use (its thread pool then lives as
    /// long as the Loader).
    pub fn cpu(&self) -> Result<Arc<CpuExecutor>> {
        if let Some(c) = self.cpu.get() {
            return Ok(c.clone());
        }
        let made = Arc::new(CpuExecutor::new(&self.staging)?);
        // Two threads may race to make it: the first one stored wins.
        Ok(self.cpu.get_or_init(|| made).clone())
    }

    /// The executor of CUDA device `ordinal`, made on first use (kernels
    /// loaded and the pinned ring allocated once per device).
    pub fn gpu(&self, ordinal: usize) -> Result<Arc<GpuExecutor>> {
        let mut gpus = self.gpus.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(g) = gpus.get(&ordinal) {
            return Ok(g.clone());
        }
        let g = Arc::new(GpuExecutor::new(ordinal, &self.staging)?);
        gpus.insert(ordinal, g.clone());
        Ok(g)
    }

    /// Dequantize `plan`'s jobs on the CPU into caller-owned host buffers
    /// (`dsts[i]` exactly job `i`'s values); `on_done(i)` after each.
    pub fn load_host(
        &self,
        plan: &Plan,
        dsts: &mut [&mut [u16]],
        control: Control,
        on_done: impl FnMut(usize) -> Result<()>,
    ) -> Result<LoadStats> {
        self.cpu()?.load_into(&self.cat, plan, dsts, control, on_done)
    }

    /// Dequantize one job (a tensor or a slice of it) on the CPU into
    /// `dst` (exactly its values), progress and cancellation through `control`.
    pub fn fill_host(&self, job: &Job, dst: &mut [u16], control: Control) -> Result<()> {
        let tracker = Tracker::new(control, 1, job.src_bytes());
        tracker.check()?;
        self.cpu()?.fill(&self.cat, &JobKernel::new(&self.cat, job)?, dst, Some(&tracker))
    }

    /// Tensor `tensor`'s stored bytes, unchanged, into `dst` (exactly its
    /// `nbytes`): for callers that want an F32 or F16 tensor as stored.
    pub fn read_raw(&self, tensor: usize, dst: &mut [u8], control: Control) -> Result<()> {
        let t = &self.cat.tensors[tensor];
        if dst.len() as u64 != t.nbytes {
            return Err(Error::InvalidArgument(format!("tensor '{}' holds {} bytes, its destination {}", t.name, t.nbytes, dst.len())));
        }
        let tracker = Tracker::new(control, 1, t.nbytes);
        tracker.check()?;
        read_into(&self.cat, t.file, t.offset, dst, &t.name)?;
        tracker.add_bytes(t.nbytes);
        Ok(())
    }

    /// Tensor `tensor`'s stored bytes, unchanged, to device memory of CUDA
    /// device `ordinal`.
    ///
    /// # Safety
    /// As [`GpuExecutor::copy_raw`]: `dst` is device memory of that device's
    /// primary context with room for the tensor's `nbytes`.
    pub unsafe fn copy_raw_to_device(&self, ordinal: usize, tensor: usize, dst: u64) -> Result<()> {
        let gpu = self.gpu(ordinal)?;
        // SAFETY: the caller's guarantees are copy_raw's.
        unsafe { gpu.copy_raw(&self.cat, tensor, dst) }
    }

    /// Dequantize `plan`'s jobs on CUDA device `ordinal` into caller-owned
    /// device buffers, ordered after work queued on `stream`; complete when
    /// this returns. Also returns the notes on how storage was read.
    ///
    /// # Safety
    /// As [`GpuExecutor::load_into`]: every `dsts[i]` is device memory of
    /// that device's primary context with room for job `i`, alive until this
    /// returns; `stream` is 0 or a live stream of that context.
    pub unsafe fn load_device(
        &self,
        ordinal: usize,
        plan: &Plan,
        dsts: &[u64],
        stream: u64,
        control: Control,
        on_done: impl FnMut(usize) -> Result<()>,
    ) -> Result<(LoadStats, Vec<StorageNote>)> {
        let gpu = self.gpu(ordinal)?;
        // SAFETY: the caller's guarantees are GpuExecutor::load_into's.
        let stats = unsafe { gpu.load_into(&self.cat, plan, dsts, stream, control, on_done)? };
        Ok((stats, gpu.notes()))
    }
}
