//! `ws_hf_gguf_*`: llama.cpp's metadata and tensor map of a Hugging Face
//! checkpoint directory (crate weightstream-hf2gguf, what
//! convert_hf_to_gguf.py `--outtype bf16` writes), for llama.cpp-style
//! loaders: the adapter only hands them to `gguf_set_*` and fills the
//! tensors from the map. Built on the first call, kept until `ws_close`.

use std::sync::Arc;

use weightstream::hf2gguf::TensorIn;

use crate::abi::{Failure, WsGgufTensor, WsMetaKv, WsStatus};
use crate::checkpoint::Checkpoint;
use crate::ffi::{ckpt, guard, invalid};
use crate::gguf_meta::CMeta;

impl Checkpoint {
    /// The checkpoint's llama.cpp metadata, built on first use (the map's
    /// sources are this checkpoint's tensor indices).
    pub(crate) fn hf_meta(&self) -> Result<Arc<CMeta>, Failure> {
        let mut slot = self.hf.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(m) = slot.as_ref() {
            return Ok(m.clone());
        }
        let tensors: Vec<TensorIn> =
            self.entries.iter().map(|e| TensorIn { name: e.name.to_string_lossy().into_owned(), shape: e.shape.clone() }).collect();
        let built = Arc::new(CMeta::new(weightstream::convert_gguf::hf_metadata(self.cat(), &tensors)?)?);
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

/// Entry `index` of the checkpoint's metadata, as `get` reads it, into
/// `out`; `what` names the list for the not-found message.
///
/// # Safety
/// `ckpt` a live checkpoint, `out` a valid pointer.
unsafe fn write_entry<T>(
    ckpt: *const Checkpoint,
    index: usize,
    out: *mut T,
    what: &str,
    get: impl Fn(&CMeta, usize) -> Option<T>,
    count: impl Fn(&CMeta) -> usize,
) -> WsStatus {
    guard(|| {
        // SAFETY: per the contract.
        let c = unsafe { self::ckpt(ckpt) }?;
        if out.is_null() {
            return Err(invalid("out is NULL"));
        }
        let m = c.hf_meta()?;
        let v = get(&m, index).ok_or_else(|| Failure::new(WsStatus::NotFound, format!("no {what} {index}: there are {}", count(&m))))?;
        // SAFETY: out is non-null and writable; the pointers in `v` stay
        // valid until ws_close (the metadata is kept in the checkpoint).
        unsafe { out.write(v) };
        Ok(())
    })
}

/// # Safety
/// `ckpt` a live checkpoint, `out` a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn ws_hf_gguf_kv(ckpt: *const Checkpoint, index: usize, out: *mut WsMetaKv) -> WsStatus {
    // SAFETY: the caller's contract is write_entry's.
    unsafe { write_entry(ckpt, index, out, "metadata key", CMeta::kv, |m| m.counts().0) }
}

/// # Safety
/// `ckpt` a live checkpoint, `out` a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn ws_hf_gguf_tensor(ckpt: *const Checkpoint, index: usize, out: *mut WsGgufTensor) -> WsStatus {
    // SAFETY: the caller's contract is write_entry's.
    unsafe { write_entry(ckpt, index, out, "GGUF tensor", CMeta::tensor, |m| m.counts().1) }
}
