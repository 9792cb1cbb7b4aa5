//! Many threads on one tensor: split into pieces on block boundaries and
//! dequantize them with rayon (in the caller's pool, or the global one).

use rayon::prelude::*;

use crate::chunk::dequantize;
use crate::isa::Isa;
use crate::kernel::{DequantError, Kernel};

/// Output elements per piece: 128 KiB of BF16, which stays in L2 while
/// written and gives enough pieces to balance 2-64 threads.
pub const DEFAULT_PIECE: usize = 64 * 1024;

pub fn dequantize_par(
    kernel: &Kernel,
    first: u64,
    src: &[u8],
    dst: &mut [u16],
    isa: Isa,
    piece: usize,
) -> Result<(), DequantError> {
    kernel.check(first, dst.len() as u64, src.len() as u64)?;
    let g = kernel.granule() as usize;
    let piece = (piece / g).max(1) * g;
    dst.par_chunks_mut(piece).enumerate().try_for_each(|(k, d)| {
        let a = (k * piece) as u64;
        let s = kernel.src_bytes(a) as usize..kernel.src_bytes(a + d.len() as u64) as usize;
        dequantize(kernel, first + a, &src[s], d, isa)
    })
}
