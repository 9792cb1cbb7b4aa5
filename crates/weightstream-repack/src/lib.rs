//! weightstream-repack: GGUF blocks moved, bit for bit, into the quantized
//! layouts that inference runtimes' fast kernels take, so a model can stay
//! quantized in memory where the move is exact (no value is computed: the
//! integer codes are carried over, the block scale becomes the group scale).
//!
//! One table per layout says which block format maps onto it
//! ([`gptq::target`], its codes in `codes.rs`; [`fp4::target`]); one CPU
//! kernel per layout ([`gptq::repack`], [`fp4::repack`]).

mod codes;
pub mod fp4;
pub mod gptq;

pub use fp4::{Fp4Error, Fp4Target};
pub use gptq::{repack, target, GptqTarget, RepackError};

use std::ops::Range;

/// Whether input features `cols` of rows of `ncols` elements (whole
/// blocks of `elems`) are whole groups of `group` inside the row: the
/// slices both layouts' repacks take.
pub(crate) fn whole_groups(cols: &Range<usize>, ncols: usize, group: usize, elems: usize) -> bool {
    cols.start <= cols.end && cols.end <= ncols && cols.start % group == 0 && cols.end % group == 0 && ncols % elems == 0
}

/// The first of `sizes` (buffer, length it has, length the slice needs)
/// whose lengths differ.
pub(crate) fn wrong_size<const N: usize>(sizes: [(&'static str, usize, usize); N]) -> Option<(&'static str, usize, usize)> {
    sizes.into_iter().find(|&(_, got, want)| got != want)
}
