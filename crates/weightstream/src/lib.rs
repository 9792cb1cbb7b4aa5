//! weightstream: quantized checkpoints to BF16, on the GPU or the CPU.
//!
//! The one API users call: [`open`] a checkpoint, [`plan`](plan::Plan) what to
//! load, and load it. See `docs/` for the data flow.

pub mod error;

pub use error::{Error, Result};
pub use weightstream_dequant as dequant;
pub use weightstream_format as format;
pub use weightstream_format::{Catalog, Encoding, Format, TensorInfo};

/// Read a checkpoint's headers: a GGUF file, a safetensors file, or a
/// directory of shards. Touches only headers.
pub fn open(path: impl AsRef<std::path::Path>) -> Result<Catalog> {
    Ok(weightstream_format::open(path.as_ref())?)
}
