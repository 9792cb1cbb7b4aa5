//! `ws_hf_gguf_*`: llama.cpp's metadata and tensor map of a Hugging Face
//! checkpoint directory (crate weightstream-hf2gguf, what
//! convert_hf_to_gguf.py `--outtype bf16` writes), for llama.cpp-style
//! loaders, as C reads them: strings NUL-terminated, arrays behind
//! pointers that stay valid until `ws_close` (ffi_gguf.rs hands them out).

use std::ffi::{c_char, CString};

use weightstream::hf2gguf::{Metadata, TensorType, Value};

use crate::abi::{Failure, WsGgufTensor, WsMetaKv, WsStatus, WS_MAX_DIMS};
use crate::abi::{
    WS_META_BOOL, WS_META_F32, WS_META_F32_ARRAY, WS_META_I32, WS_META_I32_ARRAY, WS_META_STRING, WS_META_STRING_ARRAY, WS_META_U32,
};

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
    generated: Vec<u32>,
    rows: Option<(u64, u64)>,
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
    pub(crate) fn new(m: Metadata) -> Result<CMeta, Failure> {
        let mut kv = Vec::with_capacity(m.kv.len());
        let tensors = m.user_init_tensors();
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
        // As llama.cpp creates them for a loader that fills them: fused ones as their parts.
        let tensors = tensors
            .into_iter()
            .map(|t| {
                Ok(Tensor {
                    name: c_string(&t.name, "tensor name")?,
                    ty: t.ty,
                    shape: t.shape,
                    sources: t.sources,
                    permute_heads: t.permute_heads,
                    generated: t.generated,
                    rows: t.rows,
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
            i32: 0,
        };
        match &k.value {
            Value::U32(v) => (out.r#type, out.u32) = (WS_META_U32, *v),
            Value::I32(v) => (out.r#type, out.i32) = (WS_META_I32, *v),
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
            // f32 bits: u32 and f32 have one size and alignment.
            data: if t.generated.is_empty() { std::ptr::null() } else { t.generated.as_ptr() as *const f32 },
            row_start: t.rows.map_or(0, |r| r.0),
            source_rows: t.rows.map_or(0, |r| r.1),
        })
    }
}
