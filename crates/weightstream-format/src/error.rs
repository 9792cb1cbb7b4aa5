//! Typed errors for everything a reader can reject.
//!
//! Every error names the file, the tensor when one is involved, and the byte
//! offset where the problem was found, so a user holding a broken checkpoint
//! can tell exactly which bytes are wrong. `ErrorKind::code` is a stable,
//! machine-readable name used by `--json` output and by the malformed-corpus
//! tests.

use std::fmt;
use std::path::{Path, PathBuf};

/// What went wrong, independent of where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ErrorKind {
    #[error("I/O error: {0}")]
    Io(String),
    #[error("file is truncated: needed {needed} bytes, only {available} available")]
    Truncated { needed: u64, available: u64 },
    #[error("not a {format} file: bad magic")]
    BadMagic { format: &'static str },
    #[error("GGUF file is big-endian; only little-endian files are supported")]
    BigEndian,
    #[error("unsupported GGUF version {0} (supported: 2, 3)")]
    UnsupportedVersion(u32),
    #[error("{what} is {value}, above the limit of {limit}")]
    LimitExceeded { what: &'static str, value: u64, limit: u64 },
    #[error("string is not valid UTF-8")]
    InvalidUtf8,
    #[error("unknown GGUF metadata value type {0}")]
    UnknownValueType(u32),
    #[error("bad metadata: {0}")]
    BadMetadata(String),
    #[error("alignment {0} is not a non-zero power of two")]
    BadAlignment(u64),
    #[error("tensor has {dims} dimensions (at most {max})")]
    TooManyDims { dims: u64, max: u64 },
    #[error("shape {0:?} overflows 64-bit size arithmetic")]
    ShapeOverflow(Vec<u64>),
    /// The id, and the fork known to use it (gguf::lookalike::fork_using).
    #[error("unknown ggml type id {id}{note}", id = .0, note = .1.map(|f| format!(" (used by a fork: {f})")).unwrap_or_default())]
    UnknownGgmlType(u32, Option<&'static str>),
    #[error("holds {found} bytes where ggml type {type_id} ({dtype}) needs {expected}{}", .fork.map(|f| format!(": the size of {f}")).unwrap_or_default())]
    TypeSizeMismatch { type_id: u32, dtype: &'static str, expected: u64, found: u64, fork: Option<&'static str> },
    #[error("metadata key '{key}' declares {what}, which weightstream does not apply (the weights would load wrong); to load anyway, ignoring it: --ignore-transform (CLI), ignore_transforms=True (Python), ws_options.ignore_transforms (C), \"ignore_transforms\": true (vLLM extra config)")]
    WeightTransform { key: String, what: &'static str },
    #[error("innermost dimension {dim} is not a multiple of the {dtype} block size {block}")]
    BlockMismatch { dtype: String, dim: u64, block: u64 },
    #[error("byte range {start}..{end} lies outside the {limit}-byte {region}")]
    OutOfBounds { start: u64, end: u64, limit: u64, region: &'static str },
    #[error("tensor data at offset {offset} (+{nbytes} bytes) from the data section at byte {base} lies beyond 2^64 bytes")]
    OffsetOverflow { base: u64, offset: u64, nbytes: u64 },
    #[error("offset {offset} is not a multiple of the alignment {alignment}")]
    Misaligned { offset: u64, alignment: u64 },
    #[error("duplicate tensor name")]
    DuplicateTensor,
    #[error("tensor data overlaps tensor '{other}'")]
    Overlap { other: String },
    #[error("safetensors header is not valid JSON: {0}")]
    BadJson(String),
    #[error("safetensors header is not a JSON object")]
    NotAnObject,
    #[error("unknown dtype '{0}'")]
    BadDtype(String),
    #[error("data size mismatch: shape and dtype need {expected} bytes, range holds {actual}")]
    SizeMismatch { expected: u64, actual: u64 },
    #[error("bad tensor entry: {0}")]
    BadTensorEntry(String),
    #[error("__metadata__ must map strings to strings: {0}")]
    BadSafetensorsMetadata(String),
    #[error("scale '{scale}' does not fit weight '{weight}': {reason}")]
    ScaleMismatch { weight: String, scale: String, reason: String },
    #[error("packed weight '{weight}' fits no documented layout: {reason}")]
    BadPacked { weight: String, reason: String },
    #[error("{config} and the tensors disagree about '{weight}': {reason}")]
    ConfigMismatch { config: String, weight: String, reason: String },
    #[error("bad checkpoint index: {0}")]
    BadIndex(String),
    #[error("bad config.json: {0}")]
    BadConfig(String),
    #[error("no checkpoint found: {0}")]
    NoCheckpoint(String),
    #[error("GGUF split set: {0}")]
    BadSplit(String),
    #[error("JSON key {0} appears twice in one object")]
    DuplicateKey(String),
    #[error("{0} is not a regular file (a FIFO, socket or device); refusing to read it")]
    NotRegularFile(String),
    /// A checkpoint feature that changes what the weights compute and that
    /// no rule folds into BF16 (issue 40, item 12).
    #[error("{feature} ({what}) is not folded into the BF16 weights, which would load as if it were absent")]
    UnfoldedFeature { feature: String, what: String },
}

impl ErrorKind {
    /// Stable machine-readable name of the error kind (for `--json` and tests).
    pub fn code(&self) -> &'static str {
        match self {
            ErrorKind::Io(_) => "io",
            ErrorKind::Truncated { .. } => "truncated",
            ErrorKind::BadMagic { .. } => "bad_magic",
            ErrorKind::BigEndian => "big_endian",
            ErrorKind::UnsupportedVersion(_) => "unsupported_version",
            ErrorKind::LimitExceeded { .. } => "limit_exceeded",
            ErrorKind::InvalidUtf8 => "invalid_utf8",
            ErrorKind::UnknownValueType(_) => "unknown_value_type",
            ErrorKind::BadMetadata(_) => "bad_metadata",
            ErrorKind::BadAlignment(_) => "bad_alignment",
            ErrorKind::TooManyDims { .. } => "too_many_dims",
            ErrorKind::ShapeOverflow(_) => "shape_overflow",
            ErrorKind::UnknownGgmlType(..) => "unknown_ggml_type",
            ErrorKind::TypeSizeMismatch { .. } => "type_size_mismatch",
            ErrorKind::WeightTransform { .. } => "weight_transform",
            ErrorKind::BlockMismatch { .. } => "block_mismatch",
            ErrorKind::OutOfBounds { .. } | ErrorKind::OffsetOverflow { .. } => "out_of_bounds",
            ErrorKind::Misaligned { .. } => "misaligned",
            ErrorKind::DuplicateTensor => "duplicate_tensor",
            ErrorKind::Overlap { .. } => "overlap",
            ErrorKind::BadJson(_) => "bad_json",
            ErrorKind::NotAnObject => "not_an_object",
            ErrorKind::BadDtype(_) => "bad_dtype",
            ErrorKind::SizeMismatch { .. } => "size_mismatch",
            ErrorKind::BadTensorEntry(_) => "bad_tensor_entry",
            ErrorKind::BadSafetensorsMetadata(_) => "bad_safetensors_metadata",
            ErrorKind::ScaleMismatch { .. } => "scale_mismatch",
            ErrorKind::BadPacked { .. } => "bad_packed",
            ErrorKind::ConfigMismatch { .. } => "config_mismatch",
            ErrorKind::BadIndex(_) => "bad_index",
            ErrorKind::BadConfig(_) => "bad_config",
            ErrorKind::UnfoldedFeature { .. } => "unfolded_feature",
            ErrorKind::NoCheckpoint(_) => "no_checkpoint",
            ErrorKind::BadSplit(_) => "bad_split",
            ErrorKind::DuplicateKey(_) => "duplicate_key",
            ErrorKind::NotRegularFile(_) => "not_a_file",
        }
    }
}

/// An error located in a file: which file, which tensor, which byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatError {
    pub file: PathBuf,
    pub tensor: Option<String>,
    pub offset: Option<u64>,
    pub kind: ErrorKind,
}

impl FormatError {
    pub fn new(file: &Path, offset: Option<u64>, kind: ErrorKind) -> Self {
        FormatError { file: file.to_path_buf(), tensor: None, offset, kind }
    }

    pub fn at(file: &Path, offset: u64, kind: ErrorKind) -> Self {
        Self::new(file, Some(offset), kind)
    }

    pub fn with_tensor(mut self, name: &str) -> Self {
        self.tensor = Some(name.to_string());
        self
    }

    pub fn io(file: &Path, offset: Option<u64>, err: &std::io::Error) -> Self {
        Self::new(file, offset, ErrorKind::Io(err.to_string()))
    }
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(t) = &self.tensor {
            write!(f, ": tensor '{t}'")?;
        }
        if let Some(o) = self.offset {
            write!(f, ": at byte {o}")?;
        }
        write!(f, ": {}", self.kind)
    }
}

impl std::error::Error for FormatError {}

pub type Result<T, E = FormatError> = std::result::Result<T, E>;
