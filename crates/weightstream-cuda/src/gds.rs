//! GPUDirect Storage through cuFile: file bytes straight into device memory.
//!
//! With the nvidia-fs kernel module loaded, `cuFileRead` DMAs from an NVMe
//! drive into GPU memory without touching host memory. Without it cuFile
//! runs in compatibility mode (POSIX reads into its own pinned bounce
//! buffers, then a copy), which works everywhere `allow_compat_mode` is on
//! but buys nothing over our own direct-I/O staging; [`Gds::native`] tells
//! the two apart so `auto` only takes the real thing.
//!
//! libcufile is loaded at run time. The pip wheel (`nvidia-cufile`) ships it
//! as `libcufile.so.0` while cudarc looks for `libcufile.so`: the scripts make
//! the link (scripts/env.sh). A missing library, a failed driver open or a
//! missing symbol is an error here, never a panic: cudarc panics on a missing
//! symbol, so every call runs under `catch_unwind`.

use std::fs::File;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::OnceLock;

use cudarc::cufile::sys;

/// A user's cuFile configuration file; without one we set what we need.
pub const CONFIG_ENV: &str = "CUFILE_ENV_PATH_JSON";

/// Run a cuFile call; a panic (missing library or symbol) becomes an error.
fn guarded<T>(call: &str, f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
        let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
        format!("{call}: libcufile is unusable: {msg}")
    })
}

fn status(call: &str, e: sys::CUfileError_t) -> Result<(), String> {
    if e.err == sys::CUfileOpError::CU_FILE_SUCCESS {
        Ok(())
    } else {
        Err(format!("{call} failed: {:?} (CUDA {:?})", e.err, e.cu_err))
    }
}

/// The cuFile driver, opened once per process.
pub struct Gds {
    native: bool,
}

impl Gds {
    /// Open the cuFile driver (once; later calls return the same outcome).
    pub fn open() -> Result<&'static Gds, String> {
        static GDS: OnceLock<Result<Gds, String>> = OnceLock::new();
        GDS.get_or_init(|| {
            // SAFETY: only tries to dlopen the library by its candidate names.
            if !guarded("dlopen", || unsafe { sys::is_culib_present() })? {
                return Err("libcufile.so was not found: pip install nvidia-cufile and put a libcufile.so link to its \
                            libcufile.so.0 on LD_LIBRARY_PATH (scripts/env.sh does both)"
                    .into());
            }
            if std::env::var_os(CONFIG_ENV).is_none() {
                configure();
            }
            // SAFETY: no arguments; the driver stays open for the process
            // (closing it would pull it from under other users, as cudarc notes).
            status("cuFileDriverOpen", guarded("cuFileDriverOpen", || unsafe { sys::cuFileDriverOpen() })?)?;
            Ok(Gds { native: Path::new("/sys/module/nvidia_fs").exists() })
        })
        .as_ref()
        .map_err(|e| e.clone())
    }

    /// Whether reads are real GPUDirect DMA (the nvidia-fs module is
    /// loaded) rather than compatibility mode.
    pub fn native(&self) -> bool {
        self.native
    }

    pub fn mode(&self) -> &'static str {
        if self.native {
            "GPUDirect (nvidia-fs)"
        } else {
            "compatibility mode (no nvidia-fs: POSIX reads through cuFile's bounce buffers)"
        }
    }

    /// Register a file (opened with `O_DIRECT` for true GPUDirect). The
    /// descriptor is duplicated, so the handle owns what it uses.
    pub fn register(&'static self, file: &File) -> Result<GdsFile, String> {
        let file = file.try_clone().map_err(|e| format!("cannot duplicate the file descriptor: {e}"))?;
        let mut descr = descriptor(&file);
        let mut handle: sys::CUfileHandle_t = std::ptr::null_mut();
        // SAFETY: descr names an open descriptor that `file` keeps open for
        // the handle's life; handle receives the new handle.
        let e = guarded("cuFileHandleRegister", || unsafe { sys::cuFileHandleRegister(&mut handle, &mut descr) })?;
        status("cuFileHandleRegister", e)?;
        Ok(GdsFile { handle, _file: file })
    }

    /// Register device memory for DMA; registration is an optimisation
    /// (unregistered memory goes through cuFile's bounce buffers), so a
    /// failure is reported and the memory still usable.
    ///
    /// # Safety
    /// `[ptr, ptr + len)` must be device memory that outlives the returned
    /// registration.
    pub unsafe fn register_buffer(&'static self, ptr: u64, len: usize) -> Result<GdsBuffer, String> {
        // SAFETY: the caller guarantees device memory that outlives the registration.
        let e = guarded("cuFileBufRegister", || unsafe { sys::cuFileBufRegister(ptr as *const std::ffi::c_void, len, 0) })?;
        status("cuFileBufRegister", e)?;
        Ok(GdsBuffer { ptr })
    }
}

/// Without a user configuration: allow compatibility mode (so cuFile works
/// where nvidia-fs is absent) and log errors only, to /tmp rather than a
/// `cufile.log` in the working directory. Parameters must be set before the
/// driver opens; an older libcufile without these calls keeps its defaults.
fn configure() {
    use sys::CUFileBoolConfigParameter_t::CUFILE_PARAM_PROPERTIES_ALLOW_COMPAT_MODE;
    use sys::CUFileStringConfigParameter_t::{CUFILE_PARAM_LOGGING_LEVEL, CUFILE_PARAM_LOG_DIR};
    // SAFETY: a plain setter taking a value.
    let _ = guarded("cuFileSetParameterBool", || unsafe { sys::cuFileSetParameterBool(CUFILE_PARAM_PROPERTIES_ALLOW_COMPAT_MODE, true) });
    // SAFETY: a setter taking a NUL-terminated static string.
    let _ = guarded("cuFileSetParameterString", || unsafe { sys::cuFileSetParameterString(CUFILE_PARAM_LOGGING_LEVEL, c"ERROR".as_ptr()) });
    // SAFETY: as above.
    let _ = guarded("cuFileSetParameterString", || unsafe { sys::cuFileSetParameterString(CUFILE_PARAM_LOG_DIR, c"/tmp".as_ptr()) });
}

#[cfg(unix)]
fn descriptor(file: &File) -> sys::CUfileDescr_t {
    use std::os::unix::io::AsRawFd;
    sys::CUfileDescr_t {
        type_: sys::CUfileFileHandleType::CU_FILE_HANDLE_TYPE_OPAQUE_FD,
        handle: sys::CUfileDescr_t__bindgen_ty_1 { fd: file.as_raw_fd() },
        fs_ops: std::ptr::null(),
    }
}

/// A file registered with cuFile; deregistered on drop.
pub struct GdsFile {
    handle: sys::CUfileHandle_t,
    _file: File,
}

// SAFETY: cuFile handles are thread-safe (reads from several threads on one
// handle are the documented way to keep several I/Os in flight).
unsafe impl Send for GdsFile {}
// SAFETY: as for Send: concurrent reads on one handle are supported.
unsafe impl Sync for GdsFile {}

impl GdsFile {
    /// Read `len` bytes at `file_offset` into device memory at `base +
    /// base_offset`. Returns the bytes read (short only at the end of the
    /// file).
    ///
    /// # Safety
    /// `[base + base_offset, base + base_offset + len)` must be device memory
    /// of the current context that nothing else uses during the call.
    pub unsafe fn read(&self, base: u64, base_offset: u64, len: usize, file_offset: u64) -> Result<usize, String> {
        let (Ok(off), Ok(boff)) = (sys::off_t::try_from(file_offset), sys::off_t::try_from(base_offset)) else {
            return Err(format!("offset {file_offset} is out of range for cuFileRead"));
        };
        // SAFETY: a registered handle; the caller guarantees the device range.
        let n = guarded("cuFileRead", || unsafe { sys::cuFileRead(self.handle, base as *mut std::ffi::c_void, len, off, boff) })?;
        match n {
            n if n >= 0 => Ok(n as usize),
            -1 => Err(format!("cuFileRead: {}", std::io::Error::last_os_error())),
            // Other negative values are -CUfileOpError codes (cufile.h).
            n => Err(format!("cuFileRead failed with cuFile error {}", -n)),
        }
    }
}

impl Drop for GdsFile {
    fn drop(&mut self) {
        // SAFETY: the handle was registered once and is deregistered once.
        let _ = guarded("cuFileHandleDeregister", || unsafe { sys::cuFileHandleDeregister(self.handle) });
    }
}

/// Device memory registered with cuFile; deregistered on drop (which must
/// come before the memory is freed).
pub struct GdsBuffer {
    ptr: u64,
}

impl Drop for GdsBuffer {
    fn drop(&mut self) {
        // SAFETY: registered in register_buffer; the memory is still allocated
        // (the caller's contract).
        let _ = guarded("cuFileBufDeregister", || unsafe { sys::cuFileBufDeregister(self.ptr as *const std::ffi::c_void) });
    }
}
