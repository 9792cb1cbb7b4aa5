//! Chunks that keep part of what they dequantize: a slice whose column
//! edge falls inside a block reads the covering blocks, and the blocks at
//! its edges are dequantized into a small scratch buffer and only their
//! kept elements copied out; the whole blocks between go straight to the
//! destination. Pure arithmetic, shared by the CPU executor, the device
//! pipeline and the host-side test of the device path's steps.

use std::ops::Range;

use weightstream_kernels::Launch;

use crate::error::{CudaError, Result};

/// The most elements a block has (GGUF super-blocks): a trimmed piece is one
/// block, so the device scratch holds this many BF16 values.
pub const MAX_TRIM_BLOCK: u64 = 256;

/// A run of whole blocks of a chunk dequantized at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    /// Elements from the chunk's first where it starts (a block edge).
    pub at: u64,
    /// Elements dequantized (whole blocks).
    pub n: u64,
    /// Which of them are output, relative to the piece: `0..n`, or part of
    /// a single block at a slice's edge.
    pub keep: Range<u64>,
}

impl Piece {
    pub fn trimmed(&self) -> bool {
        self.keep != (0..self.n)
    }
}

/// The pieces of a chunk of `n` elements (whole `block`-element blocks) of
/// which `keep` (relative to the chunk, contiguous) is output: the block
/// holding a kept edge that is not a block edge is a piece of its own,
/// trimmed; the whole blocks between are one piece.
pub fn pieces(n: u64, keep: Range<u64>, block: u64) -> Vec<Piece> {
    let block = block.max(1);
    if keep.start >= keep.end {
        return vec![];
    }
    let lo = keep.start.div_ceil(block) * block;
    let hi = keep.end / block * block;
    if lo > hi {
        // Both edges inside one block.
        let at = keep.start / block * block;
        return vec![Piece { at, n: block, keep: keep.start - at..keep.end - at }];
    }
    let mut out = vec![];
    if keep.start < lo {
        out.push(Piece { at: lo - block, n: block, keep: keep.start - (lo - block)..block });
    }
    if lo < hi {
        out.push(Piece { at: lo, n: hi - lo, keep: 0..hi - lo });
    }
    if hi < keep.end {
        out.push(Piece { at: hi, n: block, keep: 0..keep.end - hi });
    }
    debug_assert!(out.last().is_none_or(|p| p.at + p.n <= n), "pieces inside the chunk");
    out
}

/// What a chunk's output needs when only part of it is kept: `keep`
/// (relative to the chunk) of its `n` elements, `block` elements in
/// `block_bytes` bytes. The chunk's `dst` is where `keep.start` goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trim {
    pub keep: Range<u64>,
    pub block: u64,
    pub block_bytes: u64,
}

/// Where a step's kernel writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Out {
    /// The destination, this many elements past the chunk's `dst`.
    Dst(u64),
    /// The scratch buffer's start.
    Scratch,
}

/// One device operation of a trimmed chunk, in stream order.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// `launch` over `n` elements from the chunk's bytes `src_off` on.
    Kernel { launch: Launch, src_off: u64, n: u64, out: Out },
    /// Copy scratch elements `from` to the destination, `dst_off` elements
    /// past the chunk's `dst`.
    Copy { from: Range<u64>, dst_off: u64 },
}

/// The steps that produce a trimmed chunk: the chunk's launch (`first`
/// moved to each piece's start for the scaled kernels, which look scales up
/// by element index) once per piece.
pub fn steps(launch: &Launch, n: u64, trim: &Trim) -> Result<Vec<Step>> {
    if trim.block > MAX_TRIM_BLOCK || trim.keep.end > n || trim.block == 0 || n % trim.block != 0 {
        return Err(CudaError::Invalid(format!("a chunk of {n} elements cannot keep {:?} of {}-element blocks", trim.keep, trim.block)));
    }
    let mut out = vec![];
    for p in pieces(n, trim.keep.clone(), trim.block) {
        let launch = match *launch {
            Launch::Scaled(mut a) => {
                a.first += p.at;
                Launch::Scaled(a)
            }
            l => l,
        };
        let src_off = p.at / trim.block * trim.block_bytes;
        let dst_off = p.at + p.keep.start - trim.keep.start;
        if p.trimmed() {
            out.push(Step::Kernel { launch, src_off, n: p.n, out: Out::Scratch });
            out.push(Step::Copy { from: p.keep.clone(), dst_off });
        } else {
            out.push(Step::Kernel { launch, src_off, n: p.n, out: Out::Dst(dst_off) });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kept element comes from exactly one piece, in order, and every
    /// piece is whole blocks inside the chunk; only edge blocks are trimmed.
    #[test]
    fn pieces_cover_the_kept_elements_once() {
        for block in [1u64, 2, 8, 32, 256] {
            for blocks in 1..5u64 {
                let n = blocks * block;
                for a in 0..=n {
                    for b in a..=n {
                        let ps = pieces(n, a..b, block);
                        let mut next = a;
                        for p in &ps {
                            assert!(p.at % block == 0 && p.n % block == 0 && p.n > 0 && p.at + p.n <= n, "{block} {a}..{b}: {p:?}");
                            assert_eq!(p.at + p.keep.start, next, "{block} {a}..{b}: {ps:?}");
                            assert!(!p.trimmed() || p.n == block, "{ps:?}");
                            next = p.at + p.keep.end;
                        }
                        assert_eq!(next, b.max(a), "{block} {a}..{b}: {ps:?}");
                        assert!(ps.len() <= 3);
                    }
                }
            }
        }
    }
}
