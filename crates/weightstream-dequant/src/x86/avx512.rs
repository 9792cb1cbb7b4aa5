//! AVX-512 (F, BW, VL + F16C) primitives the x86 kernels share: the two
//! BF16 roundings, stores and splats. Which formats have AVX-512 kernels
//! under `Isa::Avx512` and `Isa::Avx512Int`: x86/mod.rs's
//! `avx512_block_kernel` for the block formats (Q4_0, Q8_0 in legacy.rs;
//! Q4_1 ... Q6_K in blocks.rs; the grid and IQ1 formats in lookup.rs,
//! IQ1_M with a whole block in vectors, `iq1_m_vectors`), float.rs (F32,
//! F16), fp8.rs, packed512.rs (E2M1, INT). IQ4_NL, IQ4_XS, MXFP4, NVFP4,
//! TQ1_0 and TQ2_0 run their AVX2 kernels under `Isa::Avx512` (tables
//! looked up with `pshufb`, already faster than memcpy on one thread;
//! MXFP4's E8M0 scales can make subnormal products, which
//! `vcvtne2ps2bf16` would flush).
//!
//! The kernels reproduce `scalar` bit for bit: the same exact
//! conversions to f32, one `vmulps` per value (two for FP8 where the folded
//! rebias is not exact; never an FMA: Rust never contracts), and the same
//! rounding to BF16, 32 values per step, the remainder through the scalar
//! kernel.
//!
//! The rounding comes in two kinds, each kernel compiled for both:
//! - [`IntRound`]: the scalar integer formula on 16 lanes, NaN lanes set to
//!   0x7FC0, the high halves gathered in order by one `vpermt2w`. Any CPU
//!   with `Isa::Avx512`.
//! - [`Bf16Round`]: `vcvtne2ps2bf16` (AVX512_BF16), where `Isa::Avx512`
//!   finds it: round to nearest even like the formula, but it treats
//!   subnormal inputs as zero (the formula rounds them to BF16 subnormals)
//!   and keeps a NaN's sign and payload (the formula makes every NaN
//!   0x7FC0). NaNs are fixed after it (`vpcmpuw` + a masked move); a vector
//!   that may hold a subnormal goes through `IntRound` instead, decided
//!   where it is cheap: never for Q4_0, Q8_0 and F16 (products of an f16
//!   value and a small integer are zero or at least 2^-24), per run of one
//!   scale for FP8 (`fp8_cvt_exact`); F32 always takes `IntRound` (checking
//!   every value for subnormals cost more than the instruction saved).
//!   The rest of
//!   the instruction's results equal the formula's: every f32 bit pattern
//!   was compared on this project's AMD EPYC (family 25 model 17, Zen 4)
//!   while writing it.
//!
//! Float16 output has one rounding, [`F16Round`]: `vcvtps2ph` (round to
//! nearest even from the immediate, f16 subnormals and infinities as IEEE,
//! so exact on every input: `CVT` is false), NaN lanes then set to 0x7E00
//! (the instruction keeps a NaN's sign and payload). The kernels are
//! generic over `Round`, so each body serves the three.
//!
//! Every public function is `unsafe`: callers must have checked
//! `Isa::Avx512.supported()`, and for the `bf16` variants
//! [`has_bf16`] too. Lengths: as `Kernel::check` leaves them (`src` whole
//! blocks or values, `dst` their elements).

use std::arch::x86_64::*;

use super::avx2::F16_RNE;
use crate::output::{Bf16Out, F16Out, Output};

/// A chunk kernel: callable only where its target features are present.
pub type KernelFn = unsafe fn(&[u8], &mut [u16]);

/// Whether this CPU has `vcvtne2ps2bf16` (the `bf16` kernel variants).
pub fn has_bf16() -> bool {
    is_x86_feature_detected!("avx512bf16")
}

/// 32 f32 lanes (two vectors, `a`'s first) -> 32 output values in order
/// (BF16 or float16: `Out`).
///
/// The methods are `#[inline(always)]` without target features: they are
/// only called from the `#[target_feature]` kernels below, into which they
/// (and the intrinsics in them) are inlined.
pub trait Round {
    /// Whether this is `vcvtne2ps2bf16`, which must not see subnormals.
    const CVT: bool;
    /// What it writes; `<Out as Out512>::Round512` is the rounding to the
    /// same output that takes every input (the fallback where `CVT`).
    type Out: Out512;
    /// Any input but (for `CVT`) subnormals; NaN -> `Out::NAN`.
    unsafe fn pack(a: __m512, b: __m512) -> __m512i;
    /// Inputs neither NaN nor subnormal.
    unsafe fn pack_ordinary(a: __m512, b: __m512) -> __m512i;
    /// 8 f32 lanes -> 8 output values (inputs as for `pack`); a NaN lane
    /// gives some NaN, not necessarily `Out::NAN` (the callers fix them).
    unsafe fn round8(x: __m256) -> __m128i;
}

/// An output of the AVX-512 kernels: its AVX2 rounding (`Out256`), and
/// the AVX-512 rounding to it that is exact on every input (`IntRound` for
/// BF16, `F16Round` for float16; the fallback where a `Round` is `CVT`).
/// Declared here, not in avx2.rs: avx512 builds on avx2, never the other
/// way round.
pub trait Out512: super::avx2::Out256 {
    type Round512: Round<Out = Self>;
}

impl Out512 for Bf16Out {
    type Round512 = IntRound;
}

impl Out512 for F16Out {
    type Round512 = F16Round;
}

/// The scalar formula `(b + 0x7FFF + ((b >> 16) & 1)) >> 16`, lane by lane.
pub struct IntRound;

/// `vcvtne2ps2bf16`, NaNs made canonical after it.
pub struct Bf16Round;

/// Float16: `vcvtps2ph`, NaNs made canonical after it.
pub struct F16Round;

/// Word `2i + 1` of the 64 words of (a, b): the high halves, in order.
const ODD_WORDS: [u16; 32] = {
    let mut t = [0u16; 32];
    let mut i = 0;
    while i < 32 {
        t[i] = 2 * i as u16 + 1;
        i += 1;
    }
    t
};

impl IntRound {
    /// The rounded BF16 in the high half of each lane (the low half is
    /// garbage); NaN lanes 0x7FC0 when `FIX_NAN`.
    #[inline(always)]
    unsafe fn round_hi<const FIX_NAN: bool>(x: __m512) -> __m512i {
        // SAFETY: callers run inside a kernel with avx512f enabled.
        unsafe {
            let b = _mm512_castps_si512(x);
            let lsb = _mm512_and_si512(_mm512_srli_epi32::<16>(b), _mm512_set1_epi32(1));
            // No overflow but for NaNs (the largest other pattern is 0xFF80_0000).
            let r = _mm512_add_epi32(b, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF)));
            if FIX_NAN {
                _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, x), _mm512_set1_epi32(0x7FC0_0000))
            } else {
                r
            }
        }
    }

    #[inline(always)]
    unsafe fn gather_hi(a: __m512i, b: __m512i) -> __m512i {
        // SAFETY: callers run inside a kernel with avx512f and avx512bw
        // enabled; ODD_WORDS is 64 readable bytes.
        unsafe { _mm512_permutex2var_epi16(a, _mm512_loadu_si512(ODD_WORDS.as_ptr() as *const __m512i), b) }
    }
}

impl Round for IntRound {
    const CVT: bool = false;
    type Out = Bf16Out;

    #[inline(always)]
    unsafe fn pack(a: __m512, b: __m512) -> __m512i {
        // SAFETY: as in round_hi and gather_hi.
        unsafe { Self::gather_hi(Self::round_hi::<true>(a), Self::round_hi::<true>(b)) }
    }

    #[inline(always)]
    unsafe fn pack_ordinary(a: __m512, b: __m512) -> __m512i {
        // SAFETY: as in round_hi and gather_hi.
        unsafe { Self::gather_hi(Self::round_hi::<false>(a), Self::round_hi::<false>(b)) }
    }

    #[inline(always)]
    unsafe fn round8(x: __m256) -> __m128i {
        // SAFETY: callers run inside a kernel with avx512f, avx512vl and
        // avx2 enabled. round_bf16 leaves each result in its lane's low
        // half; vpmovdw keeps those halves.
        unsafe { _mm256_cvtepi32_epi16(super::avx2::round_bf16(x)) }
    }
}

/// 32 words of `O` from a hardware conversion, their NaNs made `O::NAN`:
/// `vcvtne2ps2bf16` and `vcvtps2ph` keep a NaN's sign and payload (quiet),
/// a magnitude above infinity's, which no other input gives.
#[inline(always)]
unsafe fn canonical_nans<O: Output>(r: __m512i) -> __m512i {
    // SAFETY: callers run inside a kernel with avx512f and avx512bw enabled.
    unsafe {
        let nan = _mm512_cmpgt_epu16_mask(_mm512_and_si512(r, _mm512_set1_epi16(0x7FFF)), _mm512_set1_epi16(O::INF as i16));
        _mm512_mask_mov_epi16(r, nan, _mm512_set1_epi16(O::NAN as i16))
    }
}

impl Round for Bf16Round {
    const CVT: bool = true;
    type Out = Bf16Out;

    #[inline(always)]
    unsafe fn pack(a: __m512, b: __m512) -> __m512i {
        // SAFETY: callers run inside a kernel with avx512f, avx512bw and
        // avx512bf16 enabled.
        unsafe { canonical_nans::<Bf16Out>(Self::pack_ordinary(a, b)) }
    }

    #[inline(always)]
    unsafe fn pack_ordinary(a: __m512, b: __m512) -> __m512i {
        // SAFETY: callers run inside a kernel with avx512bf16 enabled.
        // __m512bh and __m512i are both 64 bytes of plain bits. The first
        // operand fills the high 16 words, so `b` goes first.
        unsafe { std::mem::transmute::<__m512bh, __m512i>(_mm512_cvtne2ps_pbh(b, a)) }
    }

    #[inline(always)]
    unsafe fn round8(x: __m256) -> __m128i {
        // SAFETY: callers run inside a kernel with avx512f, avx512vl and
        // avx512bf16 enabled. __m128bh and __m128i are 16 bytes of plain bits.
        unsafe { std::mem::transmute::<__m128bh, __m128i>(_mm256_cvtneps_pbh(x)) }
    }
}

impl Round for F16Round {
    const CVT: bool = false;
    type Out = F16Out;

    #[inline(always)]
    unsafe fn pack(a: __m512, b: __m512) -> __m512i {
        // SAFETY: callers run inside a kernel with avx512f and avx512bw enabled.
        unsafe { canonical_nans::<F16Out>(Self::pack_ordinary(a, b)) }
    }

    #[inline(always)]
    unsafe fn pack_ordinary(a: __m512, b: __m512) -> __m512i {
        // SAFETY: callers run inside a kernel with avx512f enabled.
        unsafe { _mm512_inserti64x4::<1>(_mm512_castsi256_si512(_mm512_cvtps_ph::<F16_RNE>(a)), _mm512_cvtps_ph::<F16_RNE>(b)) }
    }

    #[inline(always)]
    unsafe fn round8(x: __m256) -> __m128i {
        // SAFETY: callers run inside a kernel with f16c enabled.
        unsafe { _mm256_cvtps_ph::<F16_RNE>(x) }
    }
}

/// Store 32 output values at `dst`.
#[inline(always)]
pub(super) unsafe fn store(dst: *mut u16, v: __m512i) {
    // SAFETY: the caller guarantees 32 writable u16 at dst, inside a kernel
    // with avx512f enabled.
    unsafe { _mm512_storeu_si512(dst as *mut __m512i, v) }
}

/// An f16 bit pattern as f32 (exact: `vcvtph2ps`) in every lane.
#[inline(always)]
pub(super) unsafe fn splat_f16(h: u16) -> __m512 {
    // SAFETY: inside a kernel with avx512f and f16c enabled.
    unsafe { _mm512_broadcastss_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(h as i32))) }
}

/// Whether an f16 bit pattern is finite (exponent not all ones).
#[inline(always)]
pub(super) fn f16_finite(h: u16) -> bool {
    h & 0x7C00 != 0x7C00
}

/// `numerics::round_f16` on 16 lanes: the same two rounded adds by a power
/// of two (0.5 below 2^-14, else 2^(e + 13)), infinity from 65520 up, NaN
/// kept, the sign restored.
#[inline(always)]
pub(super) unsafe fn round_f16(x: __m512) -> __m512 {
    // SAFETY: inside a kernel with avx512f enabled.
    unsafe {
        let bits = _mm512_castps_si512(x);
        let sign = _mm512_and_si512(bits, _mm512_set1_epi32(i32::MIN));
        let mag = _mm512_and_si512(bits, _mm512_set1_epi32(0x7FFF_FFFF));
        let a = _mm512_castsi512_ps(mag);
        let half = _mm512_set1_ps(0.5);
        let small = _mm512_sub_ps(_mm512_add_ps(a, half), half);
        let c = _mm512_castsi512_ps(_mm512_add_epi32(_mm512_and_si512(mag, _mm512_set1_epi32(0x7F80_0000)), _mm512_set1_epi32(13 << 23)));
        let normal = _mm512_sub_ps(_mm512_add_ps(a, c), c);
        let is_small = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(a, _mm512_set1_ps(6.103_515_6e-5));
        let is_big = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(a, _mm512_set1_ps(65520.0));
        let r = _mm512_mask_mov_ps(normal, is_small, small);
        let r = _mm512_mask_mov_ps(r, is_big, _mm512_set1_ps(f32::INFINITY));
        let r = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(r), sign));
        _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, x), x)
    }
}
