//! weightstream: quantized checkpoints to BF16, on the GPU or the CPU.
//!
//! The data flows one way: [`open`] reads a checkpoint's headers into a
//! [`Catalog`]; a [`Plan`] says which tensors to produce from which bytes;
//! an executor ([`CpuExecutor`], or the CUDA one) produces them. A
//! [`Loader`] holds all three for a front (CLI, Python, C API): the
//! catalog, one [`Staging`] and executors made once.
//!
//! ```no_run
//! use weightstream::{Loader, SourceKind, Staging};
//! let loader = Loader::open("model-q4_0.gguf", SourceKind::Auto, Staging::default())?;
//! let plan = loader.plan(&Default::default())?;
//! loader.cpu()?.stream(loader.catalog(), &plan, Default::default(), |t| {
//!     println!("{} {:?}", t.name, t.shape);
//!     Ok(())
//! })?;
//! # Ok::<(), weightstream::Error>(())
//! ```

mod access;
mod alloc;
mod control;
pub mod convert;
pub mod convert_gguf;
pub mod convert_output;
pub mod cpu;
pub mod device;
pub mod error;
pub mod gpu;
pub mod loader;
mod output_lock;
mod overlapped_write;
pub mod plan;
pub mod repack;
pub mod staging;
pub mod tensor;

pub use control::{Control, Progress};
pub use convert::{convert, convert_catalog};
pub use convert_output::{ConvertOptions, ConvertReport};
pub use cpu::CpuExecutor;
pub use device::{cuda_device_count, Device, DeviceChoice};
pub use error::{Error, Result};
pub use gpu::{DeviceTensor, GpuExecutor, StorageNote};
pub use loader::Loader;
pub use plan::{Chunk, Job, Plan, PlanOptions};
pub use staging::Staging;
pub use tensor::{HostTensor, LoadStats, Phases};

/// Free the GPU staging rings this process keeps for later loads (a dropped
/// Loader's ring is kept so the next need not pin again; docs/storage.md);
/// returns how many were freed.
pub fn release_staging() -> usize {
    weightstream_cuda::release_rings()
}
pub use weightstream_cuda::CudaError;
pub use weightstream_dequant as dequant;
pub use weightstream_format as format;
pub use weightstream_format::{Catalog, Encoding, Format, SourceKind, TensorInfo};
pub use weightstream_hf2gguf as hf2gguf;
pub use weightstream_kernels as kernels;
#[cfg(feature = "remote")]
pub use weightstream_remote as remote;

/// Read a checkpoint's headers: a GGUF file, a safetensors file, or a
/// directory of shards, local or in object storage (`s3://bucket/key`,
/// `s3://bucket/prefix/`, `gs://`, `az://`, `http(s)://...`; the `remote` feature, on by
/// default, and crate weightstream-remote). Touches only
/// headers. Tensor data will be read with
/// positioned reads (see [`open_with_source`] for the alternatives).
pub fn open(path: impl AsRef<std::path::Path>) -> Result<Catalog> {
    open_with_source(path, SourceKind::default())
}

/// How outputs name the checkpoint at `path` (CLI text and JSON, Python's
/// `Checkpoint.path`, log lines): a URL without its query string, fragment
/// or user info, since a presigned URL's query is its credential; a local
/// path as given.
pub fn source_name(path: impl AsRef<std::path::Path>) -> String {
    let path = path.as_ref();
    #[cfg(feature = "remote")]
    if let Some(url) = path.to_str().filter(|s| remote::is_url(s)) {
        return remote::shown(url);
    }
    path.display().to_string()
}

/// [`open`], reading local tensor data with `source` (a URL's is always
/// read with ranged GETs, settings from `remote::RemoteOptions::from_env`).
pub fn open_with_source(path: impl AsRef<std::path::Path>, source: SourceKind) -> Result<Catalog> {
    open_with_options(path, source, format::OpenOptions::default())
}

/// [`open_with_source`], accepting what `opts` allows (a GGUF file whose
/// metadata declares a transform weightstream does not apply, ignored),
/// for local paths and URLs alike.
pub fn open_with_options(path: impl AsRef<std::path::Path>, source: SourceKind, opts: format::OpenOptions) -> Result<Catalog> {
    open_with_cache(path, source, opts, None)
}

/// [`open_with_options`], a URL's bytes read through the local cache in
/// the directory `cache` (`None`: `WEIGHTSTREAM_CACHE_DIR`'s, if set;
/// `remote::cache`). A local path ignores it.
pub fn open_with_cache(
    path: impl AsRef<std::path::Path>,
    source: SourceKind,
    opts: format::OpenOptions,
    cache: Option<&std::path::Path>,
) -> Result<Catalog> {
    open_cancellable(path, source, opts, cache, None)
}

/// [`open_with_cache`], a URL's requests (its listing, HEADs, header
/// reads, and later its data reads) stopped once `cancel` is set: the
/// CLI's Ctrl-C/SIGTERM flag, the Python binding's KeyboardInterrupt. The
/// open then fails with [`Error::Cancelled`]. A local path ignores it
/// (opening a file waits on no server).
pub fn open_cancellable(
    path: impl AsRef<std::path::Path>,
    source: SourceKind,
    opts: format::OpenOptions,
    cache: Option<&std::path::Path>,
    cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
) -> Result<Catalog> {
    let path = path.as_ref();
    #[cfg(not(feature = "remote"))]
    let _ = (cache, cancel);
    #[cfg(feature = "remote")]
    if let Some(url) = path.to_str().filter(|s| remote::is_url(s)) {
        let mut remote_opts = remote::RemoteOptions::from_env().map_err(Error::InvalidArgument)?;
        if let Some(dir) = cache {
            remote_opts.cache = Some(remote::cache::CacheConfig::at(dir).map_err(Error::InvalidArgument)?);
        }
        remote_opts.cancel = cancel;
        return remote::open(url, &remote_opts, opts).map_err(|e| match e {
            remote::OpenError::Remote(r) => Error::from_remote(r),
            remote::OpenError::Format(f) => Error::Format(f),
        });
    }
    Ok(weightstream_format::open_with_options(path, &|p: &std::path::Path| source.open(p), opts)?)
}
