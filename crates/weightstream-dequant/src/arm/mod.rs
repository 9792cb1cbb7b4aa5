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

/// The NEON kernel of a block format writing `O`.
pub fn block_kernel<O: neon::Out128>(f: BlockFormat) -> Option<neon::KernelFn> {
    use grid::{Iq1M, Iq1S, Iq2S, Iq2Xs, Iq2Xxs, Iq3S, Iq3Xxs};
    Some(match f {
        BlockFormat::Q4_0 => legacy::q4_0::<O>,
        BlockFormat::Q4_1 => legacy::q4_1::<O>,
        BlockFormat::Q5_0 => legacy::q5_0::<O>,
        BlockFormat::Q5_1 => legacy::q5_1::<O>,
        BlockFormat::Q8_0 => legacy::q8_0::<O>,
        BlockFormat::Q2_K => kquant::q2_k::<O>,
        BlockFormat::Q3_K => kquant::q3_k::<O>,
        BlockFormat::Q4_K => kquant::q4_k::<O>,
        BlockFormat::Q5_K => kquant::q5_k::<O>,
        BlockFormat::Q6_K => kquant::q6_k::<O>,
        BlockFormat::IQ4_NL => lut4::iq4_nl::<O>,
        BlockFormat::IQ4_XS => lut4::iq4_xs::<O>,
        BlockFormat::MXFP4 => lut4::mxfp4::<O>,
        BlockFormat::NVFP4 => lut4::nvfp4::<O>,
        BlockFormat::TQ1_0 => ternary::tq1_0::<O>,
        BlockFormat::TQ2_0 => ternary::tq2_0::<O>,
        BlockFormat::IQ2_XXS => grid::grid::<O, Iq2Xxs>,
        BlockFormat::IQ2_XS => grid::grid::<O, Iq2Xs>,
        BlockFormat::IQ2_S => grid::grid::<O, Iq2S>,
        BlockFormat::IQ3_XXS => grid::grid::<O, Iq3Xxs>,
        BlockFormat::IQ3_S => grid::grid::<O, Iq3S>,
        BlockFormat::IQ1_S => grid::iq1::<O, Iq1S>,
        BlockFormat::IQ1_M => grid::iq1::<O, Iq1M>,
        BlockFormat::Q1_0 => lowbit::q1_0::<O>,
        BlockFormat::Q2_0 => lowbit::q2_0::<O>,
    })
}

#[cfg(test)]
mod tests {
    /// Every block format has a NEON kernel (none falls back to the
    /// portable one under `Isa::Neon`); isa_parity checks their bits.
    #[test]
    fn every_block_format_has_a_neon_kernel() {
        for &f in weightstream_blocks::BlockFormat::ALL {
            assert!(super::block_kernel::<crate::output::Bf16Out>(f).is_some(), "{f:?} has no NEON kernel");
        }
    }
}
