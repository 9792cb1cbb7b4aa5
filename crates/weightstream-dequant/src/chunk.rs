//! One chunk on one thread: check it, then run the kernel for the ISA.

use crate::isa::Isa;
use crate::kernel::{fp8_runs, grid_runs, DequantError, Kernel, ScaleGrid};
use crate::scalar;
use weightstream_format::{BlockFormat, Fp8Format};

/// Dequantize elements `[first, first + dst.len())` of a tensor from `src`,
/// the bytes of exactly those elements.
///
/// `isa` must be supported by this CPU (`Isa::detect()` always is); an
/// unsupported one runs the scalar kernel.
pub fn dequantize(kernel: &Kernel, first: u64, src: &[u8], dst: &mut [u16], isa: Isa) -> Result<(), DequantError> {
    kernel.check(first, dst.len() as u64, src.len() as u64)?;
    let isa = if isa.supported() { isa } else { Isa::Scalar };
    match *kernel {
        Kernel::Block(f) => run(isa, src, dst, scalar::block_kernel(f), avx2_fn(Avx2Kernel::Block(f))),
        Kernel::F32 => run(isa, src, dst, scalar::f32, avx2_fn(Avx2Kernel::F32)),
        Kernel::F16 => run(isa, src, dst, scalar::f16, avx2_fn(Avx2Kernel::F16)),
        // A copy: no ISA does better than the compiler's memcpy.
        Kernel::BF16 => scalar::bf16(src, dst),
        Kernel::Fp8 { format, cols, scales, .. } => fp8(isa, format, cols, scales.as_ref(), first, src, dst),
        Kernel::E2m1 { cols, scales, .. } => e2m1(isa, cols, &scales, first, src, dst),
        Kernel::Int { bits, cols, scales, zeros, round_f16, .. } => {
            // Runs on whole words (Kernel::check): elements i.. are bytes i * bits / 8...
            let per_byte = 8 / bits as usize;
            grid_runs(cols, &scales, first, dst.len(), |k, i, len| {
                let zero = zeros.as_ref().map_or(0.0, |z| z.value(k));
                scalar::int_run(bits, scales.value(k), zero, round_f16, &src[i / per_byte..(i + len) / per_byte], &mut dst[i..i + len])
            })
        }
    }
    Ok(())
}

#[derive(Clone, Copy)]
enum Avx2Kernel {
    Block(BlockFormat),
    F32,
    F16,
}

type KernelFn = fn(&[u8], &mut [u16]);

/// An AVX2 kernel: callable only where AVX2 and F16C are present.
type Avx2Fn = unsafe fn(&[u8], &mut [u16]);

fn avx2_fn(k: Avx2Kernel) -> Option<Avx2Fn> {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::x86::avx2;
        Some(match k {
            Avx2Kernel::Block(f) => return avx2::block_kernel(f),
            Avx2Kernel::F32 => avx2::f32,
            Avx2Kernel::F16 => avx2::f16,
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = k;
        None
    }
}

fn run(isa: Isa, src: &[u8], dst: &mut [u16], portable: KernelFn, avx2: Option<Avx2Fn>) {
    match (isa, avx2) {
        // SAFETY: `isa` is Avx2 only when `Isa::Avx2.supported()` confirmed
        // AVX2 and F16C (`dequantize` falls back to scalar otherwise); the
        // slice lengths were checked by Kernel::check.
        (Isa::Avx2, Some(f)) => unsafe { f(src, dst) },
        _ => portable(src, dst),
    }
}

/// FP8 chunks go to the ISA's kernel whole: the run loop below is inlined
/// into it, so no call crosses the target-feature boundary per run
/// (docs/PERFORMANCE.md, CPU experiments 4-6).
fn fp8(isa: Isa, format: Fp8Format, cols: u64, scales: Option<&ScaleGrid>, first: u64, src: &[u8], dst: &mut [u16]) {
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx2 {
        // SAFETY: AVX2 and F16C confirmed by the caller; src.len() == dst.len().
        unsafe { crate::x86::avx2::fp8(format, cols, scales, first, src, dst) };
        return;
    }
    let _ = isa;
    fp8_runs(cols, scales, first, dst.len(), |scale, i, len| scalar::fp8_run(format, scale, &src[i..i + len], &mut dst[i..i + len]));
}

/// E2M1 chunks: a run per group scale; each run starts on an even element
/// (Kernel::check: even rows and groups, chunks on pairs).
fn e2m1(isa: Isa, cols: u64, scales: &ScaleGrid, first: u64, src: &[u8], dst: &mut [u16]) {
    let _ = isa;
    fp8_runs(cols, Some(scales), first, dst.len(), |scale, i, len| {
        scalar::e2m1_run(scale, &src[i / 2..(i + len) / 2], &mut dst[i..i + len])
    });
}
