//! safetensors: single files and sharded checkpoint directories.

pub mod dtype;
pub mod header;
pub mod index;
mod strict_json;

pub use dtype::StDtype;
pub use header::{read_header, StHeader, StTensorInfo};
