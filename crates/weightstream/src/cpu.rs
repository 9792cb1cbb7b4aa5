//! The CPU executor: a plan's jobs dequantized on this machine's cores.

use std::time::Instant;

use weightstream_dequant::{dequantize_par, Isa, DEFAULT_PIECE};
use weightstream_format::Catalog;

use crate::access::{bytes, JobKernel};
use crate::alloc::zeroed;
use crate::control::{Control, Tracker};
use crate::error::{Error, Result};
use crate::plan::{Job, Plan};
use crate::tensor::{HostTensor, LoadStats};

/// Elements dequantized between two cancellation checks: 8 MiB of BF16.
const GROUP_ELEMS: u64 = 4 << 20;

#[derive(Debug, Clone, Copy, Default)]
pub struct CpuOptions {
    /// Threads (default: every core).
    pub threads: Option<usize>,
    /// Kernel instruction set (default: the best this CPU has).
    pub isa: Option<Isa>,
}

/// A zeroed output buffer, or an error when the host cannot provide it (a
/// plain `vec!` would abort the process).
pub(crate) fn alloc_output(tensor: &str, n: u64) -> Result<Vec<u16>> {
    usize::try_from(n)
        .ok()
        .and_then(zeroed)
        .ok_or_else(|| Error::HostMemory { tensor: tensor.to_string(), bytes: n.saturating_mul(2) })
}

/// Runs jobs on a thread pool of its own.
pub struct CpuExecutor {
    pool: rayon::ThreadPool,
    isa: Isa,
}

impl CpuExecutor {
    pub fn new(opts: &CpuOptions) -> Result<Self> {
        let mut b = rayon::ThreadPoolBuilder::new().thread_name(|i| format!("ws-cpu-{i}"));
        if let Some(n) = opts.threads {
            b = b.num_threads(n.max(1));
        }
        let pool = b.build().map_err(|e| Error::Other(format!("cannot start CPU threads: {e}")))?;
        Ok(CpuExecutor { pool, isa: opts.isa.unwrap_or_else(Isa::detect) })
    }

    pub fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// Dequantize elements `[first, first + dst.len())` of `job` into `dst`.
    pub fn fill(&self, cat: &Catalog, jk: &JobKernel, first: u64, dst: &mut [u16], tracker: Option<&Tracker>) -> Result<()> {
        let job = jk.job();
        let kernel = jk.kernel()?;
        let end = first + dst.len() as u64;
        let mut done = 0usize;
        for chunk in job.chunks(GROUP_ELEMS).filter(|c| c.first < end && c.first + c.n > first) {
            if let Some(t) = tracker {
                t.check()?;
            }
            // Chunks are aligned from the job's start; clip to the requested range.
            let a = chunk.first.max(first);
            let b = (chunk.first + chunk.n).min(end);
            let src_range = job.byte_range(a, b - a);
            let src = bytes(cat, job.file, src_range.clone(), &job.name)?;
            let out = &mut dst[done..done + (b - a) as usize];
            self.pool
                .install(|| dequantize_par(&kernel, a, &src, out, self.isa, DEFAULT_PIECE))
                .map_err(|source| Error::Dequant { tensor: job.name.clone(), source })?;
            done += (b - a) as usize;
            if let Some(t) = tracker {
                t.add_bytes(src_range.end - src_range.start);
            }
        }
        Ok(())
    }

    /// Produce one job's tensor.
    pub fn run_job(&self, cat: &Catalog, job: &Job, tracker: Option<&Tracker>) -> Result<HostTensor> {
        let jk = JobKernel::new(cat, job)?;
        let mut data = alloc_output(&job.name, job.n_elems)?;
        self.fill(cat, &jk, job.first, &mut data, tracker)?;
        Ok(HostTensor { name: job.name.clone(), shape: job.shape.clone(), data })
    }

    /// Fill caller-owned buffers: `dsts[i]` receives job `i` (exactly
    /// `n_elems` BF16 values), in plan order; `on_done(i)` after each.
    pub fn load_into(
        &self,
        cat: &Catalog,
        plan: &Plan,
        dsts: &mut [&mut [u16]],
        control: Control,
        mut on_done: impl FnMut(usize) -> Result<()>,
    ) -> Result<LoadStats> {
        if dsts.len() != plan.jobs.len() {
            return Err(Error::Other(format!("{} destinations for {} tensors", dsts.len(), plan.jobs.len())));
        }
        for (job, d) in plan.jobs.iter().zip(dsts.iter()) {
            if d.len() as u64 != job.n_elems {
                return Err(Error::Other(format!("tensor '{}' needs {} values, its destination holds {}", job.name, job.n_elems, d.len())));
            }
        }
        let t0 = Instant::now();
        let tracker = Tracker::new(control, plan.jobs.len() as u64, plan.src_bytes());
        for (i, (job, dst)) in plan.jobs.iter().zip(dsts.iter_mut()).enumerate() {
            tracker.check()?;
            let jk = JobKernel::new(cat, job)?;
            self.fill(cat, &jk, job.first, dst, Some(&tracker))?;
            tracker.tensor_done();
            on_done(i)?;
        }
        Ok(LoadStats { tensors: plan.jobs.len() as u64, src_bytes: plan.src_bytes(), out_bytes: plan.out_bytes(), seconds: t0.elapsed().as_secs_f64() })
    }

    /// Produce every job's tensor in plan order, handing each to `sink` as it
    /// completes.
    pub fn stream(
        &self,
        cat: &Catalog,
        plan: &Plan,
        control: Control,
        mut sink: impl FnMut(HostTensor) -> Result<()>,
    ) -> Result<LoadStats> {
        let t0 = Instant::now();
        let tracker = Tracker::new(control, plan.jobs.len() as u64, plan.src_bytes());
        for job in &plan.jobs {
            tracker.check()?;
            let t = self.run_job(cat, job, Some(&tracker))?;
            tracker.tensor_done();
            sink(t)?;
        }
        Ok(LoadStats {
            tensors: plan.jobs.len() as u64,
            src_bytes: plan.src_bytes(),
            out_bytes: plan.out_bytes(),
            seconds: t0.elapsed().as_secs_f64(),
        })
    }
}
