//! The keep-quantized repacks' binding (`Checkpoint.repack`): a tensor's
//! blocks moved into GPTQ's or the FP4 layout, into buffers the Python
//! layer allocated (numpy arrays or torch tensors, host or CUDA).

use std::ops::Range;

use pyo3::PyResult;
use weightstream::plan::Job;
use weightstream::Loader;

use crate::py_error;

/// The quantized layout a tensor's blocks map onto exactly, as the Python
/// layer names it: (layout, bits, group).
pub(crate) fn target(job: &Job) -> Option<(&'static str, u32, usize)> {
    weightstream::repack::gptq_target(job)
        .map(|t| ("gptq", t.bits, t.group))
        .or_else(|| weightstream::repack::fp4_target(job).map(|t| ("fp4", 4, t.group)))
}

#[derive(Clone, Copy)]
pub(crate) enum Layout {
    Gptq,
    Fp4,
}

impl Layout {
    pub(crate) fn parse(name: &str) -> PyResult<Layout> {
        match name {
            "gptq" => Ok(Layout::Gptq),
            "fp4" => Ok(Layout::Fp4),
            other => Err(py_error("invalid_argument", format!("no repack layout {other:?} (gptq, fp4)"))),
        }
    }

    /// The element sizes of the two outputs: GPTQ's int32 codes and fp16
    /// scales, FP4's packed bytes and scale bytes.
    fn sizes(self) -> (usize, usize) {
        match self {
            Layout::Gptq => (4, 2),
            Layout::Fp4 => (1, 1),
        }
    }
}

/// The two output buffers, (address, bytes) each.
pub(crate) struct Out {
    pub(crate) layout: Layout,
    pub(crate) q: (usize, usize),
    pub(crate) s: (usize, usize),
}

impl Out {
    /// Null pointers for non-empty buffers, misaligned ones, and sizes
    /// that are not whole elements are refused before anything runs.
    pub(crate) fn check(&self) -> PyResult<()> {
        let (qs, ss) = self.layout.sizes();
        let bad = |(p, n): (usize, usize), size: usize| (p == 0 && n != 0) || p % size != 0 || n % size != 0;
        if bad(self.q, qs) || bad(self.s, ss) {
            return Err(py_error("invalid_argument", "qweight needs an aligned int32 buffer, scales an aligned fp16 one (FP4: bytes)"));
        }
        Ok(())
    }

    /// Repack rows `rows` and columns `cols` of `job` into the buffers, on
    /// the CPU or on CUDA device `device` in `stream`'s order.
    pub(crate) fn run(
        &self,
        loader: &Loader,
        job: &Job,
        rows: Range<u64>,
        cols: Range<u64>,
        device: Option<usize>,
        stream: u64,
    ) -> weightstream::Result<u64> {
        use weightstream::repack::{fp4_into, fp4_into_device, gptq_into, gptq_into_device};
        let cat = loader.catalog();
        match device {
            Some(d) => {
                let gpu = loader.gpu(d)?;
                let (q, s) = ((self.q.0 as u64, self.q.1 as u64), (self.s.0 as u64, self.s.1 as u64));
                // SAFETY: the Python layer passes the data pointers of
                // contiguous CUDA tensors on `device` of the bytes given
                // (checked against the region before any launch), alive
                // until this returns, and torch's current stream on that device.
                unsafe {
                    match self.layout {
                        Layout::Gptq => gptq_into_device(cat, &gpu, job, rows, cols, q, s, stream),
                        Layout::Fp4 => fp4_into_device(cat, &gpu, job, rows, cols, q, s, stream),
                    }
                }
            }
            None => {
                let (qs, ss) = self.layout.sizes();
                // SAFETY: the Python layer passes the data pointers of
                // contiguous, writable host buffers of the bytes given
                // (alignment checked by `check`) that it keeps alive until
                // this call returns; the kernels check their lengths.
                unsafe {
                    match self.layout {
                        Layout::Gptq => gptq_into(
                            cat,
                            job,
                            rows,
                            cols,
                            std::slice::from_raw_parts_mut(self.q.0 as *mut u32, self.q.1 / qs),
                            std::slice::from_raw_parts_mut(self.s.0 as *mut u16, self.s.1 / ss),
                        ),
                        Layout::Fp4 => fp4_into(
                            cat,
                            job,
                            rows,
                            cols,
                            std::slice::from_raw_parts_mut(self.q.0 as *mut u8, self.q.1),
                            std::slice::from_raw_parts_mut(self.s.0 as *mut u8, self.s.1),
                        ),
                    }
                }
            }
        }
    }
}
