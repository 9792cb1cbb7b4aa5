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
