//! libweightstream_c: the C ABI declared in `include/weightstream.h`.
//!
//! Every exported function validates its arguments (enums arrive as plain
//! integers: an out-of-range value must not become an invalid Rust enum),
//! runs under `catch_unwind` so that no panic crosses into C, and reports
//! failures as a status code plus a per-thread message (`ws_last_error`).

mod abi;
mod checkpoint;
mod experts;
mod ffi;
mod ffi_gguf;
mod gguf_meta;
mod load;

pub use abi::*;
pub use ffi::*;
pub use ffi_gguf::*;
