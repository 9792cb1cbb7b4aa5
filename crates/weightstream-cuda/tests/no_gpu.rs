//! Without a driver (CI), every entry point answers with a reason, never a
//! panic. On a machine with a GPU these checks do not apply.

use weightstream_cuda::{check_available, device_count, gpu_present, CudaError, Gpu};

#[test]
fn no_gpu_is_an_error_not_a_panic() {
    if gpu_present() {
        eprintln!("a GPU is present: the no-GPU answers are not what this machine gives; nothing to check");
        return;
    }
    let why = check_available().err().or_else(|| device_count().err()).expect("no GPU, so a reason");
    assert!(matches!(why, CudaError::Unavailable(_)), "{why}");
    assert!(!why.to_string().is_empty());
    let e = Gpu::open(0).err().expect("opening a GPU that is not there fails");
    assert!(e.to_string().contains("no usable GPU"), "{e}");
}

#[test]
fn gds_without_a_driver_is_an_error_not_a_panic() {
    if gpu_present() {
        eprintln!("a GPU is present: nothing to check here");
        return;
    }
    let e = weightstream_cuda::Gds::open().err().expect("cuFile cannot open without a GPU driver");
    eprintln!("{e}");
    // scripts/env.sh links the pinned libcufile: then the library loads and
    // the driver open is what fails; without the link the library is missing.
    if std::env::var_os("WEIGHTSTREAM_CUFILE_LINK").is_some() {
        assert!(e.contains("cuFileDriverOpen"), "{e}");
    } else {
        assert!(e.contains("libcufile.so was not found") || e.contains("cuFileDriverOpen"), "{e}");
    }
    // The same answer again (the outcome is kept), still no panic.
    assert_eq!(weightstream_cuda::Gds::open().err().as_deref(), Some(e.as_str()));
}
