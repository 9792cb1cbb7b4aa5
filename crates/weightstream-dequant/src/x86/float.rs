//! F32 -> BF16 or float16, F16 -> BF16, BF16 -> float16 on x86 (F16 to
//! float16 and BF16 to BF16 are copies, done by the portable kernels: a
//! conversion would lose NaN payloads).

/// AVX2 + F16C.
pub mod avx2 {
    use std::arch::x86_64::*;

    use crate::x86::avx2::{store16, Out256};

    use crate::scalar;

    #[target_feature(enable = "avx2,f16c")]
    pub unsafe fn f32<O: Out256>(src: &[u8], dst: &mut [u16]) {
        // SAFETY: the caller upholds this function's contract: the CPU has the
        // features it enables, and the pointers and lengths are as documented.
        unsafe {
            let n = dst.len() / 16 * 16;
            for i in (0..n).step_by(16) {
                // SAFETY: i + 16 <= n <= dst.len(), and src holds 4 bytes per element.
                let p = src.as_ptr().add(i * 4) as *const f32;
                store16::<O>(dst.as_mut_ptr().add(i), _mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8)));
            }
            scalar::f32::<O>(&src[n * 4..], &mut dst[n..]);
        }
    }

    #[target_feature(enable = "avx2,f16c")]
    pub unsafe fn f16(src: &[u8], dst: &mut [u16]) {
        // SAFETY: the caller upholds this function's contract: the CPU has the
        // features it enables, and the pointers and lengths are as documented.
        unsafe {
            let n = dst.len() / 16 * 16;
            for i in (0..n).step_by(16) {
                // SAFETY: as in f32, 2 bytes per element. vcvtph2ps is exact.
                let p = src.as_ptr().add(i * 2);
                let a = _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i));
                let b = _mm256_cvtph_ps(_mm_loadu_si128(p.add(16) as *const __m128i));
                store16::<crate::output::Bf16Out>(dst.as_mut_ptr().add(i), a, b);
            }
            scalar::f16::<crate::output::Bf16Out>(&src[n * 2..], &mut dst[n..]);
        }
    }

    /// BF16 -> float16 (for BF16 output it would not be the copy: NaN
    /// payloads; chunk.rs never picks it there): each value widened
    /// exactly to f32 (a 16-bit shift), then rounded once. Under AVX-512
    /// too (a memory-bound conversion; `vcvtps2ph` is the same).
    #[target_feature(enable = "avx2,f16c")]
    pub unsafe fn bf16<O: Out256>(src: &[u8], dst: &mut [u16]) {
        // SAFETY: the caller upholds this function's contract: the CPU has the
        // features it enables, and the pointers and lengths are as documented.
        unsafe {
            let n = dst.len() / 16 * 16;
            for i in (0..n).step_by(16) {
                // SAFETY: i + 16 <= n <= dst.len(), and src holds 2 bytes per element.
                let v = _mm256_loadu_si256(src.as_ptr().add(i * 2) as *const __m256i);
                let wide = |h: __m128i| _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h)));
                store16::<O>(dst.as_mut_ptr().add(i), wide(_mm256_castsi256_si128(v)), wide(_mm256_extracti128_si256::<1>(v)));
            }
            scalar::bf16::<O>(&src[n * 2..], &mut dst[n..]);
        }
    }
}

/// AVX-512 (F, BW, VL): F32 to either output with its exact rounding
/// (`Out512::Round512`), F16 to BF16 with the integer rounding and
/// (`_bf16`) with AVX512_BF16's `vcvtne2ps2bf16`.
pub mod avx512 {
    use std::arch::x86_64::*;

    use crate::x86::avx512::Out512;
    use crate::x86::avx512::{store, KernelFn, Round};

    use crate::scalar;

    /// F32 runs with `IntRound` only (`f32` below): any f32 may be a subnormal,
    /// and checking for them cost more than `vcvtne2ps2bf16` saved
    /// (docs/PERFORMANCE.md, CPU experiment 11).
    #[inline(always)]
    unsafe fn f32_body<R: Round>(src: &[u8], dst: &mut [u16]) {
        // SAFETY: inside a kernel with this module's features.
        unsafe {
            let n = dst.len() / 32 * 32;
            let mut i = 0;
            while i < n {
                // SAFETY: i + 32 <= n <= dst.len(), and src holds 4 bytes per element.
                let p = src.as_ptr().add(i * 4) as *const f32;
                let (a, b) = (_mm512_loadu_ps(p), _mm512_loadu_ps(p.add(16)));
                store(dst.as_mut_ptr().add(i), R::pack(a, b));
                i += 32;
            }
            scalar::f32::<R::Out>(&src[n * 4..], &mut dst[n..]);
        }
    }

    #[inline(always)]
    unsafe fn f16_body<R: Round>(src: &[u8], dst: &mut [u16]) {
        // SAFETY: inside a kernel with this module's features.
        unsafe {
            let n = dst.len() / 32 * 32;
            let mut i = 0;
            while i < n {
                // SAFETY: as in f32_body, 2 bytes per element. vcvtph2ps is exact,
                // and an f16 value is never an f32 subnormal.
                let p = src.as_ptr().add(i * 2);
                let a = _mm512_cvtph_ps(_mm256_loadu_si256(p as *const __m256i));
                let b = _mm512_cvtph_ps(_mm256_loadu_si256(p.add(32) as *const __m256i));
                store(dst.as_mut_ptr().add(i), R::pack(a, b));
                i += 32;
            }
            scalar::f16::<R::Out>(&src[n * 2..], &mut dst[n..]);
        }
    }

    /// F32: `O`'s exact rounding whatever the CPU has (see `f32_body`).
    pub fn f32<O: Out512>() -> KernelFn {
        f32_exact::<O::Round512>
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,f16c")]
    unsafe fn f32_exact<R: Round>(src: &[u8], dst: &mut [u16]) {
        // SAFETY: the caller confirmed these features (Isa::Avx512) and the
        // lengths (Kernel::check).
        unsafe { f32_body::<R>(src, dst) }
    }

    /// F16 to BF16 (to float16 it is a copy: chunk.rs).
    pub fn f16(bf16: bool) -> KernelFn {
        if bf16 {
            f16_bf16
        } else {
            f16_int::<crate::x86::avx512::IntRound>
        }
    }

    kernels512! {
        f16_int, f16_bf16 => f16_body;
    }
}
