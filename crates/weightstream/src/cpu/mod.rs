//! The CPU executor: a plan's jobs dequantized on this machine's cores.
//!
//! Jobs are cut into groups of about `slot_bytes` file bytes, and each
//! group reaches the kernels one of three ways, by source:
//!
//! - mmap: the mapped bytes, no copy;
//! - read (page cache): every dequantization thread `pread`s its own piece
//!   into a small per-thread buffer and dequantizes it while it is still in
//!   cache, so the copy out of the page cache costs little memory traffic;
//! - direct: `readers` threads read groups ahead into a ring of aligned
//!   buffers while the cores dequantize, so the drive has several reads in
//!   flight and storage and compute overlap.

mod dequant;
mod groups;

use std::cell::RefCell;
use std::sync::Mutex;
use std::time::Instant;

use weightstream_dequant::Isa;
use weightstream_format::io::AlignedBuf;
use weightstream_format::Catalog;

use crate::access::JobKernel;
use crate::alloc::zeroed;
use crate::control::{Control, Tracker};
use crate::error::{Error, Result};
use crate::plan::{Job, Plan};
use crate::staging::Staging;
use crate::tensor::{HostTensor, LoadStats, Phases};
use groups::{Group, GroupBytes};

/// A zeroed output buffer, or an error when the host cannot provide it (a
/// plain `vec!` would abort the process).
pub(crate) fn alloc_output(tensor: &str, n: u64) -> Result<Vec<u16>> {
    usize::try_from(n).ok().and_then(zeroed).ok_or_else(|| Error::HostMemory { tensor: tensor.to_string(), bytes: n.saturating_mul(2) })
}

/// Runs jobs on a thread pool of its own.
pub struct CpuExecutor {
    pool: rayon::ThreadPool,
    isa: Isa,
    readers: usize,
    slots: usize,
    slot_bytes: usize,
    /// Whether `slot_bytes` was asked for (`staging_bytes`): then sources'
    /// read sizes do not raise it.
    slot_bytes_set: bool,
    /// Read-ahead buffers, kept between loads (allocating and first-touching
    /// tens of MiB per call would cost more than small loads themselves).
    ring: Mutex<Vec<AlignedBuf>>,
}

impl CpuExecutor {
    /// An executor staging as `staging` says (its `None`s take the CPU
    /// defaults: every core, the best ISA, 4 readers, twice as many 4 MiB slots).
    pub fn new(staging: &Staging) -> Result<Self> {
        staging.check()?;
        let mut b = rayon::ThreadPoolBuilder::new().thread_name(|i| format!("ws-cpu-{i}"));
        if let Some(n) = staging.threads {
            b = b.num_threads(n.max(1));
        }
        let pool = b.build().map_err(|e| Error::Threads(e.to_string()))?;
        let (readers, slots, slot_bytes) = staging.cpu_ring();
        Ok(CpuExecutor {
            pool,
            isa: staging.isa.unwrap_or_else(Isa::detect),
            readers,
            slots,
            slot_bytes,
            slot_bytes_set: staging.slot_bytes.is_some(),
            ring: Mutex::new(Vec::new()),
        })
    }

    pub fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    pub fn isa(&self) -> Isa {
        self.isa
    }

    pub(crate) fn pool(&self) -> &rayon::ThreadPool {
        &self.pool
    }

    pub fn readers(&self) -> usize {
        self.readers
    }

    pub fn slots(&self) -> usize {
        self.slots
    }
    /// File bytes per read-ahead slot (and per dequantization group).
    pub fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    /// Dequantize the job into `dst` (exactly its `n_elems` values).
    pub(crate) fn fill(&self, cat: &Catalog, jk: &JobKernel, dst: &mut [u16], tracker: Option<&Tracker>) -> Result<()> {
        let job = jk.job();
        self.fill_part(cat, jk, job, dst, tracker)
    }

    /// Dequantize elements `[first, first + dst.len())` of a job of whole
    /// rows (`window` none) into `dst`: a part of its output, for writers
    /// that bound their buffer.
    pub(crate) fn fill_elems(&self, cat: &Catalog, jk: &JobKernel, first: u64, dst: &mut [u16], tracker: Option<&Tracker>) -> Result<()> {
        let job = jk.job();
        let n = dst.len() as u64;
        if job.window.is_some() || job.unpermute.is_some() || first < job.first || first + n > job.first + job.n_elems {
            return Err(Error::InvalidArgument(format!(
                "elements {first}..{} are not a part of tensor '{}''s output",
                first + n,
                job.name
            )));
        }
        let part = Job { first, n_elems: n, src: job.byte_range(first, n), ..job.clone() };
        self.fill_part(cat, jk, &part, dst, tracker)
    }

    /// `part` (the job of `jk`, or a contiguous piece of it) into `dst`.
    fn fill_part(&self, cat: &Catalog, jk: &JobKernel, part: &Job, dst: &mut [u16], tracker: Option<&Tracker>) -> Result<()> {
        fits(part, dst.len())?;
        self.each_batch(cat, &[part], tracker, |gs, bytes| self.dequantize_batch(cat, jk, part, gs, bytes, dst)).map(drop)
    }

    /// Produce one job's tensor.
    pub fn run_job(&self, cat: &Catalog, job: &Job, tracker: Option<&Tracker>) -> Result<HostTensor> {
        let jk = JobKernel::new(cat, job)?;
        let mut data = alloc_output(&job.name, job.n_elems)?;
        self.fill(cat, &jk, &mut data, tracker)?;
        Ok(HostTensor { name: job.name.clone(), shape: job.shape.clone(), data })
    }

    /// Every job of `plan` in order, batch by batch (groups of one job):
    /// `on(job index, kernel, groups, their bytes)`; then `finished(job
    /// index)` once its last group is done.
    fn run_plan(
        &self,
        cat: &Catalog,
        plan: &Plan,
        tracker: &Tracker,
        mut on: impl FnMut(usize, &JobKernel, &[Group], &[GroupBytes]) -> Result<()>,
        mut finished: impl FnMut(usize) -> Result<()>,
    ) -> Result<Phases> {
        let jobs: Vec<&Job> = plan.jobs.iter().collect();
        // The current job's kernel (scales decoded once per job).
        let mut current: Option<(usize, JobKernel)> = None;
        self.each_batch(cat, &jobs, Some(tracker), |gs, bytes| {
            let g = gs.last().expect("a batch holds a group");
            if current.as_ref().is_none_or(|(j, _)| *j != g.job) {
                current = Some((g.job, JobKernel::new(cat, &plan.jobs[g.job])?));
            }
            let (_, jk) = current.as_ref().expect("set above");
            on(g.job, jk, gs, bytes)?;
            if g.last_of_job {
                tracker.tensor_done();
                finished(g.job)?;
            }
            Ok(())
        })
    }

    /// Fill caller-owned buffers: `dsts[i]` receives job `i` (exactly
    /// `n_elems` BF16 values), in plan order; `on_done(i)` after each.
    pub fn load_into(
        &self,
        cat: &Catalog,
        plan: &Plan,
        dsts: &mut [&mut [u16]],
        control: Control,
        on_done: impl FnMut(usize) -> Result<()>,
    ) -> Result<LoadStats> {
        if dsts.len() != plan.jobs.len() {
            return Err(Error::InvalidArgument(format!("{} destinations for {} tensors", dsts.len(), plan.jobs.len())));
        }
        for (job, d) in plan.jobs.iter().zip(dsts.iter()) {
            fits(job, d.len())?;
        }
        let t0 = Instant::now();
        let tracker = Tracker::new(control, plan.jobs.len() as u64, plan.src_bytes());
        tracker.check()?;
        let phases = self.run_plan(
            cat,
            plan,
            &tracker,
            |j, jk, gs, bytes| self.dequantize_batch(cat, jk, &plan.jobs[j], gs, bytes, dsts[j]),
            on_done,
        )?;
        Ok(stats(plan, t0, phases))
    }

    /// Produce every job's tensor in plan order, handing each to `sink` as it
    /// completes (one tensor's output is held at a time).
    pub fn stream(
        &self,
        cat: &Catalog,
        plan: &Plan,
        control: Control,
        mut sink: impl FnMut(HostTensor) -> Result<()>,
    ) -> Result<LoadStats> {
        let t0 = Instant::now();
        let tracker = Tracker::new(control, plan.jobs.len() as u64, plan.src_bytes());
        tracker.check()?;
        // The tensor being produced: filled group by group, then handed over.
        let out: RefCell<Option<(usize, Vec<u16>)>> = RefCell::new(None);
        let fill_out = |j: usize, jk: &JobKernel, gs: &[Group], bytes: &[GroupBytes]| -> Result<()> {
            let mut out = out.borrow_mut();
            if out.as_ref().is_none_or(|(k, _)| *k != j) {
                *out = Some((j, alloc_output(&plan.jobs[j].name, plan.jobs[j].n_elems)?));
            }
            let (_, data) = out.as_mut().expect("set above");
            self.dequantize_batch(cat, jk, &plan.jobs[j], gs, bytes, data)
        };
        let finished = |j: usize| -> Result<()> {
            let (_, data) = out.borrow_mut().take().expect("a finished job has its output");
            let job = &plan.jobs[j];
            sink(HostTensor { name: job.name.clone(), shape: job.shape.clone(), data })
        };
        let phases = self.run_plan(cat, plan, &tracker, fill_out, finished)?;
        Ok(stats(plan, t0, phases))
    }
}

/// A destination of `len` values for `job`: exactly its values, or an error.
fn fits(job: &Job, len: usize) -> Result<()> {
    if len as u64 != job.n_elems {
        return Err(Error::InvalidArgument(format!("tensor '{}' needs {} values, its destination holds {len}", job.name, job.n_elems)));
    }
    Ok(())
}

fn stats(plan: &Plan, t0: Instant, phases: Phases) -> LoadStats {
    LoadStats {
        tensors: plan.jobs.len() as u64,
        src_bytes: plan.read_bytes(),
        out_bytes: plan.out_bytes(),
        seconds: t0.elapsed().as_secs_f64(),
        phases,
    }
}
