//! The plan: which tensors to produce, from which bytes, in file order.
//!
//! One planner serves every executor (CPU, CUDA). A job is a rectangle of
//! one tensor's matrix view (all of it, a row range, a column range, or
//! both), so a tensor-parallel shard is a plan, not a copy, and only its
//! bytes are read. Executors split jobs into chunks on block boundaries with
//! [`Job::chunks`]; a column-sliced job is one contiguous segment per row.
//! A column range whose edge falls inside a block reads the blocks that
//! cover it, and the chunk says which of its elements are kept
//! ([`Chunk::keep`], cut into [`Piece`]s by `pieces.rs`).

use std::collections::HashSet;
use std::ops::Range;
use std::path::PathBuf;

use weightstream_dequant::OutDtype;
use weightstream_format::{Catalog, Encoding, GlobalScale, ScaleRef};

use crate::error::{Error, Result};

#[derive(Debug, Clone, Default)]
pub struct PlanOptions {
    /// Only these tensors (by name); `None` means every data tensor.
    pub names: Option<Vec<String>>,
    /// Leave out tensors that cannot become BF16 instead of failing.
    pub skip_unsupported: bool,
    /// The output dtype of every job (BF16 unless asked).
    pub out: OutDtype,
}

/// Where a job's scales are (FP8, packed 4-bit).
#[derive(Debug, Clone)]
pub struct ScaleSource {
    pub tensor: usize,
    pub file: usize,
    pub bytes: Range<u64>,
    pub scale: ScaleRef,
    /// A packed weight's global scale, folded into every scale value.
    pub global: Option<GlobalScale>,
    /// Bytes of one row of the scale grid, where the scale tensor is
    /// stored row-major as `[grid_rows, grid_cols]` (its leading
    /// dimensions flattened): a job then reads only the grid rows of its
    /// own rows. `None`: read whole (per-tensor scales, other layouts).
    pub row_bytes: Option<u64>,
}

impl ScaleSource {
    fn new(cat: &Catalog, s: ScaleRef, global: Option<GlobalScale>) -> ScaleSource {
        let st = &cat.tensors[s.tensor];
        let l = &s.layout;
        let (last, lead) = st.shape.split_last().map_or((1, 1), |(l, rest)| (*l, rest.iter().product::<u64>()));
        let row_major = l.grid_rows > 1 && lead == l.grid_rows && last == l.grid_cols && st.nbytes % l.grid_rows == 0;
        let row_bytes = row_major.then(|| st.nbytes / l.grid_rows);
        ScaleSource { tensor: s.tensor, file: st.file, bytes: st.offset..st.offset + st.nbytes, scale: s, global, row_bytes }
    }
}

/// One tensor (or a rectangle of its matrix view) to produce as BF16.
#[derive(Debug, Clone)]
pub struct Job {
    /// Index in `Catalog::tensors`.
    pub tensor: usize,
    pub name: String,
    /// Shape of what this job produces (cut to the slice).
    pub shape: Vec<u64>,
    pub encoding: Encoding,
    /// The tensor as a `[rows, cols]` matrix (its full size, before slicing).
    pub matrix: (u64, u64),
    pub file: usize,
    /// First element of the tensor this job produces.
    pub first: u64,
    /// Elements produced (rows x window width for a column slice).
    pub n_elems: u64,
    /// A column slice: columns `[start, end)` of every row from the row of
    /// `first` on (`None`: whole rows, the elements `[first, first + n_elems)`).
    pub window: Option<Range<u64>>,
    /// Absolute byte range in `file` from the first element's block to the
    /// end of the last element's block (for a column slice, the rows'
    /// segments and the gaps between).
    pub src: Range<u64>,
    /// Rows per head where the stored rows are permuted within each head,
    /// as llama.cpp's converter does to llama-family q/k weights
    /// (`LlamaModel.permute`); the output puts them back in Hugging Face
    /// order (see [`Job::unpermuted`]). `None`: rows as stored.
    pub unpermute: Option<u64>,
    pub scale: Option<ScaleSource>,
    /// Bytes of the zero-point tensor this job reads whole beside its data
    /// (counted in what a load reports as read, issue 27; its scales:
    /// [`Job::scale_range`]).
    pub zeros_bytes: u64,
    /// What the job writes: BF16 (the default) or float16, 2 bytes an element.
    pub out: OutDtype,
}

/// A piece of a job: elements `[first, first + n)` of the tensor, whole
/// blocks, of which the job keeps `keep` (all of them but where a slice's
/// edge falls inside a block).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Tensor element index (not relative to the job), on a block edge.
    pub first: u64,
    pub n: u64,
    /// Absolute byte range in the job's file.
    pub src: Range<u64>,
    /// Tensor elements of `first..first + n` that are output, contiguous.
    pub keep: Range<u64>,
}

impl Chunk {
    /// Whether some dequantized elements are dropped (a slice edge inside
    /// one of its blocks).
    pub fn trimmed(&self) -> bool {
        self.keep != (self.first..self.first + self.n)
    }
}

impl Job {
    pub fn out_bytes(&self) -> u64 {
        self.n_elems * 2
    }

    /// The tensor rows this job produces elements of.
    fn out_rows(&self) -> Range<u64> {
        let cols = self.matrix.1.max(1);
        match &self.window {
            _ if self.n_elems == 0 => 0..0,
            Some(w) => {
                let r0 = self.first / cols;
                r0..r0 + self.n_elems / (w.end - w.start).max(1)
            }
            None => self.first / cols..(self.first + self.n_elems).div_ceil(cols),
        }
    }

    /// The bytes of its scale tensor this job reads: the grid rows that
    /// scale its rows where the grid is stored row by row (an expert-
    /// parallel rank's experts of a gpt-oss MXFP4 stack read their own
    /// exponents only), the whole tensor otherwise. The other grid rows are
    /// never looked up by this job's kernels.
    pub fn scale_range(&self) -> Option<Range<u64>> {
        let s = self.scale.as_ref()?;
        let Some(row_bytes) = s.row_bytes else { return Some(s.bytes.clone()) };
        let rows = self.out_rows();
        let block = s.scale.layout.block_rows.max(1);
        let (g0, g1) = (rows.start / block, rows.end.div_ceil(block).min(s.scale.layout.grid_rows));
        Some(s.bytes.start + g0 * row_bytes..s.bytes.start + g1.max(g0) * row_bytes)
    }

    /// Bytes of the scale and zero-point tensors this job reads beside its data.
    pub fn companion_bytes(&self) -> u64 {
        self.scale_range().map_or(0, |r| r.end - r.start) + self.zeros_bytes
    }

    /// File bytes this job reads (a column slice: its rows' segments only).
    pub fn src_bytes(&self) -> u64 {
        self.segments()
            .map(|(first, n)| {
                let r = self.byte_range(first, n);
                r.end - r.start
            })
            .sum()
    }

    /// Bytes of the blocks that hold elements `[first, first + n)` of the
    /// tensor (inside one segment).
    pub fn byte_range(&self, first: u64, n: u64) -> Range<u64> {
        let (block, size) = self.encoding.block();
        // The tensor's first byte: `src` starts at the block of `self.first`.
        let base = self.src.start - self.first / block * size;
        base + first / block * size..base + (first + n).div_ceil(block) * size
    }

    /// The contiguous element ranges `(first, n)` of the tensor this job
    /// produces, in file order: one, or one per row of a column slice or
    /// of un-permuted rows ([`Job::out_index`] says where each goes).
    pub fn segments(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let cols = self.matrix.1;
        let by_row = self.window.is_some() || self.unpermute.is_some();
        let (rows, width) = match &self.window {
            _ if !by_row => (0..u64::from(self.n_elems > 0), self.n_elems),
            w => (self.out_rows(), w.as_ref().map_or(cols, |w| w.end - w.start)),
        };
        let start = self.window.as_ref().map_or(0, |w| w.start);
        rows.map(move |r| if by_row { (r * cols + start, width) } else { (self.first, width) })
    }

    /// Where tensor element `elem` (one this job produces) goes in its output.
    pub fn out_index(&self, elem: u64) -> u64 {
        if self.window.is_none() && self.unpermute.is_none() {
            return elem - self.first;
        }
        let cols = self.matrix.1;
        let (start, width) = self.window.as_ref().map_or((0, cols), |w| (w.start, w.end - w.start));
        let row = elem / cols - self.first / cols;
        let row = self.unpermute.map_or(row, |per_head| unpermuted_row(row, per_head));
        row * width + (elem % cols - start)
    }

    /// This job with its rows put back where llama.cpp's converter took
    /// them from: within each head of `rows_per_head` rows, stored row
    /// `2j + s` is Hugging Face row `s * rows_per_head / 2 + j` (the
    /// inverse of `LlamaModel.permute`, transformers'
    /// `reverse_permute_weights`). The job's rows (a whole tensor or a row
    /// slice) must be whole heads, of an even number of rows each.
    pub fn unpermuted(&self, rows_per_head: u64) -> Result<Job> {
        let rows = self.out_rows();
        let (r0, n) = (rows.start, rows.end - rows.start);
        if rows_per_head == 0 || rows_per_head % 2 != 0 || r0 % rows_per_head != 0 || n % rows_per_head != 0 || self.unpermute.is_some() {
            return Err(Error::InvalidArgument(format!(
                "tensor '{}': rows {r0}..{} cannot be un-permuted in heads of {rows_per_head} rows (whole heads of an even number of rows, once)",
                self.name,
                r0 + n
            )));
        }
        Ok(Job { unpermute: Some(rows_per_head), ..self.clone() })
    }

    /// Split into chunks of about `chunk_elems` elements, on block
    /// boundaries, never across a segment (a column slice's row). A segment
    /// whose edge falls inside a block is covered by whole blocks; only its
    /// first and last chunks keep less than they dequantize.
    pub fn chunks(&self, chunk_elems: u64) -> impl Iterator<Item = Chunk> + '_ {
        let block = self.encoding.block().0;
        let step = (chunk_elems / block).max(1) * block;
        self.segments().flat_map(move |(first, n)| {
            let end = first + n;
            let (from, to) = (first / block * block, end.div_ceil(block) * block);
            (from..to).step_by(step as usize).map(move |a| {
                let n = step.min(to - a);
                Chunk { first: a, n, src: self.byte_range(a, n), keep: a.max(first)..(a + n).min(end) }
            })
        })
    }

    /// The same tensor cut to rows `[start, end)` of its matrix view.
    pub fn rows(&self, rows: Range<u64>) -> Result<Job> {
        self.slice(rows, 0..self.matrix.1)
    }

    /// The same tensor cut to columns `[start, end)` of its matrix view.
    pub fn cols(&self, cols: Range<u64>) -> Result<Job> {
        self.slice(0..self.matrix.0, cols)
    }

    /// The rectangle `rows x cols` of this (whole) tensor's matrix view.
    /// Rows of an N-D tensor are the product of its leading dimensions: a
    /// row range of whole slices of the outermost one keeps the tensor's
    /// rank (experts `[e0, e1)` of a `[E, out, in]` stack); any other row
    /// range is the 2-D rectangle `[rows, cols]` (part of one expert's
    /// rows, for tensor parallelism inside experts). Columns may
    /// start and end anywhere: where an edge falls inside a block (32 or
    /// 256 elements for GGUF blocks), the blocks covering the range are
    /// read and the result trimmed after dequantization.
    pub fn slice(&self, rows: Range<u64>, cols: Range<u64>) -> Result<Job> {
        let (nrows, ncols) = self.matrix;
        let bad =
            |why: String| Error::BadSlice { tensor: self.name.clone(), rows: rows.clone(), cols: cols.clone(), shape: (nrows, ncols), why };
        if self.first != 0 || self.n_elems != nrows * ncols || self.window.is_some() || self.unpermute.is_some() {
            return Err(bad("only a whole tensor can be sliced".into()));
        }
        if rows.start > rows.end || rows.end > nrows || cols.start > cols.end || cols.end > ncols {
            return Err(bad("outside the matrix".into()));
        }
        let empty = rows.start == rows.end || cols.start == cols.end;
        let mut shape = self.shape.clone();
        match shape.len() {
            0 if empty => return Err(bad("a scalar has one value: an empty range of it is not a tensor".into())),
            0 => {}
            1 => shape[0] = if empty { 0 } else { cols.end - cols.start },
            _ => {
                let inner: u64 = shape[1..shape.len() - 1].iter().product::<u64>().max(1);
                if rows.start % inner != 0 || rows.end % inner != 0 {
                    shape = vec![rows.end - rows.start, cols.end - cols.start];
                } else {
                    shape[0] = (rows.end - rows.start) / inner;
                    *shape.last_mut().expect("2-D or more") = cols.end - cols.start;
                }
            }
        }
        if empty {
            // Nothing to read: an empty job at the tensor's start, so that
            // no element index is ever computed from the range's edges (a
            // column range [C, C) once underflowed into a panic, issue 27).
            let at = self.src.start;
            return Ok(Job { shape, first: 0, n_elems: 0, window: None, src: at..at, ..self.clone() });
        }
        let width = cols.end - cols.start;
        let full_rows = width == ncols;
        let first = rows.start * ncols + if full_rows { 0 } else { cols.start };
        let n_elems = (rows.end - rows.start) * width;
        // The span from the first element's block to the end of the block
        // of the last row's segment (the whole rows for a row slice).
        let last_end = if n_elems == 0 { first } else { (rows.end - 1) * ncols + cols.end };
        let (b, size) = self.encoding.block();
        let base = self.src.start;
        let src = base + first / b * size..base + last_end.div_ceil(b) * size;
        let window = (!full_rows).then_some(cols);
        Ok(Job { shape, first, n_elems, window, src, ..self.clone() })
    }
}

#[derive(Debug, Clone)]
pub struct Skipped {
    pub name: String,
    pub reason: String,
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub jobs: Vec<Job>,
    pub skipped: Vec<Skipped>,
}

impl Plan {
    pub fn new(cat: &Catalog, opts: &PlanOptions) -> Result<Plan> {
        let wanted: Option<HashSet<&str>> = opts.names.as_ref().map(|n| n.iter().map(String::as_str).collect());
        if let Some(w) = &wanted {
            for name in w {
                if cat.out_tensor(name).is_none() {
                    return Err(Error::NoSuchTensor(name.to_string()));
                }
            }
        }
        let mut jobs = Vec::new();
        let mut skipped = Vec::new();
        for (i, t) in cat.data_tensors() {
            if wanted.as_ref().is_some_and(|w| !w.contains(t.out_name())) {
                continue;
            }
            let encoding = match t.encoding() {
                Ok(e) => e,
                Err(reason) if opts.skip_unsupported => {
                    skipped.push(Skipped { name: t.name.clone(), reason });
                    continue;
                }
                Err(reason) => {
                    return Err(Error::Unsupported { file: file_path(cat, t.file), tensor: t.name.clone(), offset: t.offset, reason })
                }
            };
            let scale = t.scale.map(|s| ScaleSource::new(cat, s, t.packed.as_ref().and_then(|p| p.global)));
            jobs.push(Job {
                tensor: i,
                name: t.out_name().to_string(),
                shape: t.out_shape().to_vec(),
                encoding,
                matrix: t.out_matrix(),
                file: t.file,
                first: 0,
                n_elems: t.out_elems(),
                window: None,
                src: t.offset..t.offset + t.nbytes,
                unpermute: None,
                zeros_bytes: t.packed.as_ref().and_then(|p| p.zeros).map_or(0, |z| cat.tensors[z].nbytes),
                scale,
                out: opts.out,
            });
        }
        Ok(Plan { jobs, skipped })
    }

    pub fn src_bytes(&self) -> u64 {
        self.jobs.iter().map(Job::src_bytes).sum()
    }

    pub fn out_bytes(&self) -> u64 {
        self.jobs.iter().map(Job::out_bytes).sum()
    }

    /// File bytes a load of this plan reads: the tensors' data (cut to
    /// their slices) and their scale and zero-point tensors. Headers, read
    /// when the checkpoint was opened, are not counted.
    pub fn read_bytes(&self) -> u64 {
        self.jobs.iter().map(|j| j.src_bytes() + j.companion_bytes()).sum()
    }

    /// Every job writing `out` instead (a plan is made for BF16 unless its
    /// options say otherwise).
    pub fn with_out(mut self, out: OutDtype) -> Plan {
        for j in &mut self.jobs {
            j.out = out;
        }
        self
    }

    /// The output dtype of its jobs (BF16 for an empty plan).
    pub fn out(&self) -> OutDtype {
        self.jobs.first().map_or(OutDtype::BF16, |j| j.out)
    }

    pub fn job(&self, name: &str) -> Option<&Job> {
        self.jobs.iter().find(|j| j.name == name)
    }
}

/// Output row of stored row `row` of heads of `per_head` rows (even):
/// stored `2j + s` within a head is output `s * per_head / 2 + j`.
fn unpermuted_row(row: u64, per_head: u64) -> u64 {
    let (head, k) = (row / per_head, row % per_head);
    head * per_head + (k % 2) * (per_head / 2) + k / 2
}

pub(crate) fn file_path(cat: &Catalog, file: usize) -> PathBuf {
    cat.files[file].path.clone()
}
