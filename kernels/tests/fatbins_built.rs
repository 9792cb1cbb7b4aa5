//! CI builds the GPU kernels even without a GPU (scripts/test.sh sets
//! WEIGHTSTREAM_REQUIRE_GPU_KERNELS=1): a build that silently skipped nvcc
//! fails here.

#[test]
fn fatbins_are_built_when_required() {
    let required = std::env::var("WEIGHTSTREAM_REQUIRE_GPU_KERNELS").is_ok_and(|v| v == "1");
    if !required {
        eprintln!("WEIGHTSTREAM_REQUIRE_GPU_KERNELS is not 1: not requiring fatbins (built: {})", weightstream_kernels::has_gpu_kernels());
        return;
    }
    assert!(weightstream_kernels::has_gpu_kernels(), "nvcc was not found at build time: no fatbins");
    for (module, image) in weightstream_kernels::FATBINS {
        // A fatbin starts with its magic 0xBA55ED50 (little-endian).
        assert_eq!(&image[..4], &[0x50, 0xED, 0x55, 0xBA], "{module}: not a fatbin");
    }
    assert!(weightstream_kernels::NVCC_VERSION.contains("13.0"), "{}", weightstream_kernels::NVCC_VERSION);
}
