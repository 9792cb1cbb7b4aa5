//! aarch64 kernels: NEON, which every aarch64 CPU has, for every format,
//! chosen at run time by `Isa::detect` like the x86 ones. `neon.rs` holds
//! the primitives (rounding, stores, field extraction) and `lookup.rs` the
//! output tables; the kernels live in family files with the same names as
//! scalar/, x86/ and kernels/cuda/: `legacy.rs`, `kquant.rs`, `lut4.rs`,
//! `grid.rs`, `ternary.rs`, `lowbit.rs`, `float.rs`, `fp8.rs`, `packed.rs`. This file
//! dispatches. Built with cargo's `aarch64-unknown-linux-gnu` target and
//! tested under qemu-user (scripts/test_arm.sh); not measured on Arm
//! hardware.
pub mod float;
pub mod fp8;
mod grid;
mod kquant;
mod legacy;
mod lookup;
mod lowbit;
mod lut4;
pub mod neon;
pub mod packed;
mod ternary;

use weightstream_blocks::BlockFormat;

/// The NEON kernel of a block format.
pub fn block_kernel(f: BlockFormat) -> Option<neon::KernelFn> {
    use grid::{Iq1M, Iq1S, Iq2S, Iq2Xs, Iq2Xxs, Iq3S, Iq3Xxs};
    Some(match f {
        BlockFormat::Q4_0 => legacy::q4_0,
        BlockFormat::Q4_1 => legacy::q4_1,
        BlockFormat::Q5_0 => legacy::q5_0,
        BlockFormat::Q5_1 => legacy::q5_1,
        BlockFormat::Q8_0 => legacy::q8_0,
        BlockFormat::Q2_K => kquant::q2_k,
        BlockFormat::Q3_K => kquant::q3_k,
        BlockFormat::Q4_K => kquant::q4_k,
        BlockFormat::Q5_K => kquant::q5_k,
        BlockFormat::Q6_K => kquant::q6_k,
        BlockFormat::IQ4_NL => lut4::iq4_nl,
        BlockFormat::IQ4_XS => lut4::iq4_xs,
        BlockFormat::MXFP4 => lut4::mxfp4,
        BlockFormat::NVFP4 => lut4::nvfp4,
        BlockFormat::TQ1_0 => ternary::tq1_0,
        BlockFormat::TQ2_0 => ternary::tq2_0,
        BlockFormat::IQ2_XXS => grid::grid::<Iq2Xxs>,
        BlockFormat::IQ2_XS => grid::grid::<Iq2Xs>,
        BlockFormat::IQ2_S => grid::grid::<Iq2S>,
        BlockFormat::IQ3_XXS => grid::grid::<Iq3Xxs>,
        BlockFormat::IQ3_S => grid::grid::<Iq3S>,
        BlockFormat::IQ1_S => grid::iq1::<Iq1S>,
        BlockFormat::IQ1_M => grid::iq1::<Iq1M>,
        BlockFormat::Q1_0 => lowbit::q1_0,
        BlockFormat::Q2_0 => lowbit::q2_0,
    })
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
