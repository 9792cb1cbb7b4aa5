//! The facade's error: a format error, or a failure while loading.

use std::path::PathBuf;

use weightstream_format::FormatError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Format(#[from] FormatError),
    #[error("{file}: tensor '{tensor}': {reason}")]
    Unsupported { file: PathBuf, tensor: String, reason: String },
    #[error("{0}")]
    Other(String),
}

impl Error {
    /// Stable machine-readable kind, for `--json` output.
    pub fn code(&self) -> &'static str {
        match self {
            Error::Format(e) => e.kind.code(),
            Error::Unsupported { .. } => "unsupported",
            Error::Other(_) => "other",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
