//! aarch64 kernels: NEON, which every aarch64 CPU has, for every format
//! (`neon.rs`: F32, F16, Q4_0, Q8_0 and the shared rounding; `blocks.rs`:
//! Q4_1 ... Q6_K; `lookup.rs`: the codebook, ternary and grid formats;
//! `scaled.rs`: FP8, E2M1, INT4/INT8), chosen at run time by
//! `Isa::detect` like the x86 ones. Built with cargo's
//! `aarch64-unknown-linux-gnu` target and tested under qemu-user
//! (scripts/test_arm.sh); not measured on Arm hardware.
mod blocks;
mod lookup;
pub mod neon;
pub mod scaled;

/// The NEON kernel of a block format.
pub fn block_kernel(f: weightstream_blocks::BlockFormat) -> Option<neon::KernelFn> {
    neon::block_kernel(f).or_else(|| blocks::block_kernel(f)).or_else(|| lookup::block_kernel(f))
}

#[cfg(test)]
mod tests {
    /// Every block format has a NEON kernel (none falls back to the
    /// portable one under `Isa::Neon`); isa_parity checks their bits.
    #[test]
    fn every_block_format_has_a_neon_kernel() {
        for &f in weightstream_blocks::BlockFormat::ALL {
            assert!(super::block_kernel(f).is_some(), "{f:?} has no NEON kernel");
        }
    }
}
