//! Cutting jobs into groups and handing each group's bytes to the kernels:
//! mapped, fetched piece by piece by the dequantizing threads, or read
//! ahead into a ring of aligned buffers.

use std::ops::Range;
use std::time::Instant;

use weightstream_dequant::DEFAULT_PIECE;
use weightstream_format::io::ordered::{self, RingShape};
use weightstream_format::io::{AlignedBuf, ByteSource};
use weightstream_format::Catalog;

use super::{stats, CpuExecutor};
use crate::control::{Control, Tracker};
use crate::error::{Error, Result};
use crate::plan::{file_path, Job, Plan};
use crate::tensor::{LoadStats, Phases};

/// Elements `[first, first + n)` of job `job` (an index into the request),
/// stored in bytes `src` of the job's file: inside one of the job's
/// segments (a column slice reads row by row).
pub(crate) struct Group {
    pub(super) job: usize,
    pub(crate) first: u64,
    pub(crate) n: u64,
    pub(super) src: Range<u64>,
    /// The elements output: all of `first..first + n` but at a slice's
    /// edge inside a block.
    pub(crate) keep: Range<u64>,
    /// The job is complete once this group is.
    pub(super) last_of_job: bool,
}

/// The groups covering each job, segment by segment; a job with no elements
/// gets one empty group so that its completion is still reported.
fn groups(jobs: &[&Job], slot_bytes: usize) -> Vec<Group> {
    let mut out = Vec::new();
    for (j, job) in jobs.iter().enumerate() {
        let (block, size) = job.encoding.block();
        let start = out.len();
        for c in job.chunks((slot_bytes as u64 / size).max(1) * block) {
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

/// At most this many unwanted bytes between two groups read as one span
/// (a column slice's other columns): per-row direct reads cost a request
/// and 4 KiB alignment each already.
const MAX_GAP: u64 = 16 << 10;

/// The most a source's read size raises a slot to: the ring holds twice
/// the readers' count of slots.
const MAX_READ_SIZE: usize = 64 << 20;

/// Consecutive groups handed over together: the small groups of one job
/// (the rows of a column slice, a few KiB each) up to a slot's bytes, so
/// that the pool dequantizes them side by side and, through the ring, one
/// read fetches their whole span (`span`: the batch's bytes from its first
/// group's start to its last's end fit a slot, its gaps at most
/// [`MAX_GAP`]); any other group alone. One row at a time, a half-width
/// column slice of a 4096 x 11008 Q4_0 matrix took 170.9 ms through direct
/// reads against 20.0 ms for a row slice of its size (docs/PERFORMANCE.md,
/// CPU 14).
fn batches(groups: &[Group], slot_bytes: usize, span: bool) -> Vec<Range<usize>> {
    let small = |g: &Group| g.n <= DEFAULT_PIECE as u64;
    let mut out: Vec<Range<usize>> = Vec::new();
    let mut bytes = 0;
    for (i, g) in groups.iter().enumerate() {
        let len = g.src.end - g.src.start;
        let fits = |b: &Range<usize>| {
            let (first, prev) = (&groups[b.start], &groups[b.end - 1]);
            let near = g.src.start >= prev.src.end && g.src.start - prev.src.end <= MAX_GAP;
            first.job == g.job
                && small(first)
                && small(g)
                && if span { near && g.src.end - first.src.start <= slot_bytes as u64 } else { bytes + len <= slot_bytes as u64 }
        };
        match out.last_mut() {
            Some(b) if fits(b) => {
                b.end = i + 1;
                bytes += len;
            }
            _ => {
                out.push(i..i + 1);
                bytes = len;
            }
        }
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

impl CpuExecutor {
    /// Hand every group's bytes to `on`, in order, one at a time.
    pub(super) fn each_group(
        &self,
        cat: &Catalog,
        jobs: &[&Job],
        tracker: Option<&Tracker>,
        mut on: impl FnMut(&Group, GroupBytes) -> Result<()>,
    ) -> Result<Phases> {
        self.each_batch(cat, jobs, tracker, |gs, bs| gs.iter().zip(bs).try_for_each(|(g, &b)| on(g, b)))
    }

    /// Hand every group's bytes to `on`, in order, in batches (see
    /// [`batches`]; groups of one job only): zero-copy where the source
    /// maps the file, fetched by the dequantizing threads where reading is
    /// cheap (page cache), through the read-ahead ring otherwise (a batch's
    /// span one read into one slot). Returns where the time went (the
    /// ring's and the readers' share where the ring ran).
    pub(super) fn each_batch(
        &self,
        cat: &Catalog,
        jobs: &[&Job],
        tracker: Option<&Tracker>,
        mut on: impl FnMut(&[Group], &[GroupBytes]) -> Result<()>,
    ) -> Result<Phases> {
        let t0 = Instant::now();
        let slot_bytes = self.slot_bytes_for(cat, jobs);
        let groups = groups(jobs, slot_bytes);
        let source = |g: &Group| &cat.files[jobs[g.job].file].source;
        let check = || tracker.map_or(Ok(()), |t| t.check());
        let done = |gs: &[Group]| {
            if let Some(t) = tracker {
                t.add_bytes(gs.iter().map(|g| g.src.end - g.src.start).sum());
            }
        };
        let mapped = groups.iter().all(|g| source(g).slice(g.src.clone()).is_some());
        if mapped || groups.iter().all(|g| !source(g).read_ahead()) {
            let batches = batches(&groups, slot_bytes, false);
            for (i, b) in batches.iter().enumerate() {
                check()?;
                let gs = &groups[b.clone()];
                if let Some(next) = batches.get(i + 1).filter(|_| mapped) {
                    let (first, last) = (&groups[next.start], &groups[next.end - 1]);
                    source(first).will_need(first.src.start..last.src.end);
                }
                let bytes: Vec<GroupBytes> = gs
                    .iter()
                    .map(|g| match source(g).slice(g.src.clone()) {
                        Some(m) => GroupBytes::Mem(m),
                        None => GroupBytes::Fetch { source: &**source(g), offset: g.src.start },
                    })
                    .collect();
                on(gs, &bytes)?;
                done(gs);
            }
            return Ok(Phases { pipeline: t0.elapsed().as_secs_f64(), ..Phases::default() });
        }

        // Each batch's span in one read into one slot.
        let batches = batches(&groups, slot_bytes, true);
        let span = |b: &Range<usize>| groups[b.start].src.start..groups[b.end - 1].src.end;
        let shape = RingShape { slots: self.slots.min(batches.len()), workers: self.readers };
        let slot_len = batches
            .iter()
            .map(|b| {
                let r = span(b);
                source(&groups[b.start]).staged_len(r.start, (r.end - r.start) as usize)
            })
            .max()
            .unwrap_or(0);
        let slots = self.take_ring(shape.slots, slot_len)?;
        let ring = t0.elapsed();
        let fill = |i: usize, s: usize| -> Result<Filled> {
            let (g, r) = (&groups[batches[i].start], span(&batches[i]));
            let src = source(g);
            if src.slice(r.clone()).is_some() {
                return Ok(Filled::Mapped);
            }
            // SAFETY: the ring gives slot s to this fill alone until the
            // consumer is done with it (ordered::run's guarantee).
            let buf = unsafe { slots[s].slot_mut() };
            src.read_staged(r.start, (r.end - r.start) as usize, buf).map(Filled::Staged).map_err(|e| Error::Read {
                file: file_path(cat, jobs[g.job].file),
                tensor: jobs[g.job].name.clone(),
                offset: r.start,
                source: e,
            })
        };
        let result = ordered::run(batches.len(), shape, &fill, |i, s, filled| {
            check()?;
            let (gs, r) = (&groups[batches[i].clone()], span(&batches[i]));
            let whole = match filled {
                Filled::Mapped => source(&gs[0]).slice(r.clone()).expect("mapped when filled"),
                Filled::Staged(at) => &slots[s].as_slice()[at],
            };
            let bytes: Vec<GroupBytes> =
                gs.iter().map(|g| GroupBytes::Mem(&whole[(g.src.start - r.start) as usize..(g.src.end - r.start) as usize])).collect();
            on(gs, &bytes)?;
            done(gs);
            Ok(())
        });
        self.give_ring(slots);
        let times = result?;
        Ok(Phases { ring: ring.as_secs_f64(), pipeline: (t0.elapsed() - ring).as_secs_f64(), ..Phases::from_ring(&times) })
    }

    /// File bytes per group and per read-ahead read for these jobs: the
    /// slot size, raised to the largest read size the jobs' read-ahead
    /// sources ask for (object storage: two full ranged GETs per read)
    /// unless a slot size was set.
    fn slot_bytes_for(&self, cat: &Catalog, jobs: &[&Job]) -> usize {
        if self.slot_bytes_set {
            return self.slot_bytes;
        }
        let wanted = jobs.iter().filter_map(|j| {
            let s = &cat.files[j.file].source;
            s.read_ahead().then(|| s.read_size()).flatten()
        });
        wanted.fold(self.slot_bytes, usize::max).min(MAX_READ_SIZE)
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

    /// Read every job's bytes exactly as a load does (mapping, page-cache
    /// pieces on the worker threads, or the read-ahead ring), without
    /// dequantizing: the storage path alone, for benchmarks. Mapped bytes are
    /// touched once per page, so the mapping really reads them.
    pub fn read_only(&self, cat: &Catalog, plan: &Plan, control: Control) -> Result<LoadStats> {
        let t0 = Instant::now();
        let tracker = Tracker::new(control, plan.jobs.len() as u64, plan.src_bytes());
        tracker.check()?;
        let jobs: Vec<&Job> = plan.jobs.iter().collect();
        let phases = self.each_group(cat, &jobs, Some(&tracker), |g, src| {
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
        Ok(stats(plan, t0, phases))
    }
}
