//! weightstream-format: GGUF and safetensors readers.
//!
//! `open(path)` reads a checkpoint's headers (a GGUF file, a safetensors
//! file, or a directory of shards) into a validated [`Catalog`]: every
//! tensor's dtype, shape, byte range and, for FP8 weights, its scale. Nothing
//! here reads tensor data, and no input can make it panic, read out of
//! bounds, or allocate much beyond the size of the headers it reads.

pub mod catalog;
mod cursor;
pub mod error;
pub mod features;
pub mod fp8;
pub mod gguf;
pub mod listing;
pub mod open;
pub mod packed;
pub mod quant_config;
pub mod safetensors;

pub use catalog::{
    supported_encodings, Catalog, CatalogFile, Dtype, Format, GlobalScale, Metadata, Packed, PackedScheme, Role, ScaleRef, TensorInfo,
};
pub use error::{ErrorKind, FormatError, Result};
pub use listing::{Entry as ListingEntry, Listing, LocalDir};
pub use open::{mmap_opener, open, open_kind, open_listing, open_with, open_with_options, safetensors_catalog, OpenOptions, SourceOpener};
// The vocabulary (block formats, encodings, scale layouts) lives in
// weightstream-blocks; re-exported so format users need one import.
pub use weightstream_blocks::{
    self as blocks, block, block_tables, BlockFormat, BlockLayout, Encoding, Fp8Format, GlobalOp, ScaleDtype, ScaleKind, ScaleLayout,
    E2M1_VALUES,
};
// Byte sources live in weightstream-io; re-exported so format users need one import.
pub use weightstream_io::{self as io, ByteSource, FileSource, MemorySource, MmapSource, SharedSource, SourceKind};
