//! safetensors: single files and sharded checkpoint directories, read; and
//! BF16 files written (`writer`, what `convert` produces).

pub mod dtype;
pub mod header;
pub mod index;
mod strict_json;
pub mod writer;

pub use dtype::StDtype;
pub use header::{read_header, StHeader, StTensorInfo};
