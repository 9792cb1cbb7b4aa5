//! The facade's error: a format error, or a failure while loading.

use std::path::PathBuf;

use weightstream_dequant::DequantError;
use weightstream_format::FormatError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Format(#[from] FormatError),
    #[error("{file}: tensor '{tensor}': at byte {offset}: {reason}")]
    Unsupported { file: PathBuf, tensor: String, offset: u64, reason: String },
    #[error("{file}: tensor '{tensor}': at byte {offset}: {reason}")]
    ReservedName { file: PathBuf, tensor: String, offset: u64, reason: String },
    #[error("{file}: tensor '{tensor}': at byte {offset}: read failed: {source}")]
    Read { file: PathBuf, tensor: String, offset: u64, source: std::io::Error },
    /// The kernel refused a chunk (a layout the open-time checks let
    /// through): where the chunk's bytes start.
    #[error("{file}: tensor '{tensor}': at byte {offset}: cannot dequantize: {source}")]
    Dequant { file: PathBuf, tensor: String, offset: u64, source: DequantError },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("no tensor named '{0}' in the checkpoint")]
    NoSuchTensor(String),
    #[error("tensor '{tensor}' ({}x{} matrix): rows {}..{}, columns {}..{}: {why}", shape.0, shape.1, rows.start, rows.end, cols.start, cols.end)]
    BadSlice { tensor: String, rows: std::ops::Range<u64>, cols: std::ops::Range<u64>, shape: (u64, u64), why: String },
    /// The output of a convert exists and replacing it was not asked for.
    #[error("{} exists", path.display())]
    OutputExists { path: PathBuf },
    /// A single-file convert output above the shard size limit.
    #[error("{}: the BF16 output is {bytes} bytes, above the shard size limit of {max}; give a directory as the output to shard it", path.display())]
    OutputTooLarge { path: PathBuf, bytes: u64, max: u64 },
    #[error("out of host memory: tensor '{tensor}' needs {bytes} bytes")]
    HostMemory { tensor: String, bytes: u64 },
    /// A request that cannot be served as asked (destination sizes,
    /// counts, option limits, a device name): the caller's to fix.
    #[error("{0}")]
    InvalidArgument(String),
    /// Another process holds the output a convert wants.
    #[error("{}: {reason}", path.display())]
    OutputBusy { path: PathBuf, reason: String },
    /// A scale tensor whose bytes are not whole values of its dtype.
    #[error("{file}: tensor '{tensor}': at byte {offset}: bad scale: {reason}")]
    BadScale { file: PathBuf, tensor: String, offset: u64, reason: String },
    /// The host could not start the CPU threads.
    #[error("cannot start CPU threads: {0}")]
    Threads(String),
    /// A caller's callback failed (a Python exception, say): the load stopped.
    #[error("callback failed: {0}")]
    Callback(String),
    /// Tensors a load produced differ from the scalar CPU reference (--verify).
    #[error("{tensors} tensor(s) differ from the scalar reference")]
    VerifyMismatch { tensors: usize },
    #[error("cancelled")]
    Cancelled,
    /// A Hugging Face checkpoint that cannot become llama.cpp's metadata:
    /// the file and field (or tensor) it is about, and why.
    #[error("{}: {source}", dir.display())]
    HfMetadata { dir: PathBuf, source: weightstream_hf2gguf::HfError },
    /// A device failure, as the device crate typed it (out of memory, a
    /// driver call, no usable GPU, ...): fronts match on the variant.
    #[error(transparent)]
    Device(#[from] weightstream_cuda::CudaError),
    /// Object storage: the URL, the store's answer, or a changed object.
    #[cfg(feature = "remote")]
    #[error(transparent)]
    Remote(#[from] weightstream_remote::RemoteError),
}

impl Error {
    /// A store's failure, a request stopped on the caller's request being
    /// the `Cancelled` every other stopped operation gives.
    #[cfg(feature = "remote")]
    pub fn from_remote(r: weightstream_remote::RemoteError) -> Error {
        match r.kind {
            weightstream_remote::RemoteErrorKind::Cancelled => Error::Cancelled,
            _ => Error::Remote(r),
        }
    }

    /// Where it happened, when the error knows: (file, tensor, byte offset).
    /// Every front reports these the same way (`--json`, Python attributes).
    pub fn location(&self) -> (Option<&std::path::Path>, Option<&str>, Option<u64>) {
        match self {
            Error::Format(f) => (Some(&f.file), f.tensor.as_deref(), f.offset),
            Error::Unsupported { file, tensor, offset, .. }
            | Error::Read { file, tensor, offset, .. }
            | Error::ReservedName { file, tensor, offset, .. }
            | Error::Dequant { file, tensor, offset, .. }
            | Error::BadScale { file, tensor, offset, .. } => (Some(file), Some(tensor), Some(*offset)),
            Error::HostMemory { tensor, .. } | Error::BadSlice { tensor, .. } => (None, Some(tensor), None),
            // The tensor list's errors name a tensor; the files', a field.
            Error::HfMetadata { dir, source } if source.file == "tensors" => (Some(dir), Some(&source.field), None),
            Error::HfMetadata { dir, .. } => (Some(dir), None, None),
            Error::NoSuchTensor(tensor) => (None, Some(tensor), None),
            Error::Io { path, .. } | Error::OutputExists { path } | Error::OutputTooLarge { path, .. } | Error::OutputBusy { path, .. } => {
                (Some(path), None, None)
            }
            #[cfg(feature = "remote")]
            Error::Remote(r) => (Some(std::path::Path::new(&r.object)), None, None),
            Error::Cancelled
            | Error::Device(_)
            | Error::InvalidArgument(_)
            | Error::Threads(_)
            | Error::Callback(_)
            | Error::VerifyMismatch { .. } => (None, None, None),
        }
    }

    /// Stable machine-readable kind, for `--json` output.
    pub fn code(&self) -> &'static str {
        match self {
            Error::Format(e) => e.kind.code(),
            Error::Unsupported { .. } => "unsupported",
            // A read of an object store says which failure it was.
            #[cfg(feature = "remote")]
            Error::Read { source, .. } => weightstream_remote::RemoteError::from_io(source).map_or("read", |r| r.code()),
            #[cfg(not(feature = "remote"))]
            Error::Read { .. } => "read",
            #[cfg(feature = "remote")]
            Error::Remote(r) => r.code(),
            Error::ReservedName { .. } => "reserved_name",
            Error::Dequant { .. } => "dequant",
            Error::Io { .. } => "io",
            Error::NoSuchTensor(_) => "no_such_tensor",
            Error::BadSlice { .. } => "bad_slice",
            Error::HostMemory { .. } => "host_memory",
            Error::OutputExists { .. } => "output_exists",
            Error::OutputTooLarge { .. } => "output_too_large",
            Error::Cancelled => "cancelled",
            Error::Device(_) => "device",
            Error::InvalidArgument(_) => "invalid_argument",
            Error::OutputBusy { .. } => "output_busy",
            Error::BadScale { .. } => "bad_scale",
            Error::Threads(_) => "threads",
            Error::Callback(_) => "callback",
            Error::VerifyMismatch { .. } => "verify_mismatch",
            Error::HfMetadata { source, .. } => match source.kind {
                weightstream_hf2gguf::Kind::Unsupported => "unsupported",
                weightstream_hf2gguf::Kind::Format | weightstream_hf2gguf::Kind::NotFound => "bad_hf_checkpoint",
            },
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
