//! weightstream-format: GGUF and safetensors readers.
//!
//! `open(path)` reads a checkpoint's headers (a GGUF file, a safetensors
//! file, or a directory of shards) into a validated [`Catalog`]: every
//! tensor's dtype, shape, byte range and, for FP8 weights, its scale. Nothing
//! here reads tensor data, and no input can make it panic, read out of
//! bounds, or allocate much beyond the size of the headers it reads.

pub mod block;
// Generated (scripts/gen_block_tables.py, checked in CI): left as generated.
#[rustfmt::skip]
pub mod block_tables;
pub mod catalog;
mod cursor;
pub mod error;
pub mod fp8;
pub mod gguf;
pub mod open;
pub mod packed;
pub mod quant_config;
pub mod safetensors;

pub use block::{BlockFormat, BlockLayout};
pub use catalog::{
    supported_encodings, Catalog, CatalogFile, Dtype, Encoding, Format, Fp8Format, GlobalOp, GlobalScale, Metadata, Packed, Role,
    ScaleDtype, ScaleKind, ScaleLayout, ScaleRef, TensorInfo,
};
pub use error::{ErrorKind, FormatError, Result};
pub use open::{mmap_opener, open, open_kind, open_with, safetensors_catalog, SourceOpener};
pub use packed::{PackedScheme, E2M1_VALUES};
// Byte sources live in weightstream-io; re-exported so format users need one import.
pub use weightstream_io::{self as io, ByteSource, FileSource, MemorySource, MmapSource, SharedSource, SourceKind};
