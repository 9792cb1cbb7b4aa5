//! The plan: which tensors to produce, from which bytes, in file order.
//!
//! One planner serves every executor (CPU, CUDA). A job is an element range
//! of one tensor, so a tensor-parallel row slice is a plan, not a copy.
//! Executors split jobs into chunks on block boundaries with [`Job::chunks`].

use std::collections::HashSet;
use std::ops::Range;
use std::path::PathBuf;

use weightstream_format::{Catalog, Encoding, ScaleRef};

use crate::error::{Error, Result};

#[derive(Debug, Clone, Default)]
pub struct PlanOptions {
    /// Only these tensors (by name); `None` means every data tensor.
    pub names: Option<Vec<String>>,
    /// Leave out tensors that cannot become BF16 instead of failing.
    pub skip_unsupported: bool,
}

/// Where a job's FP8 scales are.
#[derive(Debug, Clone)]
pub struct ScaleSource {
    pub tensor: usize,
    pub file: usize,
    pub bytes: Range<u64>,
    pub scale: ScaleRef,
}

/// One tensor (or a row range of one) to produce as BF16.
#[derive(Debug, Clone)]
pub struct Job {
    /// Index in `Catalog::tensors`.
    pub tensor: usize,
    pub name: String,
    /// Shape of what this job produces (rows cut to the slice).
    pub shape: Vec<u64>,
    pub encoding: Encoding,
    /// The tensor as a `[rows, cols]` matrix (its full size, before slicing).
    pub matrix: (u64, u64),
    pub file: usize,
    /// First element of the tensor this job produces.
    pub first: u64,
    pub n_elems: u64,
    /// Absolute byte range of those elements in `file`.
    pub src: Range<u64>,
    pub scale: Option<ScaleSource>,
}

/// A piece of a job: elements `[first, first + n)` of the tensor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Tensor element index (not relative to the job).
    pub first: u64,
    pub n: u64,
    /// Absolute byte range in the job's file.
    pub src: Range<u64>,
}

impl Job {
    pub fn out_bytes(&self) -> u64 {
        self.n_elems * 2
    }

    pub fn src_bytes(&self) -> u64 {
        self.src.end - self.src.start
    }

    /// Bytes that hold elements `[first, first + n)` (block-aligned).
    pub fn byte_range(&self, first: u64, n: u64) -> Range<u64> {
        let (block, size) = self.encoding.block();
        let start = self.src.start + (first - self.first) / block * size;
        start..start + n / block * size
    }

    /// Split into chunks of about `chunk_elems` elements, on block boundaries.
    pub fn chunks(&self, chunk_elems: u64) -> impl Iterator<Item = Chunk> + '_ {
        let block = self.encoding.block().0;
        let step = (chunk_elems / block).max(1) * block;
        let end = self.first + self.n_elems;
        (self.first..end).step_by(step as usize).map(move |a| {
            let n = step.min(end - a);
            Chunk { first: a, n, src: self.byte_range(a, n) }
        })
    }

    /// The same tensor cut to rows `[start, end)` of its matrix view.
    pub fn rows(&self, rows: Range<u64>) -> Result<Job> {
        let (nrows, cols) = self.matrix;
        if rows.start > rows.end || rows.end > nrows || self.first != 0 || self.n_elems != nrows * cols {
            return Err(Error::BadRows { tensor: self.name.clone(), start: rows.start, end: rows.end, rows: nrows });
        }
        let first = rows.start * cols;
        let n_elems = (rows.end - rows.start) * cols;
        let mut shape = self.shape.clone();
        match shape.len() {
            0 => {}
            1 => shape[0] = n_elems,
            _ => {
                // Rows are the product of the leading dims; slicing is defined on the outermost.
                let inner: u64 = shape[1..shape.len() - 1].iter().product::<u64>().max(1);
                if rows.start % inner != 0 || rows.end % inner != 0 {
                    return Err(Error::BadRows { tensor: self.name.clone(), start: rows.start, end: rows.end, rows: nrows });
                }
                shape[0] = (rows.end - rows.start) / inner;
            }
        }
        let src = self.byte_range(first, n_elems);
        Ok(Job { shape, first, n_elems, src, ..self.clone() })
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
                if cat.tensor(name).is_none() {
                    return Err(Error::NoSuchTensor(name.to_string()));
                }
            }
        }
        let mut jobs = Vec::new();
        let mut skipped = Vec::new();
        for (i, t) in cat.data_tensors() {
            if wanted.as_ref().is_some_and(|w| !w.contains(t.name.as_str())) {
                continue;
            }
            let encoding = match t.encoding() {
                Ok(e) => e,
                Err(reason) if opts.skip_unsupported => {
                    skipped.push(Skipped { name: t.name.clone(), reason });
                    continue;
                }
                Err(reason) => {
                    return Err(Error::Unsupported {
                        file: file_path(cat, t.file),
                        tensor: t.name.clone(),
                        offset: t.offset,
                        reason: format!("{reason}; --skip-unsupported leaves it out"),
                    })
                }
            };
            let scale = t.scale.map(|s| {
                let st = &cat.tensors[s.tensor];
                ScaleSource { tensor: s.tensor, file: st.file, bytes: st.offset..st.offset + st.nbytes, scale: s }
            });
            jobs.push(Job {
                tensor: i,
                name: t.name.clone(),
                shape: t.shape.clone(),
                encoding,
                matrix: t.matrix(),
                file: t.file,
                first: 0,
                n_elems: t.n_elems(),
                src: t.offset..t.offset + t.nbytes,
                scale,
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

    pub fn job(&self, name: &str) -> Option<&Job> {
        self.jobs.iter().find(|j| j.name == name)
    }
}

pub(crate) fn file_path(cat: &Catalog, file: usize) -> PathBuf {
    cat.files[file].path.clone()
}
