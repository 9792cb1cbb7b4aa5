//! What to dequantize: a kernel and its parameters, checked before any
//! element is touched, so that a bad chunk is an error and never a panic or
//! an out-of-bounds access.

use weightstream_blocks::{BlockFormat, Encoding, Fp8Format, ScaleLayout};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DequantError {
    #[error("source holds {actual} bytes, {expected} needed for {elems} elements")]
    SourceLength { expected: u64, actual: u64, elems: u64 },
    #[error("chunk [{first}, {end}) does not start and end on {granule}-element blocks")]
    Unaligned { first: u64, end: u64, granule: u64 },
    #[error("chunk [{first}, {end}) lies outside the {total}-element tensor")]
    OutOfRange { first: u64, end: u64, total: u64 },
    #[error("scale grid has {actual} values, its layout needs {expected}")]
    ScaleCount { expected: u64, actual: u64 },
    #[error("packed values need whole bytes or words per row and group, found {cols} columns in groups of {group}")]
    OddPacking { cols: u64, group: u64 },
    #[error("a [{grid_rows}, {grid_cols}] grid of {block_rows}x{block_cols} blocks does not cover a [{rows}, {cols}] matrix")]
    ScaleCover { grid_rows: u64, grid_cols: u64, block_rows: u64, block_cols: u64, rows: u64, cols: u64 },
}

/// FP8 scales as f32 values with the block geometry of `ScaleLayout`:
/// element (r, c) uses `values[(r / block_rows) * grid_cols + c / block_cols]`.
#[derive(Debug, Clone, Copy)]
pub struct ScaleGrid<'a> {
    values: &'a [f32],
    block_rows: u64,
    block_cols: u64,
    grid_cols: u64,
}

impl<'a> ScaleGrid<'a> {
    /// Check that `values` and `layout` cover a `[rows, cols]` matrix.
    pub fn new(values: &'a [f32], layout: &ScaleLayout, rows: u64, cols: u64) -> Result<Self, DequantError> {
        let expected = layout.grid_rows.saturating_mul(layout.grid_cols);
        if values.len() as u64 != expected {
            return Err(DequantError::ScaleCount { expected, actual: values.len() as u64 });
        }
        let covers = layout.block_rows > 0
            && layout.block_cols > 0
            && rows.div_ceil(layout.block_rows) <= layout.grid_rows
            && cols.div_ceil(layout.block_cols) <= layout.grid_cols;
        if !covers {
            return Err(DequantError::ScaleCover {
                grid_rows: layout.grid_rows,
                grid_cols: layout.grid_cols,
                block_rows: layout.block_rows,
                block_cols: layout.block_cols,
                rows,
                cols,
            });
        }
        Ok(ScaleGrid { values, block_rows: layout.block_rows, block_cols: layout.block_cols, grid_cols: layout.grid_cols })
    }

    #[inline]
    pub fn at(&self, row: u64, col: u64) -> f32 {
        self.values[((row / self.block_rows) * self.grid_cols + col / self.block_cols) as usize]
    }

    /// The scales of matrix row `row`: entry `c / block_cols` scales column `c`.
    #[inline]
    pub fn row(&self, row: u64) -> &'a [f32] {
        let start = ((row / self.block_rows) * self.grid_cols) as usize;
        &self.values[start..start + self.grid_cols as usize]
    }

    pub fn block_cols(&self) -> u64 {
        self.block_cols
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Value `k` (an index from `grid_runs`).
    #[inline]
    pub fn value(&self, k: usize) -> f32 {
        self.values[k]
    }

    /// The one scale of a 1x1 grid (per-tensor), if that is what this is.
    pub fn uniform(&self) -> Option<f32> {
        (self.values.len() == 1).then(|| self.values[0])
    }
}

/// A dequantization kernel with its parameters.
#[derive(Debug, Clone, Copy)]
pub enum Kernel<'a> {
    F32,
    F16,
    BF16,
    /// A block quantization format (Q4_0 ... Q6_K).
    Block(BlockFormat),
    /// FP8 weights of a `[rows, cols]` matrix; no scales means scale 1.
    Fp8 {
        format: Fp8Format,
        rows: u64,
        cols: u64,
        scales: Option<ScaleGrid<'a>>,
    },
    /// E2M1 pairs (low nibble first) of a `[rows, cols]` matrix, each
    /// element times its group's scale (a global scale already folded in).
    E2m1 {
        rows: u64,
        cols: u64,
        scales: ScaleGrid<'a>,
    },
    /// Integers of `bits` bits (4, 8) packed in little-endian int32 words
    /// with a `2^(bits-1)` offset, of a `[rows, cols]` matrix:
    /// `(q - zero) * scale`, rounded to F16 first when the scales are F16
    /// (`round_f16`: the reference computes in the scale's dtype). `zeros`
    /// holds the zero points as exact f32 values, laid out like the scales.
    Int {
        bits: u8,
        rows: u64,
        cols: u64,
        scales: ScaleGrid<'a>,
        zeros: Option<ScaleGrid<'a>>,
        round_f16: bool,
    },
}

impl<'a> Kernel<'a> {
    /// The kernel for an encoding without scales (FP8 and E2M1 need their
    /// matrix and scales: use [`Kernel::Fp8`], [`Kernel::E2m1`]).
    pub fn for_encoding(e: Encoding) -> Option<Kernel<'static>> {
        Some(match e {
            Encoding::F32 => Kernel::F32,
            Encoding::F16 => Kernel::F16,
            Encoding::BF16 => Kernel::BF16,
            Encoding::Block(f) => Kernel::Block(f),
            Encoding::Fp8(_) | Encoding::E2m1 | Encoding::Int { .. } => return None,
        })
    }

    pub fn encoding(&self) -> Encoding {
        match self {
            Kernel::F32 => Encoding::F32,
            Kernel::F16 => Encoding::F16,
            Kernel::BF16 => Encoding::BF16,
            Kernel::Block(f) => Encoding::Block(*f),
            Kernel::Fp8 { format, .. } => Encoding::Fp8(*format),
            Kernel::E2m1 { .. } => Encoding::E2m1,
            Kernel::Int { bits, .. } => Encoding::Int { bits: *bits },
        }
    }

    /// Elements per block: chunks start and end on multiples of this.
    pub fn granule(&self) -> u64 {
        self.encoding().block().0
    }

    /// Source bytes for `n` elements (`n` a multiple of the granule).
    pub fn src_bytes(&self, n: u64) -> u64 {
        let (block, size) = self.encoding().block();
        n / block * size
    }

    /// Check a chunk: `dst_len` elements starting at element `first`, from
    /// `src_len` bytes.
    pub fn check(&self, first: u64, dst_len: u64, src_len: u64) -> Result<(), DequantError> {
        let end = first.saturating_add(dst_len);
        let g = self.granule();
        if !first.is_multiple_of(g) || !dst_len.is_multiple_of(g) {
            return Err(DequantError::Unaligned { first, end, granule: g });
        }
        if let Kernel::Fp8 { rows, cols, .. } | Kernel::E2m1 { rows, cols, .. } | Kernel::Int { rows, cols, .. } = self {
            let total = rows.saturating_mul(*cols);
            if end > total {
                return Err(DequantError::OutOfRange { first, end, total });
            }
        }
        if let Kernel::E2m1 { cols, scales, .. } = self {
            // Runs of one scale split at rows and groups: both even, so
            // that no byte's two values fall in different runs.
            if cols % 2 != 0 || scales.block_cols() % 2 != 0 {
                return Err(DequantError::OddPacking { cols: *cols, group: scales.block_cols() });
            }
        }
        if let Kernel::Int { bits, cols, scales, zeros, .. } = self {
            // Runs split at rows and groups: whole int32 words, so that no
            // word's values fall in different runs.
            let per_word = 32 / *bits as u64;
            if !matches!(bits, 4 | 8) || cols % per_word != 0 || (scales.block_cols() % per_word != 0 && scales.uniform().is_none()) {
                return Err(DequantError::OddPacking { cols: *cols, group: scales.block_cols() });
            }
            if let Some(z) = zeros {
                if z.len() != scales.len() || z.block_cols() != scales.block_cols() {
                    return Err(DequantError::ScaleCount { expected: scales.len() as u64, actual: z.len() as u64 });
                }
            }
        }
        let expected = self.src_bytes(dst_len);
        if expected != src_len {
            return Err(DequantError::SourceLength { expected, actual: src_len, elems: dst_len });
        }
        Ok(())
    }
}

/// What an integer-pack chunk's kernels need of [`Kernel::Int`]: the
/// bits per value, the matrix width, the scales and zero points, and
/// whether products are rounded to F16 first.
#[derive(Clone, Copy)]
pub(crate) struct IntPack<'a> {
    pub bits: u8,
    pub cols: u64,
    pub scales: ScaleGrid<'a>,
    pub zeros: Option<ScaleGrid<'a>>,
    pub to_f16: bool,
}

/// Split elements `[first, first + n)` of a `[rows, cols]` matrix into runs
/// that share one scale (a block's width of one row, a whole row for
/// per-channel scales, everything for one scale) and call `run(scale,
/// offset, len)` for each; no scales is scale 1.
#[inline(always)]
pub(crate) fn fp8_runs(cols: u64, scales: Option<&ScaleGrid>, first: u64, n: usize, mut run: impl FnMut(f32, usize, usize)) {
    match scales {
        None if n > 0 => run(1.0, 0, n),
        None => {}
        Some(g) => grid_runs(cols, g, first, n, |k, i, len| run(g.values[k], i, len)),
    }
}

/// The runs of [`fp8_runs`], each with the index `k` of its value in the
/// grid (where zero points, laid out like the scales, are found too).
/// Row by row, the block boundary advanced by addition: no division per run.
#[inline(always)]
pub(crate) fn grid_runs(cols: u64, g: &ScaleGrid, first: u64, n: usize, mut run: impl FnMut(usize, usize, usize)) {
    if n == 0 {
        // Also the only case where cols may be 0 (an empty matrix): nothing
        // to split, and nothing to divide by (found by the dequant fuzzer).
        return;
    }
    if g.uniform().is_some() {
        return run(0, 0, n);
    }
    let bc = g.block_cols() as usize;
    let cols = cols as usize;
    let mut i = 0usize;
    let mut row = first / cols as u64;
    let mut c = (first % cols as u64) as usize;
    while i < n {
        let row_start = ((row / g.block_rows) * g.grid_cols) as usize;
        let row_end = i + (cols - c).min(n - i);
        let mut block = c / bc;
        let mut boundary = (block + 1) * bc;
        while i < row_end {
            let len = (boundary.min(cols) - c).min(row_end - i);
            run(row_start + block, i, len);
            i += len;
            c += len;
            block += 1;
            boundary += bc;
        }
        row += 1;
        c = 0;
    }
}
