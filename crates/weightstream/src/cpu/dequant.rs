//! The CPU executor's kernel calls for one batch of a job's groups: a large
//! group split across the pool's threads; a batch of small ones (the rows
//! of a column slice) side by side on the pool, each on one thread (split,
//! a row cost more to hand out than to dequantize); and a group that keeps
//! part of its blocks (a slice edge inside a block) cut into
//! `weightstream_cuda::trim`'s pieces, the edge blocks through a one-block
//! buffer.

use std::cell::RefCell;
use std::ops::Range;

use weightstream_cuda::trim::pieces;
use weightstream_dequant::{dequantize, dequantize_par, dequantize_par_fetch, FetchError, DEFAULT_PIECE};
use weightstream_format::Catalog;

use super::groups::{Group, GroupBytes};
use super::{alloc_output, CpuExecutor};
use crate::access::JobKernel;
use crate::error::{Error, Result};
use crate::plan::{file_path, Job};
use rayon::prelude::*;

thread_local! {
    /// A small group's bytes, fetched on the calling thread.
    static SMALL: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

impl CpuExecutor {
    /// Elements `[first, first + out.len())` of `jk`'s tensor from `src`.
    pub(crate) fn dequantize(&self, cat: &Catalog, jk: &JobKernel, first: u64, src: GroupBytes, out: &mut [u16]) -> Result<()> {
        if out.is_empty() {
            return Ok(());
        }
        let kernel = jk.kernel()?;
        let job = jk.job();
        let dequant_error = |source| jk.dequant_error(job.byte_range(first, 0).start, source);
        let read_error = |at: u64, source| Error::Read { file: file_path(cat, job.file), tensor: job.name.clone(), offset: at, source };
        // One piece's worth or less: the pool would run it on one thread anyway.
        let small = out.len() <= DEFAULT_PIECE;
        match src {
            GroupBytes::Mem(bytes) if small => dequantize(&kernel, job.out, first, bytes, out, self.isa()).map_err(dequant_error),
            GroupBytes::Mem(bytes) => self
                .pool()
                .install(|| dequantize_par(&kernel, job.out, first, bytes, out, self.isa(), DEFAULT_PIECE))
                .map_err(dequant_error),
            GroupBytes::Fetch { source, offset } if small => SMALL.with(|b| {
                let mut b = b.borrow_mut();
                let n = kernel.src_bytes(out.len() as u64) as usize;
                if b.len() < n {
                    b.resize(n, 0);
                }
                source.read_at(offset, &mut b[..n]).map_err(|e| read_error(offset, e))?;
                dequantize(&kernel, job.out, first, &b[..n], out, self.isa()).map_err(dequant_error)
            }),
            GroupBytes::Fetch { source, offset } => {
                let fetch = |r: Range<u64>, buf: &mut [u8]| source.read_at(offset + r.start, buf).map_err(|e| (offset + r.start, e));
                self.pool().install(|| dequantize_par_fetch(&kernel, job.out, first, out, self.isa(), DEFAULT_PIECE, &fetch)).map_err(|e| {
                    match e {
                        FetchError::Fetch((at, source)) => read_error(at, source),
                        FetchError::Dequant(d) => dequant_error(d),
                    }
                })
            }
        }
    }

    /// A batch of one job's groups into `out`, that job's whole output
    /// (`job` the part it produces): one group as [`Self::dequantize_kept`]
    /// does it, several (small ones) side by side on the pool, each into
    /// its own part of `out`.
    pub(crate) fn dequantize_batch(
        &self,
        cat: &Catalog,
        jk: &JobKernel,
        job: &Job,
        gs: &[Group],
        bytes: &[GroupBytes],
        out: &mut [u16],
    ) -> Result<()> {
        let span = |g: &Group| {
            let at = job.out_index(g.keep.start) as usize;
            at..at + (g.keep.end - g.keep.start) as usize
        };
        if let ([g], [b]) = (gs, bytes) {
            return self.dequantize_kept(cat, jk, g, *b, &mut out[span(g)]);
        }
        // The groups' outputs are disjoint, in order but for un-permuted
        // rows (`Job::unpermute`): cut `out` into them in output order.
        let mut order: Vec<usize> = (0..gs.len()).collect();
        order.sort_by_key(|&i| span(&gs[i]).start);
        let mut cut: Vec<Option<&mut [u16]>> = (0..gs.len()).map(|_| None).collect();
        let (mut rest, mut at) = (out, 0);
        for i in order {
            let s = span(&gs[i]);
            let (_, tail) = std::mem::take(&mut rest).split_at_mut(s.start - at);
            let (part, tail) = tail.split_at_mut(s.len());
            cut[i] = Some(part);
            (rest, at) = (tail, s.end);
        }
        let parts: Vec<&mut [u16]> = cut.into_iter().map(|p| p.expect("every group's span was cut")).collect();
        self.pool().install(|| {
            parts
                .into_par_iter()
                .zip(gs.par_iter().zip(bytes.par_iter()))
                .try_for_each(|(o, (g, b))| self.dequantize_kept(cat, jk, g, *b, o))
        })
    }

    /// Group `g`'s kept values into `out`: straight from the kernels, or,
    /// where a slice's edge falls inside a block, the edge blocks through a
    /// one-block buffer (`weightstream_cuda::trim`'s pieces, as on the GPU).
    pub(crate) fn dequantize_kept(&self, cat: &Catalog, jk: &JobKernel, g: &Group, src: GroupBytes, out: &mut [u16]) -> Result<()> {
        if g.keep == (g.first..g.first + g.n) {
            return self.dequantize(cat, jk, g.first, src, out);
        }
        let (block, size) = jk.job().encoding.block();
        let skip = g.keep.start - g.first;
        for p in pieces(g.n, skip..g.keep.end - g.first, block) {
            let bytes = (p.at / block * size) as usize..((p.at + p.n) / block * size) as usize;
            let part = match src {
                GroupBytes::Mem(b) => GroupBytes::Mem(&b[bytes]),
                GroupBytes::Fetch { source, offset } => GroupBytes::Fetch { source, offset: offset + bytes.start as u64 },
            };
            let at = (p.at + p.keep.start - skip) as usize;
            let kept = (p.keep.end - p.keep.start) as usize;
            if p.trimmed() {
                let mut one = alloc_output(&jk.job().name, p.n)?;
                self.dequantize(cat, jk, g.first + p.at, part, &mut one)?;
                out[at..at + kept].copy_from_slice(&one[p.keep.start as usize..p.keep.end as usize]);
            } else {
                self.dequantize(cat, jk, g.first + p.at, part, &mut out[at..at + kept])?;
            }
        }
        Ok(())
    }
}
