//! `ws_checkpoint`: an opened checkpoint (its `Loader`: catalog, staging,
//! executors made once) and the plan of its tensors.

use std::collections::HashMap;
use std::ffi::{c_int, CString};
use std::path::Path;
use std::sync::Arc;

use weightstream::dequant::OutDtype;
use weightstream::format::SourceKind;
use weightstream::{Catalog, Encoding, GpuExecutor, Loader, Plan, PlanOptions, Staging};

use crate::abi::{Failure, WsStatus, WS_DTYPE_BF16, WS_DTYPE_F16, WS_DTYPE_F32};

/// One listed tensor.
pub(crate) struct Entry {
    pub name: CString,
    pub dtype: CString,
    pub shape: Vec<u64>,
    pub n_elems: u64,
    /// Index in `Catalog::tensors`.
    pub tensor: usize,
    /// Index in `Plan::jobs`, when it can become BF16.
    pub job: Option<usize>,
    pub encoding: Option<Encoding>,
}

pub struct Checkpoint {
    pub(crate) loader: Loader,
    pub(crate) plan: Plan,
    pub(crate) entries: Vec<Entry>,
    by_name: HashMap<String, usize>,
    /// ws_sources: one line per file, "<path>: <source>[ (<why>)]".
    pub(crate) sources: CString,
    /// ws_hf_gguf_metadata's result, built on first use.
    pub(crate) hf: std::sync::Mutex<Option<Arc<crate::gguf_meta::CMeta>>>,
}

impl Checkpoint {
    pub(crate) fn open(
        path: &Path,
        source: SourceKind,
        threads: Option<usize>,
        slots: Option<usize>,
        slot_bytes: Option<usize>,
        readers: Option<usize>,
        ignore_transforms: bool,
    ) -> Result<Checkpoint, Failure> {
        // The staging options mean the same on the CPU: read-ahead threads, buffers, bytes per read.
        let cat = weightstream::open_with_options(path, source, weightstream::format::OpenOptions { ignore_transforms })?;
        // Before llama.cpp (through the adapter) can see a count it aborts on.
        crate::experts::check(&cat)?;
        let loader = Loader::new(std::sync::Arc::new(cat), Staging { threads, readers, slots, slot_bytes, ..Default::default() });
        let cat = loader.catalog().clone();
        let plan = loader.plan(&PlanOptions { names: None, skip_unsupported: true, ..Default::default() })?;
        let job_of: HashMap<usize, usize> = plan.jobs.iter().enumerate().map(|(j, job)| (job.tensor, j)).collect();
        let c_string = |s: &str| CString::new(s).map_err(|_| Failure::new(WsStatus::Format, format!("tensor name {s:?} holds a NUL byte")));
        let mut entries = Vec::new();
        for (i, t) in cat.data_tensors() {
            entries.push(Entry {
                // A packed weight is listed as the BF16 tensor it becomes.
                name: c_string(t.out_name())?,
                dtype: c_string(t.dtype.name())?,
                shape: t.out_shape().to_vec(),
                n_elems: t.out_elems(),
                tensor: i,
                job: job_of.get(&i).copied(),
                encoding: t.encoding().ok(),
            });
        }
        let by_name = entries.iter().enumerate().map(|(i, e)| (e.name.to_string_lossy().into_owned(), i)).collect();
        // Made now, so that bad thread options fail ws_open rather than the first load.
        loader.cpu()?;
        let sources = cat
            .files
            .iter()
            .map(|f| match f.source.note() {
                Some(n) => format!("{}: {} ({n})\n", f.path.display(), f.source.name()),
                None => format!("{}: {}\n", f.path.display(), f.source.name()),
            })
            .collect::<String>();
        let sources = c_string(&sources)?;
        Ok(Checkpoint { loader, plan, entries, by_name, sources, hf: Default::default() })
    }

    pub(crate) fn cat(&self) -> &Catalog {
        self.loader.catalog()
    }

    pub(crate) fn entry(&self, index: usize) -> Result<&Entry, Failure> {
        self.entries
            .get(index)
            .ok_or_else(|| Failure::new(WsStatus::NotFound, format!("no tensor {index}: the checkpoint has {}", self.entries.len())))
    }

    pub(crate) fn find(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// How tensor `index` is produced as `dtype`, and its size in bytes.
    pub(crate) fn output(&self, index: usize, dtype: c_int) -> Result<(Output, usize), Failure> {
        let e = self.entry(index)?;
        let n = e.n_elems as usize;
        let unsupported = |what: &str| {
            Failure::new(
                WsStatus::Unsupported,
                format!("tensor '{}' ({}) cannot be produced as {what}", e.name.to_string_lossy(), e.dtype.to_string_lossy()),
            )
        };
        match dtype {
            WS_DTYPE_BF16 => match e.job {
                Some(j) => Ok((Output::Dequant(j, OutDtype::BF16), n * 2)),
                None => Err(unsupported("BF16")),
            },
            // Every loadable tensor, each value rounded once to float16
            // (an F16 tensor's bytes come back as stored).
            WS_DTYPE_F16 => match e.job {
                Some(j) => Ok((Output::Dequant(j, OutDtype::F16), n * 2)),
                None => Err(unsupported("F16")),
            },
            WS_DTYPE_F32 if e.encoding == Some(Encoding::F32) => Ok((Output::Raw(e.tensor), n * 4)),
            WS_DTYPE_F32 => Err(unsupported("F32 (only tensors stored as F32 are copied as F32)")),
            other => Err(Failure::new(WsStatus::InvalidArgument, format!("unknown ws_dtype {other}"))),
        }
    }

    pub(crate) fn nbytes(&self, index: usize, dtype: c_int) -> Option<usize> {
        self.output(index, dtype).ok().map(|(_, n)| n)
    }

    /// The executor for CUDA device `ordinal`, made on first use.
    pub(crate) fn gpu(&self, ordinal: usize) -> Result<Arc<GpuExecutor>, Failure> {
        Ok(self.loader.gpu(ordinal)?)
    }
}

/// How one request is served.
#[derive(Clone, Copy)]
pub(crate) enum Output {
    /// Dequantize plan job `j` to BF16 or float16.
    Dequant(usize, OutDtype),
    /// Copy catalog tensor `t`'s stored bytes.
    Raw(usize),
}
