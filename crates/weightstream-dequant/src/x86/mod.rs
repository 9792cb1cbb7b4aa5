//! x86-64 kernels (AVX2 + F16C; AVX-512 where `avx512_block_kernel`
//! lists one), chosen at run time by `Isa::detect`.
//!
//! `avx2.rs` and `avx512.rs` hold only the primitives (rounding to BF16 or float16,
//! packing, stores), `emit.rs` and `lookup.rs` the helpers several
//! families share; the kernels live in family files with the same names
//! as scalar/, arm/ and kernels/cuda/: `legacy.rs`, `kquant.rs`,
//! `lut4.rs`, `grid.rs` (+ `grid512.rs`), `ternary.rs`, `lowbit.rs`, `float.rs`,
//! `fp8.rs`, `packed256.rs`/`packed512.rs` (E2M1 and INT). This file
//! dispatches, so the imports run one way: families -> helpers ->
//! primitives.

/// Each kernel body three ways: `$avx2` for AVX2 + F16C with the
/// module's `Avx2<O>` (`O`: BF16 or float16 output), `$avx512_int` for
/// AVX-512 with its `Avx512<R>` (`R`: `IntRound`, the integer BF16
/// rounding, or `F16Round`; never `Bf16Round`, whose feature `$avx512`
/// enables), `$avx512` for AVX-512 + AVX512_BF16 with `Avx512<Bf16Round>`
/// (legacy.rs, kquant.rs, grid.rs).
macro_rules! kernels {
    ($($avx2:ident, $avx512_int:ident, $avx512:ident => $body:ident;)*) => {$(
        #[target_feature(enable = "avx2,f16c")]
        pub unsafe fn $avx2<O: $crate::x86::avx2::Out256>(src: &[u8], dst: &mut [u16]) {
            // SAFETY: the caller confirmed these features (Isa::Avx2) and
            // the lengths (Kernel::check).
            unsafe { $body::<Avx2<O>>(src, dst) }
        }

        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,f16c")]
        pub unsafe fn $avx512_int<R: $crate::x86::avx512::Round>(src: &[u8], dst: &mut [u16]) {
            // SAFETY: the caller confirmed these features (Isa::Avx512 or
            // Isa::Avx512Int) and the lengths (Kernel::check).
            unsafe { $body::<Avx512<R>>(src, dst) }
        }

        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,f16c,avx512bf16")]
        pub unsafe fn $avx512(src: &[u8], dst: &mut [u16]) {
            // SAFETY: the caller confirmed these features (Isa::Avx512 and
            // avx512::has_bf16) and the lengths (Kernel::check).
            unsafe { $body::<Avx512<$crate::x86::avx512::Bf16Round>>(src, dst) }
        }
    )*};
}

/// An AVX-512 kernel body twice: `$int` generic over the rounding
/// (`IntRound` or `F16Round`), `$bf16` with AVX512_BF16 (`Bf16Round`)
/// (legacy.rs, float.rs).
macro_rules! kernels512 {
    ($($int:ident, $bf16:ident => $body:ident;)*) => {$(
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,f16c")]
        pub unsafe fn $int<R: $crate::x86::avx512::Round>(src: &[u8], dst: &mut [u16]) {
            // SAFETY: the caller confirmed these features (Isa::Avx512) and
            // the lengths (Kernel::check).
            unsafe { $body::<R>(src, dst) }
        }

        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,f16c,avx512bf16")]
        pub unsafe fn $bf16(src: &[u8], dst: &mut [u16]) {
            // SAFETY: as in the integer variant, AVX512_BF16 confirmed too.
            unsafe { $body::<$crate::x86::avx512::Bf16Round>(src, dst) }
        }
    )*};
}

pub mod avx2;
pub mod avx512;
mod emit;
pub mod float;
pub mod fp8;
mod grid;
mod grid512;
mod kquant;
mod legacy;
mod lookup;
mod lowbit;
mod lut4;
pub mod packed256;
pub mod packed512;
mod packed512_int8;
mod ternary;

use avx2::Out256;
use avx512::Round;
use weightstream_blocks::BlockFormat;

/// The AVX2 kernel of a block format writing `O`.
pub fn avx2_block_kernel<O: Out256>(f: BlockFormat) -> Option<unsafe fn(&[u8], &mut [u16])> {
    // Callable only after `Isa::Avx2.supported()` (chunk::run checks).
    Some(match f {
        BlockFormat::Q4_0 => legacy::q4_0::<O>,
        BlockFormat::Q8_0 => legacy::q8_0::<O>,
        BlockFormat::Q4_1 => legacy::q4_1::<O>,
        BlockFormat::Q5_0 => legacy::q5_0::<O>,
        BlockFormat::Q5_1 => legacy::q5_1::<O>,
        BlockFormat::Q2_K => kquant::q2_k::<O>,
        BlockFormat::Q3_K => kquant::q3_k::<O>,
        BlockFormat::Q4_K => kquant::q4_k::<O>,
        BlockFormat::Q5_K => kquant::q5_k::<O>,
        BlockFormat::Q6_K => kquant::q6_k::<O>,
        BlockFormat::IQ4_NL => lut4::iq4_nl::<O>,
        BlockFormat::IQ4_XS => lut4::iq4_xs::<O>,
        BlockFormat::MXFP4 => lut4::mxfp4::<O>,
        BlockFormat::NVFP4 => lut4::nvfp4::<O>,
        BlockFormat::IQ2_XXS => grid::iq2_xxs::<O>,
        BlockFormat::IQ2_XS => grid::iq2_xs::<O>,
        BlockFormat::IQ2_S => grid::iq2_s::<O>,
        BlockFormat::IQ3_XXS => grid::iq3_xxs::<O>,
        BlockFormat::IQ3_S => grid::iq3_s::<O>,
        BlockFormat::IQ1_S => grid::iq1_s::<O>,
        BlockFormat::IQ1_M => grid::iq1_m::<O>,
        BlockFormat::TQ1_0 => ternary::tq1_0::<O>,
        BlockFormat::TQ2_0 => ternary::tq2_0::<O>,
        BlockFormat::Q1_0 => lowbit::q1_0::<O>,
        BlockFormat::Q2_0 => lowbit::q2_0::<O>,
    })
}

/// The AVX-512 kernel of a block format writing `O`, if it has one:
/// BF16 with the integer rounding or (`bf16`) `vcvtne2ps2bf16`, float16
/// with `vcvtps2ph` (`bf16` ignored). The codebook and ternary formats
/// (IQ4_NL, IQ4_XS, MXFP4, NVFP4, TQ1_0, TQ2_0) have none: their AVX2
/// kernels look every output up in a table already.
pub fn avx512_block_kernel<O: avx512::Out512>(f: BlockFormat, bf16: bool) -> Option<avx512::KernelFn> {
    let (exact, cvt) = avx512_kernels::<O::Round512>(f)?;
    Some(if bf16 && O::DTYPE == weightstream_blocks::OutDtype::BF16 { cvt } else { exact })
}

/// A block format's AVX-512 kernels: rounded by `R` (`IntRound` or
/// `F16Round`), and by `vcvtne2ps2bf16` (BF16 only).
fn avx512_kernels<R: Round>(f: BlockFormat) -> Option<(avx512::KernelFn, avx512::KernelFn)> {
    use legacy as l;
    Some(match f {
        BlockFormat::Q4_0 => (l::q4_0_int::<R>, l::q4_0_bf16),
        BlockFormat::Q8_0 => (l::q8_0_int::<R>, l::q8_0_bf16),
        BlockFormat::Q4_1 => (l::q4_1_avx512_int::<R>, l::q4_1_avx512),
        BlockFormat::Q5_0 => (l::q5_0_avx512_int::<R>, l::q5_0_avx512),
        BlockFormat::Q5_1 => (l::q5_1_avx512_int::<R>, l::q5_1_avx512),
        BlockFormat::Q2_K => (kquant::q2_k_avx512_int::<R>, kquant::q2_k_avx512),
        BlockFormat::Q3_K => (kquant::q3_k_avx512_int::<R>, kquant::q3_k_avx512),
        BlockFormat::Q4_K => (kquant::q4_k_avx512_int::<R>, kquant::q4_k_avx512),
        BlockFormat::Q5_K => (kquant::q5_k_avx512_int::<R>, kquant::q5_k_avx512),
        BlockFormat::Q6_K => (kquant::q6_k_avx512_int::<R>, kquant::q6_k_avx512),
        BlockFormat::IQ2_XXS => (grid::iq2_xxs_avx512_int::<R>, grid::iq2_xxs_avx512),
        BlockFormat::IQ2_XS => (grid::iq2_xs_avx512_int::<R>, grid::iq2_xs_avx512),
        BlockFormat::IQ2_S => (grid::iq2_s_avx512_int::<R>, grid::iq2_s_avx512),
        BlockFormat::IQ3_XXS => (grid::iq3_xxs_avx512_int::<R>, grid::iq3_xxs_avx512),
        BlockFormat::IQ3_S => (grid::iq3_s_avx512_int::<R>, grid::iq3_s_avx512),
        BlockFormat::IQ1_S => (grid::iq1_s_avx512_int::<R>, grid::iq1_s_avx512),
        BlockFormat::IQ1_M => (grid::iq1_m_avx512_int::<R>, grid::iq1_m_avx512),
        // One kernel for both: only the per-block table is rounded (by R::Out's exact rounding).
        BlockFormat::Q1_0 => (lowbit::q1_0_avx512::<R::Out>, lowbit::q1_0_avx512::<R::Out>),
        BlockFormat::Q2_0 => (lowbit::q2_0_avx512::<R::Out>, lowbit::q2_0_avx512::<R::Out>),
        _ => return None,
    })
}
