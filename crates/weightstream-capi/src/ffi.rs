//! The exported functions of weightstream.h (their types are in abi.rs).

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use weightstream::format::SourceKind;

use crate::abi::*;
use crate::checkpoint::Checkpoint;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_error(message: &str) {
    let c = CString::new(message.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

/// Run an exported function's body: its error, or a panic, becomes a status.
pub(crate) fn guard(f: impl FnOnce() -> Result<(), Failure>) -> WsStatus {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => WsStatus::Ok,
        Ok(Err(fail)) => {
            set_error(&fail.message);
            fail.status
        }
        Err(p) => {
            let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
            set_error(&format!("internal error (please report): {msg}"));
            WsStatus::Internal
        }
    }
}

pub(crate) fn invalid(m: &str) -> Failure {
    Failure::new(WsStatus::InvalidArgument, m)
}

/// # Safety
/// `p` is null or a NUL-terminated string.
unsafe fn c_str<'a>(p: *const c_char, what: &str) -> Result<&'a str, Failure> {
    if p.is_null() {
        return Err(invalid(&format!("{what} is NULL")));
    }
    // SAFETY: non-null, NUL-terminated by the caller's contract.
    unsafe { CStr::from_ptr(p) }.to_str().map_err(|_| invalid(&format!("{what} is not UTF-8")))
}

/// # Safety
/// `p` is null or points to a live `ws_checkpoint` from `ws_open`.
pub(crate) unsafe fn ckpt<'a>(p: *const Checkpoint) -> Result<&'a Checkpoint, Failure> {
    // SAFETY: per the function's contract.
    unsafe { p.as_ref() }.ok_or_else(|| invalid("checkpoint is NULL"))
}

#[no_mangle]
pub extern "C" fn ws_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr() as *const c_char
}

#[no_mangle]
pub extern "C" fn ws_api_version() -> u32 {
    WS_API_VERSION
}

#[no_mangle]
pub extern "C" fn ws_last_error() -> *const c_char {
    // The CString lives in this thread's slot until the next failure here.
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// # Safety
/// `path` is a NUL-terminated string; `out` a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn ws_open(path: *const c_char, out: *mut *mut Checkpoint) -> WsStatus {
    // SAFETY: forwarded contract.
    unsafe { ws_open_with(path, std::ptr::null(), out) }
}

/// # Safety
/// `path` is a NUL-terminated string; `options` null or a `ws_options`
/// whose `struct_size` says how much of it is valid; `out` a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn ws_open_with(path: *const c_char, options: *const WsOptions, out: *mut *mut Checkpoint) -> WsStatus {
    guard(|| {
        if out.is_null() {
            return Err(invalid("out is NULL"));
        }
        // SAFETY: out is non-null and writable per the contract.
        unsafe { *out = std::ptr::null_mut() };
        // SAFETY: per the contract.
        let path = PathBuf::from(unsafe { c_str(path, "path") }?);
        // SAFETY: per the contract.
        let opts = unsafe { options.as_ref() };
        if let Some(o) = opts {
            // ignore_transforms sits in what was the struct's tail padding:
            // the size is unchanged, and callers zero-initialise.
            if o.struct_size < std::mem::size_of::<WsOptions>() {
                return Err(invalid(&format!(
                    "ws_options.struct_size is {}, expected {}",
                    o.struct_size,
                    std::mem::size_of::<WsOptions>()
                )));
            }
        }
        let source = match opts.map(|o| o.source).filter(|s| !s.is_null()) {
            Some(s) => {
                // SAFETY: a non-null C string per the contract.
                let name = unsafe { c_str(s, "options.source") }?;
                SourceKind::parse(name).ok_or_else(|| invalid(&format!("source '{name}': use {}", SourceKind::NAMES.join(", "))))?
            }
            None => SourceKind::default(),
        };
        let nonneg = |v: c_int, what: &str| -> Result<Option<usize>, Failure> {
            match v {
                0 => Ok(None),
                v if v > 0 => Ok(Some(v as usize)),
                v => Err(invalid(&format!("{what} is {v}"))),
            }
        };
        let threads = opts.map_or(Ok(None), |o| nonneg(o.threads, "threads"))?;
        let slots = opts.map_or(Ok(None), |o| nonneg(o.staging_slots, "staging_slots"))?;
        let readers = opts.map_or(Ok(None), |o| nonneg(o.readers, "readers"))?;
        let slot_bytes = opts.map(|o| o.staging_bytes).filter(|&b| b > 0);
        let ignore_transforms = opts.is_some_and(|o| o.ignore_transforms != 0);
        let c = Checkpoint::open(&path, source, threads, slots, slot_bytes, readers, ignore_transforms)?;
        // SAFETY: out is valid (checked above); ownership passes to the caller
        // until ws_close.
        unsafe { *out = Box::into_raw(Box::new(c)) };
        Ok(())
    })
}

/// # Safety
/// `ckpt` is null or a pointer from `ws_open` not yet closed.
#[no_mangle]
pub unsafe extern "C" fn ws_close(ckpt: *mut Checkpoint) {
    if !ckpt.is_null() {
        let _ = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: from ws_open (Box::into_raw), closed once per the contract.
            drop(unsafe { Box::from_raw(ckpt) });
        }));
    }
}

/// # Safety
/// `ckpt` is null or a live checkpoint.
#[no_mangle]
pub unsafe extern "C" fn ws_tensor_count(ckpt: *const Checkpoint) -> usize {
    // SAFETY: per the contract.
    unsafe { ckpt.as_ref() }.map_or(0, |c| c.entries.len())
}

/// # Safety
/// `ckpt` is null or a live checkpoint.
#[no_mangle]
pub unsafe extern "C" fn ws_sources(ckpt: *const Checkpoint) -> *const c_char {
    // SAFETY: per the contract.
    unsafe { ckpt.as_ref() }.map_or(c"".as_ptr(), |c| c.sources.as_ptr())
}

/// # Safety
/// `ckpt` a live checkpoint, `out` a valid pointer.
#[no_mangle]
pub unsafe extern "C" fn ws_tensor_info_at(ckpt: *const Checkpoint, index: usize, out: *mut WsTensorInfo) -> WsStatus {
    guard(|| {
        // SAFETY: per the contract.
        let c = unsafe { self::ckpt(ckpt) }?;
        if out.is_null() {
            return Err(invalid("out is NULL"));
        }
        let e = c.entry(index)?;
        let mut shape = [0u64; WS_MAX_DIMS];
        shape[..e.shape.len()].copy_from_slice(&e.shape);
        let info = WsTensorInfo {
            name: e.name.as_ptr(),
            dtype: e.dtype.as_ptr(),
            n_dims: e.shape.len() as u32,
            shape,
            n_elements: e.n_elems,
            loadable: e.job.is_some(),
        };
        // SAFETY: out is non-null and writable per the contract.
        unsafe { out.write(info) };
        Ok(())
    })
}

/// # Safety
/// `ckpt` a live checkpoint, `name` a NUL-terminated string, `index` valid.
#[no_mangle]
pub unsafe extern "C" fn ws_find_tensor(ckpt: *const Checkpoint, name: *const c_char, index: *mut usize) -> WsStatus {
    guard(|| {
        // SAFETY: per the contract.
        let (c, name) = unsafe { (self::ckpt(ckpt)?, c_str(name, "name")?) };
        if index.is_null() {
            return Err(invalid("index is NULL"));
        }
        let i = c.find(name).ok_or_else(|| Failure::new(WsStatus::NotFound, format!("no tensor named '{name}'")))?;
        // SAFETY: non-null per the check above.
        unsafe { *index = i };
        Ok(())
    })
}

/// # Safety
/// `ckpt` null or a live checkpoint.
#[no_mangle]
pub unsafe extern "C" fn ws_tensor_nbytes(ckpt: *const Checkpoint, index: usize, dtype: c_int) -> usize {
    // SAFETY: per the contract.
    let Some(c) = (unsafe { ckpt.as_ref() }) else { return 0 };
    catch_unwind(AssertUnwindSafe(|| c.nbytes(index, dtype).unwrap_or(0))).unwrap_or(0)
}

/// # Safety
/// `ckpt` a live checkpoint; `dst` a valid `ws_destination` whose data
/// pointer holds `size` writable bytes of the memory it names.
#[no_mangle]
pub unsafe extern "C" fn ws_load_tensor(ckpt: *mut Checkpoint, index: usize, dtype: c_int, dst: *const WsDestination) -> WsStatus {
    guard(|| {
        // SAFETY: per the contract.
        let c = unsafe { self::ckpt(ckpt) }?;
        // SAFETY: per the contract.
        let dst = unsafe { dst.as_ref() }.ok_or_else(|| invalid("dst is NULL"))?;
        let req = WsLoadRequest { index, dtype, dst: *dst };
        // SAFETY: the destination's validity is the caller's contract.
        unsafe { c.load(&[req], None, std::ptr::null_mut()) }
    })
}

/// # Safety
/// `ckpt` null or a live checkpoint; `slice` null or a valid `ws_slice`.
#[no_mangle]
pub unsafe extern "C" fn ws_slice_nbytes(ckpt: *const Checkpoint, index: usize, slice: *const WsSlice) -> usize {
    // SAFETY: per the contract.
    let (Some(c), Some(s)) = (unsafe { ckpt.as_ref() }, unsafe { slice.as_ref() }) else { return 0 };
    catch_unwind(AssertUnwindSafe(|| c.slice_nbytes(index, s.row_begin..s.row_end, s.col_begin..s.col_end).unwrap_or(0))).unwrap_or(0)
}

/// # Safety
/// `ckpt` a live checkpoint; `slice` a valid `ws_slice`; `dst` as for
/// `ws_load_tensor`, sized for the slice (`ws_slice_nbytes`).
#[no_mangle]
pub unsafe extern "C" fn ws_load_slice(ckpt: *mut Checkpoint, index: usize, slice: *const WsSlice, dst: *const WsDestination) -> WsStatus {
    guard(|| {
        // SAFETY: per the contract.
        let c = unsafe { self::ckpt(ckpt) }?;
        // SAFETY: per the contract.
        let s = unsafe { slice.as_ref() }.ok_or_else(|| invalid("slice is NULL"))?;
        // SAFETY: per the contract.
        let dst = unsafe { dst.as_ref() }.ok_or_else(|| invalid("dst is NULL"))?;
        // SAFETY: the destination's validity is the caller's contract.
        unsafe { c.load_slice(index, s.row_begin..s.row_end, s.col_begin..s.col_end, dst) }
    })
}

/// # Safety
/// `ckpt` a live checkpoint; `requests` `count` valid requests (see
/// `ws_load_tensor`); `progress` null or callable with `user_data`.
#[no_mangle]
pub unsafe extern "C" fn ws_load_tensors(
    ckpt: *mut Checkpoint,
    requests: *const WsLoadRequest,
    count: usize,
    progress: WsProgressCallback,
    user_data: *mut c_void,
) -> WsStatus {
    guard(|| {
        // SAFETY: per the contract.
        let c = unsafe { self::ckpt(ckpt) }?;
        if requests.is_null() && count > 0 {
            return Err(invalid("requests is NULL"));
        }
        let reqs = if count == 0 {
            &[][..]
        } else {
            // SAFETY: `count` requests at `requests`, per the contract.
            unsafe { std::slice::from_raw_parts(requests, count) }
        };
        // SAFETY: per the contract.
        unsafe { c.load(reqs, progress, user_data) }
    })
}

#[no_mangle]
pub extern "C" fn ws_cuda_device_count() -> c_int {
    match catch_unwind(weightstream::cuda_device_count) {
        Ok(Ok(n)) => n as c_int,
        Ok(Err(e)) => {
            set_error(&e.to_string());
            0
        }
        Err(_) => {
            set_error("internal error while probing CUDA");
            0
        }
    }
}

/// Sizes and offsets of the header's structs as Rust lays them out, in the
/// order crates/weightstream-capi/tests/test_capi.c checks them.
pub fn abi_layout() -> Vec<u64> {
    use std::mem::{offset_of, size_of};
    vec![
        size_of::<WsDestination>() as u64,
        offset_of!(WsDestination, size) as u64,
        offset_of!(WsDestination, memory) as u64,
        offset_of!(WsDestination, device) as u64,
        offset_of!(WsDestination, stream) as u64,
        size_of::<WsTensorInfo>() as u64,
        offset_of!(WsTensorInfo, dtype) as u64,
        offset_of!(WsTensorInfo, n_dims) as u64,
        offset_of!(WsTensorInfo, shape) as u64,
        offset_of!(WsTensorInfo, n_elements) as u64,
        offset_of!(WsTensorInfo, loadable) as u64,
        size_of::<WsLoadRequest>() as u64,
        offset_of!(WsLoadRequest, dtype) as u64,
        offset_of!(WsLoadRequest, dst) as u64,
        size_of::<WsOptions>() as u64,
        offset_of!(WsOptions, source) as u64,
        offset_of!(WsOptions, threads) as u64,
        offset_of!(WsOptions, staging_slots) as u64,
        offset_of!(WsOptions, staging_bytes) as u64,
        offset_of!(WsOptions, readers) as u64,
        offset_of!(WsOptions, ignore_transforms) as u64,
        size_of::<WsStatus>() as u64,
        size_of::<WsMetaKv>() as u64,
        offset_of!(WsMetaKv, r#type) as u64,
        offset_of!(WsMetaKv, u32) as u64,
        offset_of!(WsMetaKv, f32) as u64,
        offset_of!(WsMetaKv, boolean) as u64,
        offset_of!(WsMetaKv, string) as u64,
        offset_of!(WsMetaKv, n) as u64,
        offset_of!(WsMetaKv, strings) as u64,
        offset_of!(WsMetaKv, f32s) as u64,
        offset_of!(WsMetaKv, i32s) as u64,
        offset_of!(WsMetaKv, i32) as u64,
        size_of::<WsGgufTensor>() as u64,
        offset_of!(WsGgufTensor, ggml_type) as u64,
        offset_of!(WsGgufTensor, n_dims) as u64,
        offset_of!(WsGgufTensor, shape) as u64,
        offset_of!(WsGgufTensor, sources) as u64,
        offset_of!(WsGgufTensor, n_sources) as u64,
        offset_of!(WsGgufTensor, permute_heads) as u64,
        offset_of!(WsGgufTensor, data) as u64,
        offset_of!(WsGgufTensor, row_start) as u64,
        offset_of!(WsGgufTensor, source_rows) as u64,
    ]
}

/// # Safety
/// `values` holds `capacity` writable u64 (or is null with capacity 0).
#[no_mangle]
pub unsafe extern "C" fn ws_abi_layout(values: *mut u64, capacity: usize) -> usize {
    let v = abi_layout();
    let n = v.len().min(capacity);
    if n > 0 && !values.is_null() {
        // SAFETY: capacity writable values per the contract.
        unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), values, n) };
    }
    n
}
