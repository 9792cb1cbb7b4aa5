//! AVX2 + F16C primitives the x86 kernels share (the kernels are in the
//! family files: legacy.rs, float.rs, fp8.rs, ...). Each reproduces `scalar` bit for bit: the same exact
//! conversions to f32, one `vmulps` (IEEE, round to nearest even; Rust never
//! sets FTZ/DAZ), and the same rounding to the output ([`Out256`]: the
//! integer formula for BF16, `vcvtps2ph` for float16). Full vectors here,
//! the remainder through the scalar kernel.
//!
//! MXCSR: the kernels assume what Rust leaves, FTZ and DAZ clear (the
//! multiplies' subnormal products must stay IEEE, as in the scalar code).
//! `vcvtps2ph` takes its rounding from the immediate (nearest even), not
//! from MXCSR.RC, and ignores FTZ (Intel SDM, VCVTPS2PH: f16 subnormal
//! results are kept); DAZ would read an f32 subnormal input as a zero of
//! its sign, which is what f16 rounds it to anyway (below 2^-25).
//!
//! Every function has `#[target_feature]`; those that touch no memory
//! through pointers are safe functions (safe to call from a kernel with the
//! same features), the others `unsafe`. Either way, reaching them from code
//! without the features takes `unsafe` and a checked `Isa::Avx2.supported()`.
//! (The NEON helpers in arm/ stay `unsafe fn` with `#[inline(always)]`:
//! a safe helper needs `#[target_feature(enable = "neon")]`, which cannot be
//! combined with `#[inline(always)]`, and their inlining is not measured.)

use std::arch::x86_64::*;

use crate::output::{Bf16Out, F16Out, Output};

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

/// `vcvtps2ph`'s immediate: round to nearest even whatever MXCSR.RC says
/// (bit 2 clear). Rust's intrinsic takes 3 bits, so no `_MM_FROUND_NO_EXC`:
/// the inexact flag it may raise is masked (Rust's default MXCSR) and
/// nothing reads it.
pub(super) const F16_RNE: i32 = _MM_FROUND_TO_NEAREST_INT;

/// The output of the AVX2 kernels, a type parameter of every kernel body
/// (the same body for BF16 and float16): its rounding of f32 lanes, NaNs
/// canonical (`Output::NAN`), bit for bit the scalar `Output::from_f32`.
///
/// The methods are `#[inline(always)]` without target features: they are
/// only called from `#[target_feature(enable = "avx2,f16c")]` kernels (or
/// wider), into which they (and the intrinsics in them) are inlined.
pub trait Out256: Output {
    /// 16 f32 lanes (`a` first) -> 16 outputs in order.
    unsafe fn pack16(a: __m256, b: __m256) -> __m256i;
    /// 8 f32 lanes -> 8 outputs in order.
    unsafe fn pack8(x: __m256) -> __m128i;
}

impl Out256 for Bf16Out {
    #[inline(always)]
    unsafe fn pack16(a: __m256, b: __m256) -> __m256i {
        // SAFETY: inside a kernel with avx2 enabled.
        unsafe { pack(round_bf16(a), round_bf16(b)) }
    }

    #[inline(always)]
    unsafe fn pack8(x: __m256) -> __m128i {
        // SAFETY: inside a kernel with avx2 enabled. Each lane holds a
        // value below 0x10000: packus keeps it.
        unsafe {
            let r = round_bf16(x);
            _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256::<1>(r))
        }
    }
}

impl Out256 for F16Out {
    #[inline(always)]
    unsafe fn pack16(a: __m256, b: __m256) -> __m256i {
        // SAFETY: inside a kernel with avx2 and f16c enabled.
        unsafe {
            let h = _mm256_set_m128i(_mm256_cvtps_ph::<F16_RNE>(b), _mm256_cvtps_ph::<F16_RNE>(a));
            // vcvtps2ph keeps a NaN's sign and the top of its payload
            // (quieted); every other input gives magnitude <= 0x7C00.
            let nan = _mm256_cmpgt_epi16(_mm256_and_si256(h, _mm256_set1_epi16(0x7FFF)), _mm256_set1_epi16(0x7C00));
            _mm256_blendv_epi8(h, _mm256_set1_epi16(F16Out::NAN as i16), nan)
        }
    }

    #[inline(always)]
    unsafe fn pack8(x: __m256) -> __m128i {
        // SAFETY: inside a kernel with avx2 and f16c enabled.
        unsafe {
            let h = _mm256_cvtps_ph::<F16_RNE>(x);
            let nan = _mm_cmpgt_epi16(_mm_and_si128(h, _mm_set1_epi16(0x7FFF)), _mm_set1_epi16(0x7C00));
            _mm_blendv_epi8(h, _mm_set1_epi16(F16Out::NAN as i16), nan)
        }
    }
}

/// 16 f32 lanes (`a` first) rounded to `O` and stored at `dst`.
#[inline(always)]
pub(super) unsafe fn store16<O: Out256>(dst: *mut u16, a: __m256, b: __m256) {
    // SAFETY: inside a kernel with avx2 and f16c enabled; the caller
    // guarantees 16 writable u16 at dst.
    unsafe { _mm256_storeu_si256(dst as *mut __m256i, O::pack16(a, b)) }
}
