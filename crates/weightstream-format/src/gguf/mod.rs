//! GGUF (llama.cpp's format), versions 2 and 3, little-endian.

pub mod lookalike;
pub mod metadata;
pub mod reader;
pub mod split;
pub mod strings;
pub mod types;
pub mod writer;

pub use metadata::{MetadataArray, MetadataValue};
pub use reader::{read_header, GgufHeader, GgufTensorInfo};
pub use strings::StringArray;
pub use types::GgmlType;

/// ggml's GGML_MAX_DIMS.
pub const MAX_DIMS: u64 = 4;
/// ggml's GGML_MAX_NAME is 64 bytes including the terminating NUL.
pub const MAX_TENSOR_NAME_LEN: u64 = 63;
