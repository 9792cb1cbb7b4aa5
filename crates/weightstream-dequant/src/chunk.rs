//! One chunk on one thread: check it, then run the kernel for the ISA.

use crate::isa::Isa;
use crate::kernel::{fp8_runs, grid_runs, DequantError, IntPack, Kernel, ScaleGrid};
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
use crate::output::Output;
use crate::output::{Bf16Out, F16Out};
use crate::scalar;
use weightstream_blocks::{BlockFormat, Fp8Format, OutDtype};

/// Dequantize elements `[first, first + dst.len())` of a tensor from `src`,
/// the bytes of exactly those elements, to `out` (BF16 or float16 bits).
///
/// `isa` must be supported by this CPU (`Isa::detect()` always is); an
/// unsupported one runs the scalar kernel.
pub fn dequantize(kernel: &Kernel, out: OutDtype, first: u64, src: &[u8], dst: &mut [u16], isa: Isa) -> Result<(), DequantError> {
    kernel.check(first, dst.len() as u64, src.len() as u64)?;
    let isa = if isa.supported() { isa } else { Isa::Scalar };
    match out {
        OutDtype::BF16 => dequantize_as::<Bf16Out>(kernel, first, src, dst, isa),
        // The same kernel bodies, rounding to float16 (docs/numerics.md).
        OutDtype::F16 => dequantize_as::<F16Out>(kernel, first, src, dst, isa),
    }
    Ok(())
}

/// One output type's kernels, `kernel` already checked: the vector ones
/// (`simd_fn`, `fp8`, `e2m1`, `int` below) for either output.
fn dequantize_as<O: SimdOut>(kernel: &Kernel, first: u64, src: &[u8], dst: &mut [u16], isa: Isa) {
    match *kernel {
        Kernel::Block(f) => run(src, dst, scalar::block_kernel::<O>(f), simd_fn::<O>(isa, Simd::Block(f))),
        Kernel::F32 => run(src, dst, scalar::f32::<O>, simd_fn::<O>(isa, Simd::F32)),
        Kernel::F16 => run(src, dst, scalar::f16::<O>, simd_fn::<O>(isa, Simd::F16)),
        // To BF16 a copy: no ISA does better than the compiler's loop. To
        // float16 one rounding, vectorised (the portable one branches per value).
        Kernel::BF16 => run(src, dst, scalar::bf16::<O>, simd_fn::<O>(isa, Simd::BF16)),
        Kernel::Fp8 { format, cols, scales, .. } => fp8::<O>(isa, format, cols, scales.as_ref(), first, src, dst),
        Kernel::E2m1 { cols, scales, .. } => e2m1::<O>(isa, cols, &scales, first, src, dst),
        Kernel::Int { bits, cols, scales, zeros, round_f16, .. } => {
            int::<O>(isa, IntPack { bits, cols, scales, zeros, to_f16: round_f16 }, first, src, dst)
        }
    }
}

/// The path `dequantize` takes for `kernel` under `isa`: `isa` itself, or
/// what it falls back to: AVX2 for a block format without an AVX-512 kernel
/// (`simd_fn`) and for BF16 to float16, the portable code for an
/// unsupported ISA and for the copies (BF16 to BF16, F16 to float16).
/// What `weightstream bench` reports per kernel.
pub fn runs_on(kernel: &Kernel, out: OutDtype, isa: Isa) -> Isa {
    let copy = match kernel {
        Kernel::BF16 => out == OutDtype::BF16,
        Kernel::F16 => out == OutDtype::F16,
        _ => false,
    };
    if !isa.supported() || copy {
        return Isa::Scalar;
    }
    #[cfg(target_arch = "x86_64")]
    if matches!(isa, Isa::Avx512 | Isa::Avx512Int) {
        match kernel {
            Kernel::BF16 => return Isa::Avx2,
            // Every rounding exists or none (x86::avx512_kernels).
            Kernel::Block(f) if crate::x86::avx512_block_kernel::<Bf16Out>(*f, false).is_none() => return Isa::Avx2,
            _ => {}
        }
    }
    isa
}

/// An output the vector kernels write: it brings its vector roundings
/// (x86: `x86::avx512::Out512`, AVX2's and AVX-512's; aarch64:
/// `arm::neon::Out128`); elsewhere any `Output`.
#[cfg(target_arch = "x86_64")]
pub(crate) trait SimdOut: crate::x86::avx512::Out512 {}
#[cfg(target_arch = "x86_64")]
impl<O: crate::x86::avx512::Out512> SimdOut for O {}
#[cfg(target_arch = "aarch64")]
pub(crate) trait SimdOut: crate::arm::neon::Out128 {}
#[cfg(target_arch = "aarch64")]
impl<O: crate::arm::neon::Out128> SimdOut for O {}
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(crate) trait SimdOut: Output {}
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
impl<O: Output> SimdOut for O {}

#[derive(Clone, Copy)]
enum Simd {
    Block(BlockFormat),
    F32,
    F16,
    /// BF16 to float16 only (to BF16 it is the portable copy).
    BF16,
}

type KernelFn = fn(&[u8], &mut [u16]);

/// A vector kernel: callable only where its ISA's features are present.
type SimdFn = unsafe fn(&[u8], &mut [u16]);

/// The kernel `isa` runs for `k` writing `O`, `None` for the portable one
/// (F16 to float16: a copy, NaN payloads kept, which a conversion would
/// not keep). Under
/// `Isa::Avx512` and `Isa::Avx512Int`, a format without an AVX-512 kernel
/// runs its AVX2 one: IQ4_NL, IQ4_XS, MXFP4, NVFP4, TQ1_0 and TQ2_0, whose
/// AVX2 kernels look every output up in a table
/// (`x86::avx512_block_kernel` lists the others). Under `Isa::Neon` every
/// format has a NEON kernel. `isa` must be supported (checked by the
/// caller).
fn simd_fn<O: SimdOut>(isa: Isa, k: Simd) -> Option<SimdFn> {
    let copy = match k {
        Simd::F16 => O::DTYPE == OutDtype::F16,
        Simd::BF16 => O::DTYPE == OutDtype::BF16,
        _ => false,
    };
    if copy {
        return None;
    }
    #[cfg(target_arch = "x86_64")]
    {
        use crate::x86::{self, avx512, float};
        let avx2_fn = |k| match k {
            Simd::Block(f) => x86::avx2_block_kernel::<O>(f),
            Simd::F32 => Some(float::avx2::f32::<O> as SimdFn),
            Simd::F16 => Some(float::avx2::f16 as SimdFn),
            Simd::BF16 => Some(float::avx2::bf16::<O> as SimdFn),
        };
        match isa {
            Isa::Scalar | Isa::Neon => None,
            Isa::Avx2 => avx2_fn(k),
            Isa::Avx512 | Isa::Avx512Int => {
                let bf16 = isa == Isa::Avx512 && avx512::has_bf16();
                match k {
                    Simd::Block(f) => x86::avx512_block_kernel::<O>(f, bf16).or_else(|| avx2_fn(k)),
                    Simd::F32 => Some(float::avx512::f32::<O>()),
                    Simd::F16 => Some(float::avx512::f16(bf16)),
                    Simd::BF16 => avx2_fn(k),
                }
            }
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        use crate::arm::{self, float};
        match (isa, k) {
            (Isa::Neon, Simd::Block(f)) => arm::block_kernel::<O>(f),
            (Isa::Neon, Simd::F32) => Some(float::f32::<O> as SimdFn),
            (Isa::Neon, Simd::F16) => Some(float::f16 as SimdFn),
            (Isa::Neon, Simd::BF16) => Some(float::bf16::<O> as SimdFn),
            _ => None,
        }
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = (isa, k);
        None
    }
}

fn run(src: &[u8], dst: &mut [u16], portable: KernelFn, simd: Option<SimdFn>) {
    match simd {
        // SAFETY: simd_fn returns a kernel only for a supported ISA
        // (`dequantize` falls back to scalar otherwise): AVX2 and F16C for
        // Isa::Avx2; AVX-512 F/BW/VL, F16C and AVX2 for Isa::Avx512 and
        // Isa::Avx512Int, AVX512_BF16 confirmed by `has_bf16` for the bf16
        // kernels; NEON for Isa::Neon (every aarch64 CPU); the slice lengths
        // were checked by Kernel::check.
        Some(f) => unsafe { f(src, dst) },
        None => portable(src, dst),
    }
}

/// FP8 chunks go to the ISA's kernel whole: the run loop below is inlined
/// into it, so no call crosses the target-feature boundary per run
/// (docs/PERFORMANCE.md, CPU experiments 4-6).
#[allow(clippy::too_many_arguments)]
fn fp8<O: SimdOut>(isa: Isa, format: Fp8Format, cols: u64, scales: Option<&ScaleGrid>, first: u64, src: &[u8], dst: &mut [u16]) {
    #[cfg(target_arch = "x86_64")]
    match isa {
        Isa::Scalar | Isa::Neon => {}
        Isa::Avx2 => {
            // SAFETY: AVX2 and F16C confirmed by the caller; src.len() == dst.len().
            unsafe { crate::x86::fp8::avx2::<O>(format, cols, scales, first, src, dst) };
            return;
        }
        Isa::Avx512 | Isa::Avx512Int => {
            use crate::x86::{avx512, fp8};
            let bf16 = isa == Isa::Avx512 && avx512::has_bf16();
            // SAFETY: Isa::Avx512 supported (checked by the caller), AVX512_BF16
            // by has_bf16 where bf16; src.len() == dst.len().
            unsafe { fp8::avx512::<O>(bf16, format, cols, scales, first, src, dst) };
            return;
        }
    }
    #[cfg(target_arch = "aarch64")]
    if isa == Isa::Neon {
        // SAFETY: NEON (every aarch64 CPU); src.len() == dst.len().
        unsafe { crate::arm::fp8::fp8::<O>(format, cols, scales, first, src, dst) };
        return;
    }
    let _ = isa;
    fp8_runs(cols, scales, first, dst.len(), |scale, i, len| scalar::fp8_run::<O>(format, scale, &src[i..i + len], &mut dst[i..i + len]));
}

/// E2M1 chunks: a run per group scale; each run starts on an even element
/// (Kernel::check: even rows and groups, chunks on pairs). AVX2, AVX-512
/// and NEON have kernels (x86/packed256.rs, packed512.rs, arm/scaled.rs).
fn e2m1<O: SimdOut>(isa: Isa, cols: u64, scales: &ScaleGrid, first: u64, src: &[u8], dst: &mut [u16]) {
    #[cfg(target_arch = "x86_64")]
    match isa {
        Isa::Scalar | Isa::Neon => {}
        Isa::Avx2 => {
            // SAFETY: AVX2 and F16C supported (checked by the caller);
            // Kernel::check matched src to dst.
            unsafe { crate::x86::packed256::e2m1::<O>(cols, scales, first, src, dst) };
            return;
        }
        Isa::Avx512 | Isa::Avx512Int => {
            let bf16 = isa == Isa::Avx512 && crate::x86::avx512::has_bf16();
            // SAFETY: Isa::Avx512 supported (checked by the caller),
            // AVX512_BF16 by has_bf16 where bf16; Kernel::check matched src
            // to dst.
            unsafe { crate::x86::packed512::e2m1::<O>(bf16, cols, scales, first, src, dst) };
            return;
        }
    }
    #[cfg(target_arch = "aarch64")]
    if isa == Isa::Neon {
        // SAFETY: NEON (every aarch64 CPU); Kernel::check matched src to dst.
        unsafe { crate::arm::packed::e2m1::<O>(cols, scales, first, src, dst) };
        return;
    }
    let _ = isa;
    fp8_runs(cols, Some(scales), first, dst.len(), |scale, i, len| {
        scalar::e2m1_run::<O>(scale, &src[i / 2..(i + len) / 2], &mut dst[i..i + len])
    });
}

/// Integer-pack chunks: a run per group scale and zero point, on whole
/// words (Kernel::check). AVX2, AVX-512 and NEON have kernels
/// (x86/packed256.rs, packed512.rs, arm/scaled.rs).
fn int<O: SimdOut>(isa: Isa, pack: IntPack, first: u64, src: &[u8], dst: &mut [u16]) {
    #[cfg(target_arch = "x86_64")]
    match isa {
        Isa::Scalar | Isa::Neon => {}
        Isa::Avx2 => {
            // SAFETY: AVX2 and F16C supported (checked by the caller);
            // Kernel::check matched src to dst.
            unsafe { crate::x86::packed256::int::<O>(pack, first, src, dst) };
            return;
        }
        Isa::Avx512 | Isa::Avx512Int => {
            // The INT8 table lookup wherever the CPU has VBMI (Ice Lake
            // has it without AVX512_BF16); the value-by-value kernel it
            // falls back to stays tested through short runs (group scales).
            let vbmi = crate::x86::packed512::has_vbmi();
            // SAFETY: Isa::Avx512 supported (checked by the caller), VBMI
            // where vbmi; Kernel::check matched src to dst.
            unsafe { crate::x86::packed512::int::<O>(vbmi, pack, first, src, dst) };
            return;
        }
    }
    #[cfg(target_arch = "aarch64")]
    if isa == Isa::Neon {
        // SAFETY: NEON (every aarch64 CPU); Kernel::check matched src to dst.
        unsafe { crate::arm::packed::int::<O>(pack, first, src, dst) };
        return;
    }
    let _ = isa;
    let IntPack { bits, cols, ref scales, zeros, to_f16 } = pack;
    let per_byte = 8 / bits as usize;
    grid_runs(cols, scales, first, dst.len(), |k, i, len| {
        let zero = zeros.map_or(0.0, |z| z.value(k));
        scalar::int_run::<O>(bits, scales.value(k), zero, to_f16, &src[i / per_byte..(i + len) / per_byte], &mut dst[i..i + len])
    });
}
