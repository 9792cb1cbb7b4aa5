//! x86 kernels of the legacy 32-element block formats: Q4_0 and Q8_0
//! (AVX2 written out, AVX-512 bodies with every rounding), each generic
//! over the output, Q4_1, Q5_0 and
//! Q5_1 (through emit.rs's `Emit`, for both).

use std::arch::x86_64::*;

use super::avx2::{store16, Out256};
use super::avx512::{f16_finite, splat_f16, store, Round};
use super::emit::*;
use crate::numerics::f16_to_f32;
use crate::scalar::f16_at;
use weightstream_blocks::block;

/// 8 signed 32-bit integers scaled by d.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn scaled(q: __m256i, d: __m256) -> __m256 {
    _mm256_mul_ps(_mm256_cvtepi32_ps(q), d)
}

#[target_feature(enable = "avx2,f16c")]
pub unsafe fn q4_0<O: Out256>(src: &[u8], dst: &mut [u16]) {
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
            store16::<O>(o, scaled(_mm256_cvtepi8_epi32(lo), d), scaled(_mm256_cvtepi8_epi32(_mm_srli_si128::<8>(lo)), d));
            store16::<O>(o.add(16), scaled(_mm256_cvtepi8_epi32(hi), d), scaled(_mm256_cvtepi8_epi32(_mm_srli_si128::<8>(hi)), d));
        }
    }
}

#[target_feature(enable = "avx2,f16c")]
pub unsafe fn q8_0<O: Out256>(src: &[u8], dst: &mut [u16]) {
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
            store16::<O>(o, scaled(_mm256_cvtepi8_epi32(a), d), scaled(_mm256_cvtepi8_epi32(_mm_srli_si128::<8>(a)), d));
            store16::<O>(o.add(16), scaled(_mm256_cvtepi8_epi32(b), d), scaled(_mm256_cvtepi8_epi32(_mm_srli_si128::<8>(b)), d));
        }
    }
}

/// 32 values `d * q` from 32 signed bytes (16 in `lo`, 16 in `hi`), rounded
/// and stored: `d` is an f16 value (never a subnormal product), finite or not.
#[inline(always)]
pub(super) unsafe fn emit_q<R: Round>(lo: __m128i, hi: __m128i, h: u16, o: *mut u16) {
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
pub(super) unsafe fn q4_0_body<R: Round>(src: &[u8], dst: &mut [u16]) {
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
pub(super) unsafe fn q8_0_body<R: Round>(src: &[u8], dst: &mut [u16]) {
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

#[inline(always)]
pub(super) unsafe fn q4_1_body<E: Emit>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: inside a kernel of `kernels!`: its features are enabled, the
    // lengths checked.
    unsafe {
        use block::q4_1::*;
        for (b, o) in blocks(src, dst, BYTES, ELEMS) {
            let (d, m) = (f16_at(b, D), f16_at(b, M));
            let finite = d.is_finite() && m.is_finite();
            // SAFETY: 16 bytes of qs inside the block; 32 outputs at o.
            E::emit32::<false, ADD>(nibbles32(b.as_ptr().add(QS)), d, m, d, m, finite, o);
        }
    }
}

#[inline(always)]
pub(super) unsafe fn q5_0_body<E: Emit>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: as in q4_1_body.
    unsafe {
        use block::q5_0::*;
        for (b, o) in blocks(src, dst, BYTES, ELEMS) {
            let d = f16_at(b, D);
            // SAFETY: as in q4_1_body.
            let q = _mm256_or_si256(nibbles32(b.as_ptr().add(QS)), fifth_bits32(qh_u32(b, QH)));
            E::emit32::<true, NONE>(_mm256_sub_epi8(q, _mm256_set1_epi8(16)), d, 0.0, d, 0.0, d.is_finite(), o);
        }
    }
}

#[inline(always)]
pub(super) unsafe fn q5_1_body<E: Emit>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: as in q4_1_body.
    unsafe {
        use block::q5_1::*;
        for (b, o) in blocks(src, dst, BYTES, ELEMS) {
            let (d, m) = (f16_at(b, D), f16_at(b, M));
            let finite = d.is_finite() && m.is_finite();
            // SAFETY: as in q4_1_body.
            let q = _mm256_or_si256(nibbles32(b.as_ptr().add(QS)), fifth_bits32(qh_u32(b, QH)));
            E::emit32::<false, ADD>(q, d, m, d, m, finite, o);
        }
    }
}

kernels! {
    q4_1, q4_1_avx512_int, q4_1_avx512 => q4_1_body;
    q5_0, q5_0_avx512_int, q5_0_avx512 => q5_0_body;
    q5_1, q5_1_avx512_int, q5_1_avx512 => q5_1_body;
}

kernels512! {
    q4_0_int, q4_0_bf16 => q4_0_body;
    q8_0_int, q8_0_bf16 => q8_0_body;
}
