//! `weightstream._native`: the Rust side of the Python package. Deliberately
//! small and pointer-based: Python allocates the tensors (torch or numpy) and
//! passes their addresses; the kernels write into them directly. The GIL is
//! released for the whole load and taken back only to report each finished
//! tensor.

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::create_exception;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use weightstream::dequant::OutDtype;
use weightstream::format::SourceKind;
use weightstream::{Catalog, Error, Loader, Plan, PlanOptions, Staging};

mod interrupt;
mod repack;
mod side_files;

use interrupt::{interruptible, interruptible_shared, report};

create_exception!(_native, WeightstreamError, PyRuntimeError, "A weightstream failure: .kind, .file, .tensor, .offset say what and where.");

/// Turn a Rust error into WeightstreamError with its fields as attributes.
fn to_py(py: Python<'_>, e: Error) -> PyErr {
    // The library names no options; the Python way out, where there is one.
    let message = match &e {
        Error::Unsupported { .. } => format!("{e}; open(..., skip_unsupported=True) leaves it out"),
        _ => e.to_string(),
    };
    let (file, tensor, offset) = e.location();
    with_attrs(py, message, e.code(), (file.map(|f| f.display().to_string()), tensor, offset))
}

/// A WeightstreamError not from the library (a bad argument here, a panic):
/// it has a `kind` like every other (issue 27), and no location.
fn py_error(kind: &'static str, message: impl Into<String>) -> PyErr {
    Python::attach(|py| with_attrs(py, message.into(), kind, (None, None, None)))
}

/// WeightstreamError(message) with `kind`, `file`, `tensor` and `offset`.
fn with_attrs(py: Python<'_>, message: String, kind: &str, (file, tensor, offset): (Option<String>, Option<&str>, Option<u64>)) -> PyErr {
    let err = WeightstreamError::new_err(message);
    let v = err.value(py);
    let _ = v.setattr("kind", kind);
    let _ = v.setattr("file", file);
    let _ = v.setattr("tensor", tensor);
    let _ = v.setattr("offset", offset);
    err
}

fn source_kind(s: &str) -> PyResult<SourceKind> {
    SourceKind::parse(s).ok_or_else(|| py_error("invalid_argument", format!("source '{s}': use {}", SourceKind::NAMES.join(", "))))
}

/// An opened checkpoint (its Loader: catalog, staging settings, and the
/// executors, made once and reused by every load) and the plan of its data
/// tensors.
#[pyclass(module = "weightstream._native", frozen)]
struct Checkpoint {
    loader: Arc<Loader>,
    plan: Arc<Plan>,
}

/// A rectangle of a tensor's matrix view: (row start, row end, column
/// start, column end).
type Slice = (u64, u64, u64, u64);

impl Checkpoint {
    fn cat(&self) -> &Catalog {
        self.loader.catalog()
    }

    /// The jobs of `indices`, each cut to its slice where `slices` gives one
    /// and its rows un-permuted in heads of `unpermute[k]` rows where that
    /// is not 0 (`Job::unpermuted`: GGUF q/k of llama-family models).
    fn sub_plan(&self, py: Python<'_>, indices: &[usize], slices: Option<&[Option<Slice>]>, unpermute: Option<&[u64]>) -> PyResult<Plan> {
        if slices.is_some_and(|s| s.len() != indices.len()) || unpermute.is_some_and(|u| u.len() != indices.len()) {
            return Err(py_error("invalid_argument", "one slice (or None) and one un-permutation (or 0) per tensor"));
        }
        let mut jobs = Vec::with_capacity(indices.len());
        for (k, &i) in indices.iter().enumerate() {
            let job = self.plan.jobs.get(i).ok_or_else(|| py_error("invalid_argument", format!("no tensor {i}")))?;
            let job = match slices.and_then(|s| s[k]) {
                None => job.clone(),
                Some((r0, r1, c0, c1)) => job.slice(r0..r1, c0..c1).map_err(|e| to_py(py, e))?,
            };
            jobs.push(match unpermute.map_or(0, |u| u[k]) {
                0 => job,
                per_head => job.unpermuted(per_head).map_err(|e| to_py(py, e))?,
            });
        }
        Ok(Plan { jobs, skipped: vec![] })
    }
}

#[pymethods]
impl Checkpoint {
    /// `threads`: CPU dequantization threads; `staging_slots`,
    /// `staging_bytes`, `readers`: buffers read ahead, bytes per read, threads
    /// reading (CPU and GPU). Fixed for the checkpoint's life, so that its
    /// executors are made once. `ignore_transforms`: open a GGUF file whose
    /// metadata declares a transform of the weights weightstream does not
    /// apply (a Hadamard rotation, ...), ignoring it (weights as stored).
    /// `cache`: a URL's bytes read through the local cache in that
    /// directory (default: `WEIGHTSTREAM_CACHE_DIR`'s, if set).
    #[new]
    #[pyo3(signature = (path, source = "auto", skip_unsupported = false, threads = None, staging_slots = None, staging_bytes = None, readers = None, ignore_transforms = false, cache = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        source: &str,
        skip_unsupported: bool,
        threads: Option<usize>,
        staging_slots: Option<usize>,
        staging_bytes: Option<usize>,
        readers: Option<usize>,
        ignore_transforms: bool,
        cache: Option<PathBuf>,
    ) -> PyResult<Self> {
        let kind = source_kind(source)?;
        let staging = Staging { threads, readers, slots: staging_slots, slot_bytes: staging_bytes, ..Default::default() };
        let opts = weightstream::format::OpenOptions { ignore_transforms };
        // Off the GIL, and stopped by Ctrl-C: a remote open waits on the
        // store (a listing, HEADs, header reads), which may never answer.
        interruptible_shared(py, |cancel| {
            let cat = weightstream::open_cancellable(&path, kind, opts, cache.as_deref(), Some(cancel))?;
            let loader = Loader::new(Arc::new(cat), staging);
            let plan = loader.plan(&PlanOptions { names: None, skip_unsupported, ..Default::default() })?;
            Ok((loader, plan))
        })
        .map(|(loader, plan)| Checkpoint { loader: Arc::new(loader), plan: Arc::new(plan) })
    }

    /// Names of the tensors a load produces, in file order.
    fn names(&self) -> Vec<String> {
        self.plan.jobs.iter().map(|j| j.name.clone()).collect()
    }

    /// Row-major shapes, in the order of `names()`.
    fn shapes(&self) -> Vec<Vec<u64>> {
        self.plan.jobs.iter().map(|j| j.shape.clone()).collect()
    }

    /// Storage dtypes (`Q4_0`, `F8_E4M3`, ...), in the order of `names()`.
    fn dtypes(&self) -> Vec<&'static str> {
        self.plan.jobs.iter().map(|j| self.cat().tensors[j.tensor].dtype.name()).collect()
    }

    /// "gguf" or "safetensors".
    fn format(&self) -> &'static str {
        match self.cat().format {
            weightstream::Format::Gguf => "gguf",
            weightstream::Format::Safetensors => "safetensors",
        }
    }

    /// The checkpoint's metadata as JSON text (GGUF key-values, or the
    /// safetensors `__metadata__`); without the GGUF `tokenizer.*` keys
    /// unless `tokenizer`.
    #[pyo3(signature = (tokenizer = true))]
    fn metadata_json(&self, tokenizer: bool) -> String {
        self.cat().metadata.to_json_where(|k| tokenizer || !k.starts_with("tokenizer.")).to_string()
    }

    /// config.json beside safetensors shards, as JSON text, if any.
    fn config_json(&self) -> Option<String> {
        self.cat().config.as_ref().map(|c| c.to_string())
    }

    /// (name, reason) of tensors left out because they cannot become BF16.
    fn skipped(&self) -> Vec<(String, String)> {
        self.plan.skipped.iter().map(|s| (s.name.clone(), s.reason.clone())).collect()
    }

    /// The shape tensor `index` has when cut to `slice` (an error if the
    /// slice is outside it).
    fn slice_shape(&self, py: Python<'_>, index: usize, slice: Slice) -> PyResult<Vec<u64>> {
        Ok(self.sub_plan(py, &[index], Some(&[Some(slice)]), None)?.jobs[0].shape.clone())
    }

    /// `[rows, cols]` of tensor `index` seen as a matrix (the innermost
    /// dimension against the others): what slices are ranges of.
    fn matrix(&self, index: usize) -> PyResult<(u64, u64)> {
        Ok(self.plan.jobs.get(index).ok_or_else(|| py_error("invalid_argument", format!("no tensor {index}")))?.matrix)
    }

    /// File bytes tensor `index` (cut to `slice`, if given) reads.
    #[pyo3(signature = (index, slice = None))]
    fn src_bytes(&self, py: Python<'_>, index: usize, slice: Option<Slice>) -> PyResult<u64> {
        Ok(self.sub_plan(py, &[index], Some(&[slice]), None)?.jobs[0].src_bytes())
    }

    /// Per file: (path, source reading it, why it was chosen or None,
    /// whether it stands in for a refused source).
    fn sources(&self) -> Vec<(String, String, Option<String>, bool)> {
        self.cat()
            .files
            .iter()
            .map(|f| (f.path.display().to_string(), f.source.name().to_string(), f.source.note().map(str::to_string), f.source.fallback()))
            .collect()
    }

    /// (bytes, ranged GETs) this checkpoint's remote files fetched from
    /// their store so far, headers included; None when no file is remote.
    fn fetched(&self) -> Option<(u64, u64)> {
        self.cat().fetched().map(|f| (f.bytes, f.requests))
    }

    /// Dequantize tensors `indices` on the CPU into host buffers: `ptrs[k]`
    /// is the address of a contiguous buffer of `nbytes[k]` bytes that must be
    /// exactly the tensor's BF16 size (of its slice, where `slices` gives
    /// one: (row start, row end, column start, column end) of its matrix
    /// view, only those bytes read; `unpermute[k]`, where not 0, the rows
    /// per head of a llama-family GGUF q/k weight to put back in Hugging
    /// Face order). Returns (seconds, file bytes, notes: (text, fallback)
    /// pairs, none on the CPU).
    #[pyo3(signature = (indices, ptrs, nbytes, callback = None, slices = None, unpermute = None, out = "bf16"))]
    #[allow(clippy::too_many_arguments)]
    fn load_cpu(
        &self,
        py: Python<'_>,
        indices: Vec<usize>,
        ptrs: Vec<usize>,
        nbytes: Vec<usize>,
        callback: Option<Py<PyAny>>,
        slices: Option<Vec<Option<Slice>>>,
        unpermute: Option<Vec<u64>>,
        out: &str,
    ) -> PyResult<(f64, u64, Vec<(String, bool)>)> {
        let plan = self.sub_plan(py, &indices, slices.as_deref(), unpermute.as_deref())?.with_out(out_dtype(out)?);
        check_buffers(&plan, &ptrs, &nbytes)?;
        let loader = self.loader.clone();
        interruptible(py, move |control| {
            let mut dsts: Vec<&mut [u16]> = ptrs
                .iter()
                .zip(&plan.jobs)
                // SAFETY: the Python layer passes the data pointers of
                // contiguous, writable BF16 tensors it allocated for exactly
                // these jobs and keeps alive until this call returns; their
                // sizes were checked against the jobs above.
                .map(|(&p, j)| unsafe { std::slice::from_raw_parts_mut(p as *mut u16, j.n_elems as usize) })
                .collect();
            let stats = loader.load_host(&plan, &mut dsts, control, |i| report(&callback, indices[i]))?;
            Ok((stats.seconds, stats.src_bytes, vec![]))
        })
    }

    /// Dequantize tensors `indices` on CUDA device `device` into device
    /// buffers `ptrs` (torch tensors' data pointers), ordered after work
    /// queued on `stream` (torch's current stream). Complete on return.
    /// `slices` and `unpermute` as for `load_cpu` (an un-permuted tensor
    /// goes row by row: one launch per row).
    /// Returns (seconds, file bytes, notes on how storage was read as
    /// (text, fallback) pairs: fallback when it reads another way than asked).
    #[pyo3(signature = (device, indices, ptrs, nbytes, stream = 0, callback = None, slices = None, unpermute = None, out = "bf16"))]
    #[allow(clippy::too_many_arguments)]
    fn load_cuda(
        &self,
        py: Python<'_>,
        device: usize,
        indices: Vec<usize>,
        ptrs: Vec<u64>,
        nbytes: Vec<usize>,
        stream: u64,
        callback: Option<Py<PyAny>>,
        slices: Option<Vec<Option<Slice>>>,
        unpermute: Option<Vec<u64>>,
        out: &str,
    ) -> PyResult<(f64, u64, Vec<(String, bool)>)> {
        let plan = self.sub_plan(py, &indices, slices.as_deref(), unpermute.as_deref())?.with_out(out_dtype(out)?);
        let addrs: Vec<usize> = ptrs.iter().map(|&p| p as usize).collect();
        check_buffers(&plan, &addrs, &nbytes)?;
        let loader = self.loader.clone();
        interruptible(py, move |control| {
            // SAFETY: the Python layer passes data pointers of contiguous
            // BF16 CUDA tensors on `device` (sizes checked above), alive until
            // this returns, and torch's current stream on that device.
            let (stats, notes) = unsafe { loader.load_device(device, &plan, &ptrs, stream, control, |i| report(&callback, indices[i]))? };
            Ok((stats.seconds, stats.src_bytes, notes.into_iter().map(|n| (n.text, n.fallback)).collect()))
        })
    }

    /// The quantized layout tensor `index`'s blocks map onto exactly:
    /// ("gptq", bits, group) (Q4_0: 4-bit, group 32; Q8_0: 8-bit, group
    /// 32), ("fp4", 4, group) (MXFP4: 32; NVFP4: 16), or None.
    fn repack_target(&self, index: usize) -> PyResult<Option<(&'static str, u32, usize)>> {
        let job = self.plan.jobs.get(index).ok_or_else(|| py_error("invalid_argument", format!("no tensor {index}")))?;
        Ok(repack::target(job))
    }

    /// Repack rows `slice.0..slice.1` (output features) and columns
    /// `slice.2..slice.3` (input features, whole groups) of tensor `index`
    /// into `layout` ("gptq" or "fp4") by bit movement only: `qptr` a
    /// contiguous buffer of `qbytes` bytes (GPTQ: int32 `[cols / pack,
    /// rows]`; FP4: uint8 `[rows, cols / 2]`), `sptr` one of `sbytes` bytes
    /// (GPTQ: fp16 `[cols / group, rows]`; FP4: uint8 `[rows, cols /
    /// group]`), in host memory, or on CUDA device `device` (ordered after
    /// `stream`, complete on return). Returns the file bytes read.
    #[pyo3(signature = (index, layout, slice, qptr, qbytes, sptr, sbytes, device = None, stream = 0))]
    #[allow(clippy::too_many_arguments)]
    fn repack(
        &self,
        py: Python<'_>,
        index: usize,
        layout: &str,
        slice: Slice,
        qptr: usize,
        qbytes: usize,
        sptr: usize,
        sbytes: usize,
        device: Option<usize>,
        stream: u64,
    ) -> PyResult<u64> {
        let job = self.plan.jobs.get(index).ok_or_else(|| py_error("invalid_argument", format!("no tensor {index}")))?.clone();
        let layout = repack::Layout::parse(layout)?;
        let out = repack::Out { layout, q: (qptr, qbytes), s: (sptr, sbytes) };
        out.check()?;
        let loader = self.loader.clone();
        interruptible(py, move |_| out.run(&loader, &job, slice.0..slice.1, slice.2..slice.3, device, stream))
    }
}

/// The output dtype the Python layer names ("bf16", "f16").
fn out_dtype(s: &str) -> PyResult<OutDtype> {
    OutDtype::parse(s).ok_or_else(|| py_error("invalid_argument", format!("dtype '{s}': use bf16 or f16")))
}

fn check_buffers(plan: &Plan, ptrs: &[usize], nbytes: &[usize]) -> PyResult<()> {
    if ptrs.len() != plan.jobs.len() || nbytes.len() != plan.jobs.len() {
        return Err(py_error("invalid_argument", "one buffer per tensor"));
    }
    for ((j, &p), &n) in plan.jobs.iter().zip(ptrs).zip(nbytes) {
        if n as u64 != j.out_bytes() || (p == 0 && n != 0) || p % 2 != 0 {
            return Err(py_error(
                "invalid_argument",
                format!("tensor '{}' needs a 2-byte aligned buffer of {} bytes, got {n} at {p:#x}", j.name, j.out_bytes()),
            ));
        }
    }
    Ok(())
}

/// (usable, reason): whether a CUDA load can run here, and why not.
#[pyfunction]
fn cuda_status() -> (bool, String) {
    match weightstream::cuda_device_count() {
        Ok(n) => (true, format!("{n} CUDA device(s)")),
        Err(e) => (false, e.to_string()),
    }
}

/// A load thread that panics, run through the same `interruptible` every
/// load uses: the tests' proof that a worker panic becomes a
/// WeightstreamError and never leaves Python waiting (issue 27's hang).
#[pyfunction]
fn _panic_in_a_load_thread(py: Python<'_>) -> PyResult<()> {
    interruptible(py, |_| -> weightstream::Result<()> { panic!("a load thread panicked on purpose (weightstream's tests)") })
}

/// How outputs name the checkpoint at `path`: a URL without its query
/// (a presigned URL's signature) or user info; a local path as given.
#[pyfunction]
fn source_name(path: PathBuf) -> String {
    weightstream::source_name(path)
}

/// (bytes, ranged GETs) every remote source of this process has fetched
/// from its store since the process started.
#[pyfunction]
fn fetched_total() -> (u64, u64) {
    let f = weightstream::remote::fetched_total();
    (f.bytes, f.requests)
}

/// Free the GPU staging rings this process keeps between loads (none on
/// a machine without a GPU); returns how many were freed.
#[pyfunction]
fn release_staging() -> usize {
    weightstream::release_staging()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Checkpoint>()?;
    m.add_function(wrap_pyfunction!(cuda_status, m)?)?;
    m.add_function(wrap_pyfunction!(_panic_in_a_load_thread, m)?)?;
    m.add_function(wrap_pyfunction!(source_name, m)?)?;
    m.add_function(wrap_pyfunction!(fetched_total, m)?)?;
    m.add_function(wrap_pyfunction!(release_staging, m)?)?;
    m.add_function(wrap_pyfunction!(side_files::read_side_files, m)?)?;
    m.add_function(wrap_pyfunction!(side_files::is_url, m)?)?;
    m.add("WeightstreamError", m.py().get_type::<WeightstreamError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
