//! INT8 packs on AVX-512 (packed512.rs's `Pack512` runs them): value by
//! value (`int8_run`), and with AVX512VBMI a run's 256 possible outputs
//! computed once by the same operations (`int8_table`, so the same bits)
//! and looked up per value with `vpermt2b` (`int8_table_run`), for runs of
//! at least [`INT8_TABLE_MIN`] values (per-channel and per-tensor scales).

use std::arch::x86_64::*;

use super::avx512::Out512;
use super::avx512::{round_f16, Round};

/// 16 INT8 values (offset bytes) as f32 outputs before the output's rounding:
/// R((q - zero) * scale).
#[inline(always)]
unsafe fn int8_values(b: __m128i, s: __m512, z: __m512, to_f16: bool) -> __m512 {
    // SAFETY: inside a kernel with avx512f enabled.
    unsafe {
        let q = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepu8_epi32(b), _mm512_set1_epi32(128)));
        let x = _mm512_mul_ps(_mm512_sub_ps(q, z), s);
        if to_f16 {
            round_f16(x)
        } else {
            x
        }
    }
}

/// 32 INT8 values (offset bytes at `p`) as 32 `O` outputs (its exact
/// rounding: results may be subnormal).
#[inline(always)]
unsafe fn int8_pack32<O: Out512>(p: *const u8, s: __m512, z: __m512, to_f16: bool) -> __m512i {
    // SAFETY: inside a kernel with avx512f/bw enabled; the caller
    // guarantees 32 readable bytes at p.
    unsafe {
        let (a, b) = (_mm_loadu_si128(p as *const __m128i), _mm_loadu_si128(p.add(16) as *const __m128i));
        O::Round512::pack(int8_values(a, s, z, to_f16), int8_values(b, s, z, to_f16))
    }
}

/// INT8 values `[0, n - n % 32)` of a run, value by value: returns how
/// many were written.
#[inline(always)]
pub(super) unsafe fn int8_run<O: Out512>(scale: f32, zero: f32, to_f16: bool, src: &[u8], dst: &mut [u16]) -> usize {
    let n = dst.len();
    let mut i = 0;
    // SAFETY: inside a kernel with avx512f/bw/vl enabled; each step reads
    // src[i..i + 32] and writes dst[i..i + 32], inside the run.
    unsafe {
        let (s, z) = (_mm512_set1_ps(scale), _mm512_set1_ps(zero));
        while i + 32 <= n {
            let packed = int8_pack32::<O>(src.as_ptr().add(i), s, z, to_f16);
            _mm512_storeu_si512(dst.as_mut_ptr().add(i) as *mut __m512i, packed);
            i += 32;
        }
    }
    i
}

/// Runs at least this long go through [`int8_table`] (with VBMI): its 256
/// outputs cost about what 256 values computed one by one do.
pub(super) const INT8_TABLE_MIN: usize = 1024;

/// Every offset byte 0..=255, in order.
const BYTES: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = i as u8;
        i += 1;
    }
    t
};

/// `vpermt2b` indices: byte `k` of (a, b) for `k = start, start + step, ...`
/// (64 picks), or with `interleave`, `a[start + k]` and `b[start + k]`
/// alternating for k in 0..32.
const fn byte_picks(start: u8, step: u8, interleave: bool) -> [u8; 64] {
    let mut t = [0u8; 64];
    let mut k = 0;
    while k < 64 {
        t[k] = if interleave { start + (k / 2) as u8 + 64 * (k % 2) as u8 } else { start + step * k as u8 };
        k += 1;
    }
    t
}

const LOW_BYTES: [u8; 64] = byte_picks(0, 2, false);

const HIGH_BYTES: [u8; 64] = byte_picks(1, 2, false);

const FIRST_WORDS: [u8; 64] = byte_picks(0, 0, true);

const LAST_WORDS: [u8; 64] = byte_picks(32, 0, true);

/// The 256 outputs of an INT8 run, computed as `int8_run` computes each
/// value (so the same bits): low bytes of codes 0..64, 64..128, 128..192,
/// 192..256 in vectors 0..4, high bytes in 4..8.
#[inline(always)]
pub(super) unsafe fn int8_table<O: Out512>(scale: f32, zero: f32, to_f16: bool) -> [__m512i; 8] {
    // SAFETY: inside a kernel with avx512f/bw/vbmi enabled; BYTES is 256
    // readable bytes, the index tables 64 each.
    unsafe {
        let (s, z) = (_mm512_set1_ps(scale), _mm512_set1_ps(zero));
        let (lo, hi) =
            (_mm512_loadu_si512(LOW_BYTES.as_ptr() as *const __m512i), _mm512_loadu_si512(HIGH_BYTES.as_ptr() as *const __m512i));
        let mut t = [_mm512_setzero_si512(); 8];
        for j in 0..4 {
            let w0 = int8_pack32::<O>(BYTES.as_ptr().add(64 * j), s, z, to_f16);
            let w1 = int8_pack32::<O>(BYTES.as_ptr().add(64 * j + 32), s, z, to_f16);
            t[j] = _mm512_permutex2var_epi8(w0, lo, w1);
            t[4 + j] = _mm512_permutex2var_epi8(w0, hi, w1);
        }
        t
    }
}

/// INT8 values `[0, n - n % 64)` of a run through its table: returns how
/// many were written.
#[inline(always)]
pub(super) unsafe fn int8_table_run(t: &[__m512i; 8], src: &[u8], dst: &mut [u16]) -> usize {
    let n = dst.len();
    let mut i = 0;
    // SAFETY: inside a kernel with avx512f/bw/vbmi enabled; each step reads
    // src[i..i + 64] and writes dst[i..i + 64], inside the run.
    unsafe {
        let first = _mm512_loadu_si512(FIRST_WORDS.as_ptr() as *const __m512i);
        let last = _mm512_loadu_si512(LAST_WORDS.as_ptr() as *const __m512i);
        while i + 64 <= n {
            let v = _mm512_loadu_si512(src.as_ptr().add(i) as *const __m512i);
            // Bit 7 of a code picks the table half, bits 0..6 the byte.
            let upper = _mm512_movepi8_mask(v);
            let lo = _mm512_mask_blend_epi8(upper, _mm512_permutex2var_epi8(t[0], v, t[1]), _mm512_permutex2var_epi8(t[2], v, t[3]));
            let hi = _mm512_mask_blend_epi8(upper, _mm512_permutex2var_epi8(t[4], v, t[5]), _mm512_permutex2var_epi8(t[6], v, t[7]));
            let o = dst.as_mut_ptr().add(i);
            _mm512_storeu_si512(o as *mut __m512i, _mm512_permutex2var_epi8(lo, first, hi));
            _mm512_storeu_si512(o.add(32) as *mut __m512i, _mm512_permutex2var_epi8(lo, last, hi));
            i += 64;
        }
    }
    i
}
