//! aarch64 kernels (NEON, which every aarch64 CPU has), chosen at run time
//! by `Isa::detect` like the x86 ones. Built with cargo's
//! `aarch64-unknown-linux-gnu` target and tested under qemu-user
//! (scripts/test_arm.sh).
pub mod lookup;
pub mod neon;

/// The NEON kernel of a block format, if it has one.
pub fn block_kernel(f: weightstream_format::BlockFormat) -> Option<neon::KernelFn> {
    neon::block_kernel(f).or_else(|| lookup::block_kernel(f))
}
