//! FP8 (E4M3, E5M2) times its scales -> BF16 on x86: a whole chunk in
//! runs of one scale, each run inside one target-feature function.

/// AVX2 + F16C.
pub mod avx2 {
    use std::arch::x86_64::*;

    use crate::kernel::{fp8_runs, ScaleGrid};
    use crate::x86::avx2::store16;

    use crate::scalar;
    use weightstream_blocks::Fp8Format;

    /// 16 FP8 codes -> 16 binary16 values whose exact f32 conversions, times
    /// `rebias`, are the codes' exact values.
    ///
    /// E5M2 is the high byte of a binary16: `v << 8`, infinities and NaNs
    /// included, rebias 1. E4M3 magnitudes shifted into binary16 position read
    /// as the value times 2^-8 (normals and subnormals alike), rebias 2^8; its NaN
    /// codes become binary16 NaNs. No f32 subnormal ever appears (AMD and Intel
    /// cores slow down on those), unlike `numerics::e4m3_to_f32`'s construction.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn fp8_to_f16(format: Fp8Format, v: __m128i) -> __m256i {
        let w = _mm256_cvtepu8_epi16(v);
        match format {
            Fp8Format::E5M2 => _mm256_slli_epi16::<8>(w),
            Fp8Format::E4M3 => {
                // Byte in the high half, then an arithmetic shift: the sign stays
                // at bit 15, the magnitude lands at bits 7..13, and bit 14 (a copy
                // of the sign) is cleared.
                let h = _mm256_and_si256(_mm256_srai_epi16::<1>(_mm256_slli_epi16::<8>(w)), _mm256_set1_epi16(-16385)); // 0xBFFF
                                                                                                                        // NaN codes (magnitude 0x7F) get an all-ones exponent.
                let exp = _mm256_set1_epi16(0x3F80);
                let nan = _mm256_cmpeq_epi16(_mm256_and_si256(h, exp), exp);
                _mm256_or_si256(h, _mm256_and_si256(nan, _mm256_set1_epi16(0x7C00)))
            }
        }
    }

    /// The factor that, applied to `fp8_to_f16`'s value, gives the FP8 value.
    const fn rebias(format: Fp8Format) -> f32 {
        match format {
            Fp8Format::E4M3 => 256.0,
            Fp8Format::E5M2 => 1.0,
        }
    }

    /// A whole FP8 chunk: runs of one scale (see `kernel::fp8_runs`), each
    /// through the vector loop, all inside this one target-feature function.
    #[target_feature(enable = "avx2,f16c")]
    pub unsafe fn fp8(format: Fp8Format, cols: u64, scales: Option<&ScaleGrid>, first: u64, src: &[u8], dst: &mut [u16]) {
        fp8_runs(cols, scales, first, dst.len(), |scale, i, len| {
            // SAFETY: inside this function AVX2 and F16C are enabled; the run
            // lies within src and dst (fp8_runs covers [0, dst.len())).
            unsafe { fp8_run(format, scale, &src[i..i + len], &mut dst[i..i + len]) }
        });
    }

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn fp8_run(format: Fp8Format, scale: f32, src: &[u8], dst: &mut [u16]) {
        // SAFETY: the caller upholds this function's contract: the CPU has the
        // features it enables, and the pointers and lengths are as documented.
        unsafe {
            // x = (h * rebias) * scale, with h * rebias exact. Folding rebias into
            // the scale gives the same single rounding as long as rebias * scale is
            // itself exact and finite (it is a power-of-two product); otherwise keep
            // two multiplies.
            let r = rebias(format);
            let folded = r * scale;
            let n = dst.len() / 16 * 16;
            if folded.is_finite() || !scale.is_finite() {
                fp8_loop(format, src, dst, n, _mm256_set1_ps(folded), None);
            } else {
                fp8_loop(format, src, dst, n, _mm256_set1_ps(r), Some(_mm256_set1_ps(scale)));
            }
            if n < dst.len() {
                scalar::fp8_run(format, scale, &src[n..], &mut dst[n..]);
            }
        }
    }

    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn fp8_loop(format: Fp8Format, src: &[u8], dst: &mut [u16], n: usize, m1: __m256, m2: Option<__m256>) {
        // SAFETY: the caller upholds this function's contract: the CPU has the
        // features it enables, and the pointers and lengths are as documented.
        unsafe {
            let mut i = 0;
            while i < n {
                // SAFETY: i + 16 <= n <= dst.len() == src.len().
                let h = fp8_to_f16(format, _mm_loadu_si128(src.as_ptr().add(i) as *const __m128i));
                let mut a = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(h)), m1);
                let mut b = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256::<1>(h)), m1);
                if let Some(m2) = m2 {
                    a = _mm256_mul_ps(a, m2);
                    b = _mm256_mul_ps(b, m2);
                }
                store16(dst.as_mut_ptr().add(i), a, b);
                i += 16;
            }
        }
    }
}

/// AVX-512 (F, BW, VL), each kernel with the integer BF16 rounding and
/// (`_bf16`) with AVX512_BF16's `vcvtne2ps2bf16`.
pub mod avx512 {
    use std::arch::x86_64::*;

    use crate::kernel::{fp8_runs, ScaleGrid};
    use crate::scalar;
    use crate::x86::avx512::{store, Bf16Round, IntRound, Round};
    use weightstream_blocks::Fp8Format;

    /// 32 FP8 codes -> 32 binary16 values whose exact f32 conversions, times
    /// `rebias`, are the codes' exact values: avx2.rs's `fp8_to_f16` on 32
    /// lanes (E5M2 is a binary16's high byte; E4M3 shifted into binary16
    /// position is its value times 2^-8, its NaN codes binary16 NaNs).
    #[inline(always)]
    unsafe fn fp8_to_f16(format: Fp8Format, v: __m256i) -> __m512i {
        // SAFETY: inside a kernel with avx512f and avx512bw enabled.
        unsafe {
            let w = _mm512_cvtepu8_epi16(v);
            match format {
                Fp8Format::E5M2 => _mm512_slli_epi16::<8>(w),
                Fp8Format::E4M3 => {
                    // Byte in the high half, arithmetic shift: sign at bit 15,
                    // magnitude at bits 7..13, bit 14 (the sign's copy) cleared.
                    let h = _mm512_and_si512(_mm512_srai_epi16::<1>(_mm512_slli_epi16::<8>(w)), _mm512_set1_epi16(-16385)); // 0xBFFF
                    let exp = _mm512_set1_epi16(0x3F80);
                    let nan = _mm512_cmpeq_epi16_mask(_mm512_and_si512(h, exp), exp);
                    _mm512_mask_mov_epi16(h, nan, _mm512_or_si512(h, _mm512_set1_epi16(0x7C00)))
                }
            }
        }
    }

    /// The factor that, applied to `fp8_to_f16`'s value, gives the FP8 value.
    const fn rebias(format: Fp8Format) -> f32 {
        match format {
            Fp8Format::E4M3 => 256.0,
            Fp8Format::E5M2 => 1.0,
        }
    }

    /// Whether `vcvtne2ps2bf16` rounds every product `v * scale` of an FP8
    /// value as the formula does: no product is an f32 subnormal. The smallest
    /// nonzero FP8 magnitudes are 2^-9 (E4M3) and 2^-16 (E5M2), so a scale of
    /// magnitude at least 2^-100 keeps every nonzero product at or above
    /// 2^-116; a zero, infinite or NaN scale gives zeros, infinities and NaNs.
    fn fp8_cvt_exact(scale: f32) -> bool {
        let s = scale.abs();
        s == 0.0 || !s.is_finite() || s >= f32::from_bits((127 - 100) << 23)
    }

    /// One run of one scale: through `R` where that is exact, else `IntRound`.
    #[inline(always)]
    unsafe fn fp8_scaled_run<R: Round>(format: Fp8Format, scale: f32, src: &[u8], dst: &mut [u16]) {
        // SAFETY: inside a kernel with this module's features.
        unsafe {
            if !R::CVT || fp8_cvt_exact(scale) {
                fp8_run::<R>(format, scale, src, dst)
            } else {
                fp8_run::<IntRound>(format, scale, src, dst)
            }
        }
    }

    #[inline(always)]
    unsafe fn fp8_run<R: Round>(format: Fp8Format, scale: f32, src: &[u8], dst: &mut [u16]) {
        // SAFETY: inside a kernel with this module's features.
        unsafe {
            // x = (h * rebias) * scale, with h * rebias exact: one multiply by
            // the folded factor where rebias * scale is exact and finite (as in
            // avx2.rs), two otherwise.
            let r = rebias(format);
            let folded = r * scale;
            let n = dst.len() / 32 * 32;
            if folded.is_finite() || !scale.is_finite() {
                fp8_loop::<R, false>(format, src, dst, n, _mm512_set1_ps(folded), _mm512_set1_ps(1.0));
            } else {
                fp8_loop::<R, true>(format, src, dst, n, _mm512_set1_ps(r), _mm512_set1_ps(scale));
            }
            if n < dst.len() {
                scalar::fp8_run(format, scale, &src[n..], &mut dst[n..]);
            }
        }
    }

    #[inline(always)]
    unsafe fn fp8_loop<R: Round, const TWO: bool>(format: Fp8Format, src: &[u8], dst: &mut [u16], n: usize, m1: __m512, m2: __m512) {
        // SAFETY: inside a kernel with this module's features.
        unsafe {
            let mut i = 0;
            while i < n {
                // SAFETY: i + 32 <= n <= dst.len() == src.len().
                let h = fp8_to_f16(format, _mm256_loadu_si256(src.as_ptr().add(i) as *const __m256i));
                let mut a = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(h)), m1);
                let mut b = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_extracti64x4_epi64::<1>(h)), m1);
                if TWO {
                    a = _mm512_mul_ps(a, m2);
                    b = _mm512_mul_ps(b, m2);
                }
                store(dst.as_mut_ptr().add(i), R::pack(a, b));
                i += 32;
            }
        }
    }

    /// A whole FP8 chunk, as avx2.rs's `fp8`: runs of one scale, all inside one
    /// target-feature function.
    ///
    /// # Safety
    /// `Isa::Avx512.supported()`, and [`has_bf16`] when `bf16`; `src.len() == dst.len()`.
    pub unsafe fn fp8(bf16: bool, format: Fp8Format, cols: u64, scales: Option<&ScaleGrid>, first: u64, src: &[u8], dst: &mut [u16]) {
        // SAFETY: the caller's contract above.
        unsafe {
            if bf16 {
                fp8_bf16(format, cols, scales, first, src, dst)
            } else {
                fp8_int(format, cols, scales, first, src, dst)
            }
        }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,f16c")]
    unsafe fn fp8_int(format: Fp8Format, cols: u64, scales: Option<&ScaleGrid>, first: u64, src: &[u8], dst: &mut [u16]) {
        fp8_runs(cols, scales, first, dst.len(), |scale, i, len| {
            // SAFETY: see `fp8` (the closure inherits this function's
            // features); the run lies within src and dst (fp8_runs covers
            // [0, dst.len())).
            unsafe { fp8_scaled_run::<IntRound>(format, scale, &src[i..i + len], &mut dst[i..i + len]) }
        });
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,f16c,avx512bf16")]
    unsafe fn fp8_bf16(format: Fp8Format, cols: u64, scales: Option<&ScaleGrid>, first: u64, src: &[u8], dst: &mut [u16]) {
        fp8_runs(cols, scales, first, dst.len(), |scale, i, len| {
            // SAFETY: as in fp8_int.
            unsafe { fp8_scaled_run::<Bf16Round>(format, scale, &src[i..i + len], &mut dst[i..i + len]) }
        });
    }
}
