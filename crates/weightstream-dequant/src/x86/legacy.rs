//! The legacy 32-element block formats on x86: Q4_0 and Q8_0 here (Q4_1,
//! Q5_0 and Q5_1 share the K-quants' emitter, in blocks.rs).

/// AVX2 + F16C.
pub mod avx2 {
    use std::arch::x86_64::*;

    use crate::x86::avx2::store16;

    use crate::numerics::f16_to_f32;

    /// 8 signed 32-bit integers scaled by d.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn scaled(q: __m256i, d: __m256) -> __m256 {
        _mm256_mul_ps(_mm256_cvtepi32_ps(q), d)
    }

    #[target_feature(enable = "avx2,f16c")]
    pub unsafe fn q4_0(src: &[u8], dst: &mut [u16]) {
        // SAFETY: the caller upholds this function's contract: the CPU has the
        // features it enables, and the pointers and lengths are as documented.
        unsafe {
            let n = src.len() / 18;
            let mask = _mm_set1_epi8(0x0F);
            let eight = _mm_set1_epi8(8);
            for k in 0..n {
                // SAFETY: block k lies inside src (k < src.len() / 18), its 32 outputs inside dst
                // (checked by Kernel::check: dst.len() == 32 * n).
                let p = src.as_ptr().add(k * 18);
                let o = dst.as_mut_ptr().add(k * 32);
                let d = _mm256_set1_ps(f16_to_f32(u16::from_le_bytes([*p, *p.add(1)])));
                let qs = _mm_loadu_si128(p.add(2) as *const __m128i);
                let lo = _mm_sub_epi8(_mm_and_si128(qs, mask), eight);
                let hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16::<4>(qs), mask), eight);
                store16(o, scaled(_mm256_cvtepi8_epi32(lo), d), scaled(_mm256_cvtepi8_epi32(_mm_srli_si128::<8>(lo)), d));
                store16(o.add(16), scaled(_mm256_cvtepi8_epi32(hi), d), scaled(_mm256_cvtepi8_epi32(_mm_srli_si128::<8>(hi)), d));
            }
        }
    }

    #[target_feature(enable = "avx2,f16c")]
    pub unsafe fn q8_0(src: &[u8], dst: &mut [u16]) {
        // SAFETY: the caller upholds this function's contract: the CPU has the
        // features it enables, and the pointers and lengths are as documented.
        unsafe {
            let n = src.len() / 34;
            for k in 0..n {
                // SAFETY: as in q4_0, with 34-byte blocks.
                let p = src.as_ptr().add(k * 34);
                let o = dst.as_mut_ptr().add(k * 32);
                let d = _mm256_set1_ps(f16_to_f32(u16::from_le_bytes([*p, *p.add(1)])));
                let a = _mm_loadu_si128(p.add(2) as *const __m128i);
                let b = _mm_loadu_si128(p.add(18) as *const __m128i);
                store16(o, scaled(_mm256_cvtepi8_epi32(a), d), scaled(_mm256_cvtepi8_epi32(_mm_srli_si128::<8>(a)), d));
                store16(o.add(16), scaled(_mm256_cvtepi8_epi32(b), d), scaled(_mm256_cvtepi8_epi32(_mm_srli_si128::<8>(b)), d));
            }
        }
    }
}

/// AVX-512 (F, BW, VL), each kernel with the integer BF16 rounding and
/// (`_bf16`) with AVX512_BF16's `vcvtne2ps2bf16`.
pub mod avx512 {
    use std::arch::x86_64::*;

    use crate::x86::avx512::{f16_finite, splat_f16, store, Bf16Round, IntRound, Round};

    /// 32 values `d * q` from 32 signed bytes (16 in `lo`, 16 in `hi`), rounded
    /// and stored: `d` is an f16 value (never a subnormal product), finite or not.
    #[inline(always)]
    unsafe fn emit_q<R: Round>(lo: __m128i, hi: __m128i, h: u16, o: *mut u16) {
        // SAFETY: inside a kernel with this module's features; o has 32
        // writable u16 (the caller's guarantee).
        unsafe {
            let d = splat_f16(h);
            let a = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo)), d);
            let b = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi)), d);
            // A finite d times |q| <= 128 is finite; the branch is per block and
            // predictable (NaN and infinite scales are edge cases).
            store(o, if f16_finite(h) { R::pack_ordinary(a, b) } else { R::pack(a, b) });
        }
    }

    #[inline(always)]
    unsafe fn q4_0_body<R: Round>(src: &[u8], dst: &mut [u16]) {
        // SAFETY: inside a kernel with this module's features.
        unsafe {
            let n = src.len() / 18;
            let mask = _mm_set1_epi8(0x0F);
            let eight = _mm_set1_epi8(8);
            for k in 0..n {
                // SAFETY: block k lies inside src (k < src.len() / 18), its 32
                // outputs inside dst (Kernel::check: dst.len() == 32 * n).
                let p = src.as_ptr().add(k * 18);
                let o = dst.as_mut_ptr().add(k * 32);
                let h = u16::from_le_bytes([*p, *p.add(1)]);
                let qs = _mm_loadu_si128(p.add(2) as *const __m128i);
                let lo = _mm_sub_epi8(_mm_and_si128(qs, mask), eight);
                let hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16::<4>(qs), mask), eight);
                emit_q::<R>(lo, hi, h, o);
            }
        }
    }

    #[inline(always)]
    unsafe fn q8_0_body<R: Round>(src: &[u8], dst: &mut [u16]) {
        // SAFETY: inside a kernel with this module's features.
        unsafe {
            let n = src.len() / 34;
            for k in 0..n {
                // SAFETY: as in q4_0_body, with 34-byte blocks.
                let p = src.as_ptr().add(k * 34);
                let o = dst.as_mut_ptr().add(k * 32);
                let h = u16::from_le_bytes([*p, *p.add(1)]);
                let lo = _mm_loadu_si128(p.add(2) as *const __m128i);
                let hi = _mm_loadu_si128(p.add(18) as *const __m128i);
                emit_q::<R>(lo, hi, h, o);
            }
        }
    }

    kernels512! {
        q4_0_int, q4_0_bf16 => q4_0_body;
        q8_0_int, q8_0_bf16 => q8_0_body;
    }
}
