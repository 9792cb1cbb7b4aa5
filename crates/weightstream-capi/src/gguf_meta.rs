//! `ws_hf_gguf_*`: llama.cpp's metadata and tensor map of a Hugging Face
//! checkpoint directory (crate weightstream-hf2gguf, what
//! convert_hf_to_gguf.py `--outtype bf16` writes), for llama.cpp-style
//! loaders: the adapter only hands them to `gguf_set_*` and fills the
//! tensors from the map. Built on the first call, kept until `ws_close`.

use std::ffi::{c_char, CString};

use weightstream::hf2gguf::{Metadata, TensorIn, TensorType, Value};

use crate::abi::{Failure, WsStatus, WS_MAX_DIMS};
use crate::checkpoint::Checkpoint;
use crate::ffi::{ckpt, guard, invalid};

pub const WS_META_U32: u32 = 0;
pub const WS_META_F32: u32 = 1;
pub const WS_META_BOOL: u32 = 2;
pub const WS_META_STRING: u32 = 3;
pub const WS_META_STRING_ARRAY: u32 = 4;
pub const WS_META_F32_ARRAY: u32 = 5;
pub const WS_META_I32_ARRAY: u32 = 6;

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
}

/// A value as C reads it: its strings NUL-terminated, arrays as pointers
/// into vectors this owns (their heap buffers never move once built).
struct Kv {
    key: CString,
    value: Value,
    string: Option<CString>,
    strings: Vec<CString>,
    string_ptrs: Vec<*const c_char>,
}

struct Tensor {
    name: CString,
    ty: TensorType,
    shape: Vec<u64>,
    sources: Vec<usize>,
    permute_heads: u32,
}

/// The built metadata of one checkpoint, as C reads it.
pub(crate) struct CMeta {
    kv: Vec<Kv>,
    tensors: Vec<Tensor>,
}

// SAFETY: the raw pointers point into CStrings this value owns and never
// changes after it is built; it is only read, from any thread.
unsafe impl Send for CMeta {}
// SAFETY: as above: immutable once built.
unsafe impl Sync for CMeta {}

fn c_string(s: &str, what: &str) -> Result<CString, Failure> {
    CString::new(s).map_err(|_| Failure::new(WsStatus::Format, format!("{what} {s:?} holds a NUL byte: C cannot take it")))
}

impl CMeta {
    fn new(m: Metadata) -> Result<CMeta, Failure> {
        let mut kv = Vec::with_capacity(m.kv.len());
        for (key, value) in m.kv {
            let key = c_string(&key, "metadata key")?;
            let string = match &value {
                Value::Str(s) => Some(c_string(s, "metadata value")?),
                _ => None,
            };
            let strings = match &value {
                Value::StrArray(a) => a.iter().map(|s| c_string(s, "token")).collect::<Result<Vec<_>, _>>()?,
                _ => vec![],
            };
            let string_ptrs = strings.iter().map(|s| s.as_ptr()).collect();
            kv.push(Kv { key, value, string, strings, string_ptrs });
        }
        let tensors = m
            .tensors
            .into_iter()
            .map(|t| {
                Ok(Tensor {
                    name: c_string(&t.name, "tensor name")?,
                    ty: t.ty,
                    shape: t.shape,
                    sources: t.sources,
                    permute_heads: t.permute_heads,
                })
            })
            .collect::<Result<_, Failure>>()?;
        Ok(CMeta { kv, tensors })
    }

    pub(crate) fn counts(&self) -> (usize, usize) {
        (self.kv.len(), self.tensors.len())
    }

    pub(crate) fn kv(&self, i: usize) -> Option<WsMetaKv> {
        let k = self.kv.get(i)?;
        let mut out = WsMetaKv {
            key: k.key.as_ptr(),
            r#type: 0,
            u32: 0,
            f32: 0.0,
            boolean: false,
            string: std::ptr::null(),
            n: 0,
            strings: std::ptr::null(),
            f32s: std::ptr::null(),
            i32s: std::ptr::null(),
        };
        match &k.value {
            Value::U32(v) => (out.r#type, out.u32) = (WS_META_U32, *v),
            Value::F32(v) => (out.r#type, out.f32) = (WS_META_F32, *v),
            Value::Bool(v) => (out.r#type, out.boolean) = (WS_META_BOOL, *v),
            Value::Str(_) => (out.r#type, out.string) = (WS_META_STRING, k.string.as_ref().map_or(std::ptr::null(), |s| s.as_ptr())),
            Value::StrArray(_) => (out.r#type, out.n, out.strings) = (WS_META_STRING_ARRAY, k.strings.len(), k.string_ptrs.as_ptr()),
            Value::F32Array(a) => (out.r#type, out.n, out.f32s) = (WS_META_F32_ARRAY, a.len(), a.as_ptr()),
            Value::I32Array(a) => (out.r#type, out.n, out.i32s) = (WS_META_I32_ARRAY, a.len(), a.as_ptr()),
        }
        Some(out)
    }

    pub(crate) fn tensor(&self, i: usize) -> Option<WsGgufTensor> {
        let t = self.tensors.get(i)?;
        let mut shape = [0u64; WS_MAX_DIMS];
        let n = t.shape.len().min(WS_MAX_DIMS);
        shape[..n].copy_from_slice(&t.shape[..n]);
        Some(WsGgufTensor {
            name: t.name.as_ptr(),
            ggml_type: if t.ty == TensorType::F32 { 0 } else { 30 }, // GGML_TYPE_F32, GGML_TYPE_BF16
            n_dims: n as u32,
            shape,
            sources: t.sources.as_ptr(),
            n_sources: t.sources.len(),
            permute_heads: t.permute_heads,
        })
    }
}

impl Checkpoint {
    /// The checkpoint's llama.cpp metadata, built on first use (the map's
    /// sources are this checkpoint's tensor indices).
    pub(crate) fn hf_meta(&self) -> Result<std::sync::Arc<CMeta>, Failure> {
        let mut slot = self.hf.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(m) = slot.as_ref() {
            return Ok(m.clone());
        }
        let tensors: Vec<TensorIn> =
            self.entries.iter().map(|e| TensorIn { name: e.name.to_string_lossy().into_owned(), shape: e.shape.clone() }).collect();
        let built = std::sync::Arc::new(CMeta::new(weightstream::convert_gguf::hf_metadata(self.cat(), &tensors)?)?);
        *slot = Some(built.clone());
        Ok(built)
    }
}

/// # Safety
/// `ckpt` a live checkpoint; `n_kv` and `n_tensors` valid pointers or NULL.
#[no_mangle]
pub unsafe extern "C" fn ws_hf_gguf_metadata(ckpt: *const Checkpoint, n_kv: *mut usize, n_tensors: *mut usize) -> WsStatus {
    guard(|| {
        // SAFETY: per the contract.
        let c = unsafe { self::ckpt(ckpt) }?;
        let (k, t) = c.hf_meta()?.counts();
        // SAFETY: each pointer is NULL or writable per the contract.
        unsafe {
            if !n_kv.is_null() {
                n_kv.write(k);
            }
            if !n_tensors.is_null() {
                n_tensors.write(t);
            }
        }
        Ok(())
    })
}

/// # Safety
/// `ckpt` a live checkpoint, `out` a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn ws_hf_gguf_kv(ckpt: *const Checkpoint, index: usize, out: *mut WsMetaKv) -> WsStatus {
    guard(|| {
        // SAFETY: per the contract.
        let c = unsafe { self::ckpt(ckpt) }?;
        if out.is_null() {
            return Err(invalid("out is NULL"));
        }
        let m = c.hf_meta()?;
        let kv =
            m.kv(index).ok_or_else(|| Failure::new(WsStatus::NotFound, format!("no metadata key {index}: there are {}", m.counts().0)))?;
        // SAFETY: out is non-null and writable; its pointers stay valid
        // until ws_close (the metadata is kept in the checkpoint).
        unsafe { out.write(kv) };
        Ok(())
    })
}

/// # Safety
/// `ckpt` a live checkpoint, `out` a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn ws_hf_gguf_tensor(ckpt: *const Checkpoint, index: usize, out: *mut WsGgufTensor) -> WsStatus {
    guard(|| {
        // SAFETY: per the contract.
        let c = unsafe { self::ckpt(ckpt) }?;
        if out.is_null() {
            return Err(invalid("out is NULL"));
        }
        let m = c.hf_meta()?;
        let t = m
            .tensor(index)
            .ok_or_else(|| Failure::new(WsStatus::NotFound, format!("no GGUF tensor {index}: there are {}", m.counts().1)))?;
        // SAFETY: as in ws_hf_gguf_kv.
        unsafe { out.write(t) };
        Ok(())
    })
}
