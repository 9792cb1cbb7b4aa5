//! The CPU executor: a plan's jobs dequantized on this machine's cores.
//!
//! Jobs are cut into groups of about `chunk_bytes` file bytes, and each
//! group reaches the kernels one of three ways, by source:
//!
//! - mmap: the mapped bytes, no copy;
//! - read (page cache): every dequantization thread `pread`s its own piece
//!   into a small per-thread buffer and dequantizes it while it is still in
//!   cache, so the copy out of the page cache costs little memory traffic;
//! - direct: `readers` threads read groups ahead into a ring of aligned
//!   buffers while the cores dequantize, so the drive has several reads in
//!   flight and storage and compute overlap.

use std::cell::RefCell;
use std::ops::Range;
use std::sync::Mutex;
use std::time::Instant;

use weightstream_dequant::{Isa, DEFAULT_PIECE};
use weightstream_format::io::ordered::{self, RingShape};
use weightstream_format::io::{AlignedBuf, ByteSource};
use weightstream_format::Catalog;

use crate::access::JobKernel;
use crate::alloc::zeroed;
use crate::control::{Control, Tracker};
use crate::error::{Error, Result};
use crate::plan::{file_path, Job, Plan};
use crate::tensor::{HostTensor, LoadStats};

/// Default file bytes per group: large enough for full-speed direct reads,
/// small enough that cancelling is prompt and the ring stays small.
pub const DEFAULT_CHUNK_BYTES: usize = 4 << 20;
/// Default reader threads (sources without a zero-copy view).
pub const DEFAULT_READERS: usize = 4;
/// Caps on the options: beyond these a machine runs out of threads or
/// memory slowly rather than going faster.
pub const MAX_THREADS: usize = 1024;
pub const MAX_READERS: usize = 256;
pub const MAX_SLOTS: usize = 4096;

#[derive(Debug, Clone, Copy, Default)]
pub struct CpuOptions {
    /// Threads dequantizing (default: every core).
    pub threads: Option<usize>,
    /// Kernel instruction set (default: the best this CPU has).
    pub isa: Option<Isa>,
    /// Threads reading ahead, for sources that copy (read, direct); default
    /// [`DEFAULT_READERS`].
    pub readers: Option<usize>,
    /// Read-ahead buffers (groups read ahead of the dequantization); default
    /// twice the readers.
    pub slots: Option<usize>,
    /// File bytes per read and per dequantization group; default
    /// [`DEFAULT_CHUNK_BYTES`].
    pub chunk_bytes: Option<usize>,
}

/// A zeroed output buffer, or an error when the host cannot provide it (a
/// plain `vec!` would abort the process).
pub(crate) fn alloc_output(tensor: &str, n: u64) -> Result<Vec<u16>> {
    usize::try_from(n).ok().and_then(zeroed).ok_or_else(|| Error::HostMemory { tensor: tensor.to_string(), bytes: n.saturating_mul(2) })
}

/// Elements `[first, first + n)` of job `job` (an index into the request),
/// stored in bytes `src` of the job's file: inside one of the job's
/// segments (a column slice reads row by row).
pub(crate) struct Group {
    job: usize,
    pub(crate) first: u64,
    pub(crate) n: u64,
    src: Range<u64>,
    /// The elements output: all of `first..first + n` but at a slice's
    /// edge inside a block.
    pub(crate) keep: Range<u64>,
    /// The job is complete once this group is.
    last_of_job: bool,
}

/// The groups covering each job, segment by segment; a job with no elements
/// gets one empty group so that its completion is still reported.
fn groups(jobs: &[&Job], chunk_bytes: usize) -> Vec<Group> {
    let mut out = Vec::new();
    for (j, job) in jobs.iter().enumerate() {
        let (block, size) = job.encoding.block();
        let start = out.len();
        for c in job.chunks((chunk_bytes as u64 / size).max(1) * block) {
            out.push(Group { job: j, first: c.first, n: c.n, src: c.src, keep: c.keep, last_of_job: false });
        }
        if out.len() == start {
            let at = job.src.start;
            out.push(Group { job: j, first: job.first, n: 0, src: at..at, keep: job.first..job.first, last_of_job: false });
        }
        out.last_mut().expect("one group at least").last_of_job = true;
    }
    out
}

/// A group's source bytes, as the kernels get them.
#[derive(Clone, Copy)]
pub(crate) enum GroupBytes<'a> {
    /// In memory (mapped, or read ahead into the ring).
    Mem(&'a [u8]),
    /// To be read piece by piece by the dequantizing threads: the group's
    /// bytes start at `offset` of `source`.
    Fetch { source: &'a dyn ByteSource, offset: u64 },
}

/// How a group's bytes were made available by the ring.
enum Filled {
    /// The source maps the file: use its slice.
    Mapped,
    /// Read into the ring slot, at this range.
    Staged(Range<usize>),
}

/// Runs jobs on a thread pool of its own.
pub struct CpuExecutor {
    pool: rayon::ThreadPool,
    isa: Isa,
    readers: usize,
    slots: usize,
    chunk_bytes: usize,
    /// Read-ahead buffers, kept between loads (allocating and first-touching
    /// tens of MiB per call would cost more than small loads themselves).
    ring: Mutex<Vec<AlignedBuf>>,
}

impl CpuExecutor {
    pub fn new(opts: &CpuOptions) -> Result<Self> {
        // Thousands of threads only fail slowly (each needs a stack): refuse
        // at once and say why.
        for (what, v, max) in
            [("threads", opts.threads, MAX_THREADS), ("readers", opts.readers, MAX_READERS), ("read-ahead slots", opts.slots, MAX_SLOTS)]
        {
            if v.is_some_and(|v| v > max) {
                return Err(Error::InvalidArgument(format!("{what}: {} is above the limit of {max}", v.unwrap_or(0))));
            }
        }
        let mut b = rayon::ThreadPoolBuilder::new().thread_name(|i| format!("ws-cpu-{i}"));
        if let Some(n) = opts.threads {
            b = b.num_threads(n.max(1));
        }
        let pool = b.build().map_err(|e| Error::Threads(e.to_string()))?;
        let readers = opts.readers.unwrap_or(DEFAULT_READERS).max(1);
        Ok(CpuExecutor {
            pool,
            isa: opts.isa.unwrap_or_else(Isa::detect),
            readers,
            slots: opts.slots.unwrap_or(2 * readers).max(1),
            chunk_bytes: opts.chunk_bytes.unwrap_or(DEFAULT_CHUNK_BYTES).max(1),
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

    pub fn chunk_bytes(&self) -> usize {
        self.chunk_bytes
    }

    /// Hand every group's bytes to `on`, in order: zero-copy where the
    /// source maps the file, through the read-ahead ring otherwise.
    fn each_group(
        &self,
        cat: &Catalog,
        jobs: &[&Job],
        tracker: Option<&Tracker>,
        mut on: impl FnMut(&Group, GroupBytes) -> Result<()>,
    ) -> Result<()> {
        let groups = groups(jobs, self.chunk_bytes);
        let source = |g: &Group| &cat.files[jobs[g.job].file].source;
        let check = || tracker.map_or(Ok(()), |t| t.check());
        let done = |g: &Group| {
            if let Some(t) = tracker {
                t.add_bytes(g.src.end - g.src.start);
            }
        };
        if groups.iter().all(|g| source(g).slice(g.src.clone()).is_some()) {
            for (i, g) in groups.iter().enumerate() {
                check()?;
                if let Some(next) = groups.get(i + 1) {
                    source(next).will_need(next.src.clone());
                }
                on(g, GroupBytes::Mem(source(g).slice(g.src.clone()).expect("checked above")))?;
                done(g);
            }
            return Ok(());
        }
        if groups.iter().all(|g| !source(g).read_ahead()) {
            for g in &groups {
                check()?;
                on(g, GroupBytes::Fetch { source: &**source(g), offset: g.src.start })?;
                done(g);
            }
            return Ok(());
        }

        let shape = RingShape { slots: self.slots.min(groups.len()), workers: self.readers };
        let slot_len = groups.iter().map(|g| source(g).staged_len(g.src.start, (g.src.end - g.src.start) as usize)).max().unwrap_or(0);
        let slots = self.take_ring(shape.slots, slot_len)?;
        let fill = |i: usize, s: usize| -> Result<Filled> {
            let g = &groups[i];
            let src = source(g);
            if src.slice(g.src.clone()).is_some() {
                return Ok(Filled::Mapped);
            }
            // SAFETY: the ring gives slot s to this fill alone until the
            // consumer is done with it (ordered::run's guarantee).
            let buf = unsafe { slots[s].slot_mut() };
            src.read_staged(g.src.start, (g.src.end - g.src.start) as usize, buf).map(Filled::Staged).map_err(|e| Error::Read {
                file: file_path(cat, jobs[g.job].file),
                tensor: jobs[g.job].name.clone(),
                offset: g.src.start,
                source: e,
            })
        };
        let result = ordered::run(groups.len(), shape, &fill, |i, s, filled| {
            check()?;
            let g = &groups[i];
            let bytes = match filled {
                Filled::Mapped => source(g).slice(g.src.clone()).expect("mapped when filled"),
                Filled::Staged(r) => &slots[s].as_slice()[r],
            };
            on(g, GroupBytes::Mem(bytes))?;
            done(g);
            Ok(())
        });
        self.give_ring(slots);
        result
    }

    /// `count` ring buffers of at least `len` bytes: the kept ones when they
    /// fit, new ones otherwise.
    fn take_ring(&self, count: usize, len: usize) -> Result<Vec<AlignedBuf>> {
        let mut kept = std::mem::take(&mut *self.ring.lock().unwrap_or_else(|p| p.into_inner()));
        kept.retain(|b| b.len() >= len);
        kept.truncate(count);
        while kept.len() < count {
            kept.push(AlignedBuf::new(len).ok_or_else(|| Error::HostMemory { tensor: "(read-ahead buffers)".into(), bytes: len as u64 })?);
        }
        Ok(kept)
    }

    fn give_ring(&self, bufs: Vec<AlignedBuf>) {
        let mut kept = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        if bufs.len() > kept.len() {
            *kept = bufs;
        }
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
        if job.window.is_some() || first < job.first || first + n > job.first + job.n_elems {
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
        if dst.len() as u64 != part.n_elems {
            return Err(Error::InvalidArgument(format!(
                "tensor '{}' needs {} values, its destination holds {}",
                part.name,
                part.n_elems,
                dst.len()
            )));
        }
        self.each_group(cat, &[part], tracker, |g, src| {
            let at = part.out_index(g.keep.start) as usize;
            self.dequantize_kept(cat, jk, g, src, &mut dst[at..at + (g.keep.end - g.keep.start) as usize])
        })
    }

    /// Produce one job's tensor.
    pub fn run_job(&self, cat: &Catalog, job: &Job, tracker: Option<&Tracker>) -> Result<HostTensor> {
        let jk = JobKernel::new(cat, job)?;
        let mut data = alloc_output(&job.name, job.n_elems)?;
        self.fill(cat, &jk, &mut data, tracker)?;
        Ok(HostTensor { name: job.name.clone(), shape: job.shape.clone(), data })
    }

    /// Every job of `plan` in order, group by group: `on(job index, kernel,
    /// group, bytes)`; then `finished(job index)` once its last group is done.
    fn run_plan(
        &self,
        cat: &Catalog,
        plan: &Plan,
        tracker: &Tracker,
        mut on: impl FnMut(usize, &JobKernel, &Group, GroupBytes) -> Result<()>,
        mut finished: impl FnMut(usize) -> Result<()>,
    ) -> Result<()> {
        let jobs: Vec<&Job> = plan.jobs.iter().collect();
        // The current job's kernel (scales decoded once per job).
        let mut current: Option<(usize, JobKernel)> = None;
        self.each_group(cat, &jobs, Some(tracker), |g, src| {
            if current.as_ref().is_none_or(|(j, _)| *j != g.job) {
                current = Some((g.job, JobKernel::new(cat, &plan.jobs[g.job])?));
            }
            let (_, jk) = current.as_ref().expect("set above");
            on(g.job, jk, g, src)?;
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
            if d.len() as u64 != job.n_elems {
                return Err(Error::InvalidArgument(format!(
                    "tensor '{}' needs {} values, its destination holds {}",
                    job.name,
                    job.n_elems,
                    d.len()
                )));
            }
        }
        let t0 = Instant::now();
        let tracker = Tracker::new(control, plan.jobs.len() as u64, plan.src_bytes());
        tracker.check()?;
        self.run_plan(
            cat,
            plan,
            &tracker,
            |j, jk, g, src| {
                let at = plan.jobs[j].out_index(g.keep.start) as usize;
                self.dequantize_kept(cat, jk, g, src, &mut dsts[j][at..at + (g.keep.end - g.keep.start) as usize])
            },
            on_done,
        )?;
        Ok(stats(plan, t0))
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
        let fill_out = |j: usize, jk: &JobKernel, g: &Group, src: GroupBytes| -> Result<()> {
            let mut out = out.borrow_mut();
            if out.as_ref().is_none_or(|(k, _)| *k != j) {
                *out = Some((j, alloc_output(&plan.jobs[j].name, plan.jobs[j].n_elems)?));
            }
            let (_, data) = out.as_mut().expect("set above");
            let at = plan.jobs[j].out_index(g.keep.start) as usize;
            self.dequantize_kept(cat, jk, g, src, &mut data[at..at + (g.keep.end - g.keep.start) as usize])
        };
        let finished = |j: usize| -> Result<()> {
            let (_, data) = out.borrow_mut().take().expect("a finished job has its output");
            let job = &plan.jobs[j];
            sink(HostTensor { name: job.name.clone(), shape: job.shape.clone(), data })
        };
        self.run_plan(cat, plan, &tracker, fill_out, finished)?;
        Ok(stats(plan, t0))
    }
}

impl CpuExecutor {
    /// Read every job's bytes exactly as a load does (mapping, page-cache
    /// pieces on the worker threads, or the read-ahead ring), without
    /// dequantizing: the storage path alone, for benchmarks. Mapped bytes are
    /// touched once per page, so the mapping really reads them.
    pub fn read_only(&self, cat: &Catalog, plan: &Plan, control: Control) -> Result<LoadStats> {
        let t0 = Instant::now();
        let tracker = Tracker::new(control, plan.jobs.len() as u64, plan.src_bytes());
        tracker.check()?;
        let jobs: Vec<&Job> = plan.jobs.iter().collect();
        self.each_group(cat, &jobs, Some(&tracker), |g, src| {
            let job = jobs[g.job];
            match src {
                GroupBytes::Mem(bytes) => {
                    std::hint::black_box(bytes.iter().step_by(4096).fold(0u8, |a, &b| a ^ b));
                }
                GroupBytes::Fetch { source, offset } => {
                    // The pieces a load would fetch: 64 Ki elements' worth each.
                    let (block, size) = job.encoding.block();
                    let piece = ((DEFAULT_PIECE as u64 / block).max(1) * size) as usize;
                    let len = (g.src.end - g.src.start) as usize;
                    let pieces: Vec<usize> = (0..len).step_by(piece.max(1)).collect();
                    self.pool.install(|| {
                        use rayon::prelude::*;
                        pieces.par_iter().try_for_each(|&a| {
                            let mut buf = vec![0u8; piece.min(len - a)];
                            source.read_at(offset + a as u64, &mut buf).map_err(|e| Error::Read {
                                file: file_path(cat, job.file),
                                tensor: job.name.clone(),
                                offset: offset + a as u64,
                                source: e,
                            })
                        })
                    })?;
                }
            }
            if g.last_of_job {
                tracker.tensor_done();
            }
            Ok(())
        })?;
        Ok(stats(plan, t0))
    }
}

fn stats(plan: &Plan, t0: Instant) -> LoadStats {
    LoadStats {
        tensors: plan.jobs.len() as u64,
        src_bytes: plan.read_bytes(),
        out_bytes: plan.out_bytes(),
        seconds: t0.elapsed().as_secs_f64(),
    }
}
