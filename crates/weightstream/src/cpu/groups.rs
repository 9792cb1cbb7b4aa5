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
use crate::tensor::LoadStats;

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
    /// Hand every group's bytes to `on`, in order: zero-copy where the
    /// source maps the file, through the read-ahead ring otherwise.
    pub(super) fn each_group(
        &self,
        cat: &Catalog,
        jobs: &[&Job],
        tracker: Option<&Tracker>,
        mut on: impl FnMut(&Group, GroupBytes) -> Result<()>,
    ) -> Result<()> {
        let groups = groups(jobs, self.slot_bytes);
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
