//! The `#[repr(C)]` types and constants of weightstream.h, and how library
//! errors become a status and a message. Shared by the exported functions
//! (ffi.rs) and the checkpoint they serve (checkpoint.rs, load.rs), which
//! is why they live apart from both: neither imports the other for them.

use std::ffi::{c_char, c_int, c_void};

/// `ws_status`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WsStatus {
    Ok = 0,
    InvalidArgument = 1,
    Format = 2,
    Unsupported = 3,
    Io = 4,
    NotFound = 5,
    Device = 6,
    OutOfMemory = 7,
    Cancelled = 8,
    Internal = 9,
}

pub const WS_DTYPE_BF16: c_int = 0;
pub const WS_DTYPE_F16: c_int = 1;
pub const WS_DTYPE_F32: c_int = 2;
pub const WS_MEMORY_HOST: c_int = 0;
pub const WS_MEMORY_CUDA: c_int = 1;
pub const WS_MAX_DIMS: usize = 16;
pub const WS_API_VERSION: u32 = 1;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct WsDestination {
    pub data: *mut c_void,
    pub size: usize,
    pub memory: c_int,
    pub device: c_int,
    pub stream: *mut c_void,
}

#[repr(C)]
pub struct WsTensorInfo {
    pub name: *const c_char,
    pub dtype: *const c_char,
    pub n_dims: u32,
    pub shape: [u64; WS_MAX_DIMS],
    pub n_elements: u64,
    pub loadable: bool,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct WsLoadRequest {
    pub index: usize,
    pub dtype: c_int,
    pub dst: WsDestination,
}

#[repr(C)]
pub struct WsOptions {
    pub struct_size: usize,
    pub source: *const c_char,
    pub threads: c_int,
    pub staging_slots: c_int,
    pub staging_bytes: usize,
    pub readers: c_int,
    /// Non-zero: open a GGUF file whose metadata declares a transform of the
    /// weights weightstream does not apply, ignoring it. It fills what was
    /// the tail padding, so `sizeof(ws_options)` is unchanged.
    pub ignore_transforms: c_int,
}

pub type WsProgressCallback = Option<unsafe extern "C" fn(progress: f32, user_data: *mut c_void) -> bool>;

/// A failure on its way to C: the status and the message.
pub(crate) struct Failure {
    pub status: WsStatus,
    pub message: String,
}

impl Failure {
    pub fn new(status: WsStatus, message: impl Into<String>) -> Failure {
        Failure { status, message: message.into() }
    }
}

impl From<weightstream::Error> for Failure {
    fn from(e: weightstream::Error) -> Failure {
        use weightstream::Error as E;
        let status = match &e {
            E::Format(f) if matches!(f.kind, weightstream::format::ErrorKind::Io(_)) => WsStatus::Io,
            E::Format(_) => WsStatus::Format,
            E::Unsupported { .. } | E::ReservedName { .. } => WsStatus::Unsupported,
            E::Read { .. } | E::Io { .. } | E::OutputExists { .. } | E::OutputTooLarge { .. } => WsStatus::Io,
            E::NoSuchTensor(_) => WsStatus::NotFound,
            E::HostMemory { .. } => WsStatus::OutOfMemory,
            E::Device(d) if d.is_out_of_memory() => WsStatus::OutOfMemory,
            E::Device(_) => WsStatus::Device,
            E::Cancelled => WsStatus::Cancelled,
            E::BadSlice { .. } | E::InvalidArgument(_) => WsStatus::InvalidArgument,
            E::OutputBusy { .. } => WsStatus::Io,
            E::BadScale { .. } => WsStatus::Format,
            E::Threads(_) => WsStatus::OutOfMemory,
            E::Dequant { .. } | E::Callback(_) | E::VerifyMismatch { .. } => WsStatus::Internal,
            E::Remote(r) if r.kind == weightstream::remote::RemoteErrorKind::BadUrl => WsStatus::InvalidArgument,
            E::Remote(_) => WsStatus::Io,
            E::HfMetadata { source, .. } => match source.kind {
                weightstream::hf2gguf::Kind::Format => WsStatus::Format,
                weightstream::hf2gguf::Kind::Unsupported => WsStatus::Unsupported,
                weightstream::hf2gguf::Kind::NotFound => WsStatus::NotFound,
            },
        };
        Failure { status, message: e.to_string() }
    }
}

/// A rectangle of a tensor's matrix view (innermost dimension against the
/// others): rows `[row_begin, row_end)`, columns `[col_begin, col_end)`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct WsSlice {
    pub row_begin: u64,
    pub row_end: u64,
    pub col_begin: u64,
    pub col_end: u64,
}

// ws_meta_type (weightstream.h): ws_meta_kv's `type`.
pub const WS_META_U32: u32 = 0;
pub const WS_META_F32: u32 = 1;
pub const WS_META_BOOL: u32 = 2;
pub const WS_META_STRING: u32 = 3;
pub const WS_META_STRING_ARRAY: u32 = 4;
pub const WS_META_F32_ARRAY: u32 = 5;
pub const WS_META_I32_ARRAY: u32 = 6;
pub const WS_META_I32: u32 = 7;

/// One metadata key and its value (`ws_meta_kv` in weightstream.h): the
/// field of `type` is set, the others zero.
#[repr(C)]
pub struct WsMetaKv {
    pub key: *const c_char,
    pub r#type: u32,
    pub u32: u32,
    pub f32: f32,
    pub boolean: bool,
    pub string: *const c_char,
    pub n: usize,
    pub strings: *const *const c_char,
    pub f32s: *const f32,
    pub i32s: *const i32,
    /// WS_META_I32 (the sampling keys' top_k, mirostat, penalty_last_n);
    /// last, so the fields before it keep their offsets.
    pub i32: i32,
}

/// One GGUF tensor and where its data comes from (`ws_gguf_tensor`).
#[repr(C)]
pub struct WsGgufTensor {
    pub name: *const c_char,
    pub ggml_type: u32,
    pub n_dims: u32,
    pub shape: [u64; WS_MAX_DIMS],
    pub sources: *const usize,
    pub n_sources: usize,
    pub permute_heads: u32,
    /// A tensor convert computes (Llama 3's `rope_freqs.weight`): its F32
    /// values, `n_sources` 0; NULL otherwise.
    pub data: *const f32,
    /// A row range of its one source (Phi-3's q, k, v of `qkv_proj`): the
    /// first row, and the source's rows; 0 and 0 for the whole source.
    pub row_start: u64,
    pub source_rows: u64,
}
