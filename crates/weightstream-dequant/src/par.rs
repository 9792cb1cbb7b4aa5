//! Many threads on one tensor: split into pieces on block boundaries and
//! dequantize them with rayon (in the caller's pool, or the global one).

use std::cell::RefCell;
use std::ops::Range;

use rayon::prelude::*;

use crate::chunk::dequantize;
use crate::isa::Isa;
use crate::kernel::{DequantError, Kernel};
use weightstream_blocks::OutDtype;

/// Output elements per piece: 128 KiB of BF16, which stays in L2 while
/// written and gives enough pieces to balance 2-64 threads.
pub const DEFAULT_PIECE: usize = 64 * 1024;

pub fn dequantize_par(
    kernel: &Kernel,
    out: OutDtype,
    first: u64,
    src: &[u8],
    dst: &mut [u16],
    isa: Isa,
    piece: usize,
) -> Result<(), DequantError> {
    kernel.check(first, dst.len() as u64, src.len() as u64)?;
    let piece = piece_elems(kernel, piece);
    dst.par_chunks_mut(piece).enumerate().try_for_each(|(k, d)| {
        let s = piece_bytes(kernel, k, piece, d.len());
        dequantize(kernel, out, first + (k * piece) as u64, &src[s.start as usize..s.end as usize], d, isa)
    })
}

fn piece_elems(kernel: &Kernel, piece: usize) -> usize {
    let g = kernel.granule() as usize;
    (piece / g).max(1) * g
}

/// Source bytes of piece `k` (of `len` elements), relative to the chunk.
fn piece_bytes(kernel: &Kernel, k: usize, piece: usize, len: usize) -> Range<u64> {
    let a = (k * piece) as u64;
    kernel.src_bytes(a)..kernel.src_bytes(a + len as u64)
}

/// Why [`dequantize_par_fetch`] failed.
#[derive(Debug)]
pub enum FetchError<E> {
    Fetch(E),
    Dequant(DequantError),
}

thread_local! {
    /// Each worker's piece buffer: a piece's bytes land here and are
    /// dequantized while still in this core's cache.
    static PIECE_BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// [`dequantize_par`] for bytes that must be copied out of somewhere (a
/// `pread` from the page cache): each piece first `fetch`es its own source
/// bytes (`range` relative to the chunk's first byte) into a per-thread
/// buffer, then dequantizes them. The copy stays in the core's cache, so
/// memory traffic is what a zero-copy mapping would cost: the source read
/// once, the output written once.
pub fn dequantize_par_fetch<E: Send>(
    kernel: &Kernel,
    out: OutDtype,
    first: u64,
    dst: &mut [u16],
    isa: Isa,
    piece: usize,
    fetch: &(dyn Fn(Range<u64>, &mut [u8]) -> Result<(), E> + Sync),
) -> Result<(), FetchError<E>> {
    kernel.check(first, dst.len() as u64, kernel.src_bytes(dst.len() as u64)).map_err(FetchError::Dequant)?;
    let piece = piece_elems(kernel, piece);
    dst.par_chunks_mut(piece).enumerate().try_for_each(|(k, d)| {
        let s = piece_bytes(kernel, k, piece, d.len());
        PIECE_BUF.with(|b| {
            let mut b = b.borrow_mut();
            let n = (s.end - s.start) as usize;
            if b.len() < n {
                b.resize(n, 0);
            }
            fetch(s, &mut b[..n]).map_err(FetchError::Fetch)?;
            dequantize(kernel, out, first + (k * piece) as u64, &b[..n], d, isa).map_err(FetchError::Dequant)
        })
    })
}
