//! Typed refusals: every one names the file and the field (or tensor) it
//! is about, and says why, before anything is sized from the value.

/// What kind of refusal: the front maps these onto its own error kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A file or field is malformed, out of range, or disagrees with another.
    Format,
    /// Well-formed, but something llama.cpp (or this converter) does not take.
    Unsupported,
    /// A file or tensor the conversion needs is missing.
    NotFound,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {field}: {why}")]
pub struct HfError {
    pub kind: Kind,
    /// `config.json`, `tokenizer.json`, ..., or the tensor list (`tensors`).
    pub file: String,
    /// The field (a dotted path) or tensor name.
    pub field: String,
    pub why: String,
}

pub type Result<T> = std::result::Result<T, HfError>;

pub(crate) fn format_err(file: &str, field: &str, why: impl Into<String>) -> HfError {
    HfError { kind: Kind::Format, file: file.into(), field: field.into(), why: why.into() }
}

pub(crate) fn unsupported(file: &str, field: &str, why: impl Into<String>) -> HfError {
    HfError { kind: Kind::Unsupported, file: file.into(), field: field.into(), why: why.into() }
}

pub(crate) fn not_found(file: &str, field: &str, why: impl Into<String>) -> HfError {
    HfError { kind: Kind::NotFound, file: file.into(), field: field.into(), why: why.into() }
}

/// A JSON file that does not parse (or not into the shape expected).
pub(crate) fn json_err(file: &str, e: serde_json::Error) -> HfError {
    format_err(file, "(whole file)", format!("not the JSON expected: {e}"))
}
