//! safetensors: single files and sharded checkpoint directories.

pub mod dtype;
pub mod header;
pub mod index;

pub use dtype::StDtype;
pub use header::{read_header, StHeader, StTensorInfo};
