//! AVX2 + F16C primitives the x86 kernels share (the kernels are in the
//! family files: legacy.rs, float.rs, fp8.rs, ...). Each reproduces `scalar` bit for bit: the same exact
//! conversions to f32, one `vmulps` (IEEE, round to nearest even; Rust never
//! sets FTZ/DAZ), and the same integer rounding to BF16. Full vectors here,
//! the remainder through the scalar kernel.
//!
//! Every function has `#[target_feature]`; those that touch no memory
//! through pointers are safe functions (safe to call from a kernel with the
//! same features), the others `unsafe`. Either way, reaching them from code
//! without the features takes `unsafe` and a checked `Isa::Avx2.supported()`.
//! (The NEON helpers in arm/ stay `unsafe fn` with `#[inline(always)]`:
//! a safe helper needs `#[target_feature(enable = "neon")]`, which cannot be
//! combined with `#[inline(always)]`, and their inlining is not measured.)

use std::arch::x86_64::*;

/// f32 -> BF16 in the low half of each 32-bit lane (RNE, NaN canonical).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn round_bf16(x: __m256) -> __m256i {
    let b = _mm256_castps_si256(x);
    let lsb = _mm256_and_si256(_mm256_srli_epi32::<16>(b), _mm256_set1_epi32(1));
    let r = _mm256_srli_epi32::<16>(_mm256_add_epi32(b, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))));
    let nan = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_UNORD_Q>(x, x));
    _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7FC0), nan)
}

/// Two vectors of 8 rounded lanes -> 16 BF16 values in order.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn pack(a: __m256i, b: __m256i) -> __m256i {
    // packus interleaves 128-bit lanes: [a0-3 b0-3 a4-7 b4-7]; restore order.
    _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packus_epi32(a, b))
}

#[inline]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn store16(dst: *mut u16, a: __m256, b: __m256) {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables, and the pointers and lengths are as documented.
    unsafe {
        // SAFETY: the caller guarantees 16 writable u16 at dst.
        _mm256_storeu_si256(dst as *mut __m256i, pack(round_bf16(a), round_bf16(b)));
    }
}
