//! Portable kernels: the reference, and the path on CPUs without AVX2.
//! One file per format family (the same names under x86/, arm/ and
//! kernels/cuda/); this file dispatches and holds the shared readers.
//! Written as plain loops over fixed-size blocks, which LLVM vectorises
//! for the target's baseline SIMD (SSE2, NEON).

use crate::numerics::f16_to_f32;
use crate::output::Output;
use weightstream_blocks::BlockFormat;

mod float;
mod fp8;
mod grid;
mod kquant;
mod legacy;
mod lowbit;
mod lut4;
mod packed;
mod ternary;

pub use float::{bf16, f16, f32};
pub use fp8::fp8_run;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) use grid::iq1_m_d;
#[cfg(target_arch = "aarch64")]
pub(crate) use grid::{iq1_delta, iq2_scale, u16_at, u32_at};
pub use grid::{iq1_m, iq1_s, iq2_s, iq2_xs, iq2_xxs, iq3_s, iq3_xxs};
pub(crate) use kquant::{k4_scale_min, q3_k_scale};
pub use kquant::{q2_k, q3_k, q4_k, q5_k, q6_k};
pub use legacy::{q4_0, q4_1, q5_0, q5_1, q8_0};
pub use lowbit::{q1_0, q2_0};
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) use lut4::{e8m0_half, iq4_xs_scale, ue4m3_half};
pub use lut4::{iq4_nl, iq4_xs, mxfp4, nvfp4};
pub use packed::{e2m1_run, int_run};
pub use ternary::{tq1_0, tq2_0};

/// The portable kernel of a block format: whole blocks of `src` to `dst`.
pub fn block_kernel<O: Output>(f: BlockFormat) -> fn(&[u8], &mut [u16]) {
    match f {
        BlockFormat::Q4_0 => q4_0::<O>,
        BlockFormat::Q4_1 => q4_1::<O>,
        BlockFormat::Q5_0 => q5_0::<O>,
        BlockFormat::Q5_1 => q5_1::<O>,
        BlockFormat::Q8_0 => q8_0::<O>,
        BlockFormat::Q2_K => q2_k::<O>,
        BlockFormat::Q3_K => q3_k::<O>,
        BlockFormat::Q4_K => q4_k::<O>,
        BlockFormat::Q5_K => q5_k::<O>,
        BlockFormat::Q6_K => q6_k::<O>,
        BlockFormat::IQ4_NL => iq4_nl::<O>,
        BlockFormat::IQ4_XS => iq4_xs::<O>,
        BlockFormat::MXFP4 => mxfp4::<O>,
        BlockFormat::NVFP4 => nvfp4::<O>,
        BlockFormat::IQ2_XXS => iq2_xxs::<O>,
        BlockFormat::IQ2_XS => iq2_xs::<O>,
        BlockFormat::IQ2_S => iq2_s::<O>,
        BlockFormat::IQ3_XXS => iq3_xxs::<O>,
        BlockFormat::IQ3_S => iq3_s::<O>,
        BlockFormat::IQ1_S => iq1_s::<O>,
        BlockFormat::IQ1_M => iq1_m::<O>,
        BlockFormat::TQ1_0 => tq1_0::<O>,
        BlockFormat::TQ2_0 => tq2_0::<O>,
        BlockFormat::Q1_0 => q1_0::<O>,
        BlockFormat::Q2_0 => q2_0::<O>,
    }
}

/// The f16 field at `offset` of a block, as f32 (exact).
#[inline(always)]
pub(crate) fn f16_at(b: &[u8], offset: usize) -> f32 {
    f16_to_f32(u16::from_le_bytes([b[offset], b[offset + 1]]))
}

/// The 2-bit field of element `e` (0..256) in a K-quant's 64 `qs` bytes:
/// each 32-byte half holds 128 elements, four 32-element groups at bit
/// shifts 0, 2, 4, 6 (Q2_K, Q3_K).
#[inline(always)]
pub(crate) fn crumb(qs: &[u8], e: usize) -> u8 {
    (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3
}
