//! One chunk on one thread: check it, then run the kernel for the ISA.

use crate::isa::Isa;
use crate::kernel::{DequantError, Kernel, ScaleGrid};
use crate::scalar;
use weightstream_format::Fp8Format;

/// Dequantize elements `[first, first + dst.len())` of a tensor from `src`,
/// the bytes of exactly those elements.
///
/// `isa` must be supported by this CPU (`Isa::detect()` always is); an
/// unsupported one runs the scalar kernel.
pub fn dequantize(kernel: &Kernel, first: u64, src: &[u8], dst: &mut [u16], isa: Isa) -> Result<(), DequantError> {
    kernel.check(first, dst.len() as u64, src.len() as u64)?;
    let isa = if isa.supported() { isa } else { Isa::Scalar };
    match *kernel {
        Kernel::Q4_0 => run(isa, src, dst, scalar::q4_0, avx2_fn(Avx2Kernel::Q4_0)),
        Kernel::Q8_0 => run(isa, src, dst, scalar::q8_0, avx2_fn(Avx2Kernel::Q8_0)),
        Kernel::F32 => run(isa, src, dst, scalar::f32, avx2_fn(Avx2Kernel::F32)),
        Kernel::F16 => run(isa, src, dst, scalar::f16, avx2_fn(Avx2Kernel::F16)),
        // A copy: no ISA does better than the compiler's memcpy.
        Kernel::BF16 => scalar::bf16(src, dst),
        Kernel::Fp8 { format, cols, scales, .. } => fp8(isa, format, cols, scales.as_ref(), first, src, dst),
    }
    Ok(())
}

#[derive(Clone, Copy)]
enum Avx2Kernel {
    Q4_0,
    Q8_0,
    F32,
    F16,
}

type KernelFn = fn(&[u8], &mut [u16]);

fn avx2_fn(k: Avx2Kernel) -> Option<KernelFn> {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::x86::avx2;
        // SAFETY (each): only called through `run`, after `Isa::Avx2.supported()`
        // confirmed AVX2 and F16C; slice lengths checked by Kernel::check.
        Some(match k {
            Avx2Kernel::Q4_0 => |s, d| unsafe { avx2::q4_0(s, d) },
            Avx2Kernel::Q8_0 => |s, d| unsafe { avx2::q8_0(s, d) },
            Avx2Kernel::F32 => |s, d| unsafe { avx2::f32(s, d) },
            Avx2Kernel::F16 => |s, d| unsafe { avx2::f16(s, d) },
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = k;
        None
    }
}

fn run(isa: Isa, src: &[u8], dst: &mut [u16], portable: KernelFn, avx2: Option<KernelFn>) {
    match (isa, avx2) {
        (Isa::Avx2, Some(f)) => f(src, dst),
        _ => portable(src, dst),
    }
}

fn fp8_run(isa: Isa, format: Fp8Format, scale: f32, src: &[u8], dst: &mut [u16]) {
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx2 {
        // SAFETY: AVX2 and F16C confirmed by the caller; src.len() == dst.len().
        unsafe { crate::x86::avx2::fp8_run(format, scale, src, dst) };
        return;
    }
    let _ = isa;
    scalar::fp8_run(format, scale, src, dst)
}

/// FP8: split the chunk into runs that share one scale (a block's width of
/// one row, a whole row for per-channel scales, everything for one scale).
fn fp8(isa: Isa, format: Fp8Format, cols: u64, scales: Option<&ScaleGrid>, first: u64, src: &[u8], dst: &mut [u16]) {
    let n = dst.len();
    let uniform = match scales {
        None => Some(1.0),
        Some(g) => g.uniform(),
    };
    if let Some(scale) = uniform {
        return fp8_run(isa, format, scale, src, dst);
    }
    let g = scales.expect("non-uniform scales exist");
    let bc = g.block_cols();
    let mut i = 0usize;
    while i < n {
        let e = first + i as u64;
        let (r, c) = (e / cols, e % cols);
        let run_end = ((c / bc + 1) * bc).min(cols);
        let len = ((run_end - c) as usize).min(n - i);
        fp8_run(isa, format, g.at(r, c), &src[i..i + len], &mut dst[i..i + len]);
        i += len;
    }
}
