//! AVX-512 kernels (F, BW, VL + F16C) for F32, F16, Q4_0, Q8_0 and FP8.
//! Which formats have AVX-512 kernels under `Isa::Avx512` and
//! `Isa::Avx512Int` (`block_kernel`, chunk.rs):
//! - here, with both roundings below: F32 (integer only), F16, Q4_0, Q8_0, FP8;
//! - bodies shared with their AVX2 kernels, also with both roundings
//!   (`vcvtne2ps2bf16`/`vcvtneps2bf16` where the CPU has AVX512_BF16, the
//!   integer formula otherwise): Q4_1, Q5_0, Q5_1, Q2_K ... Q6_K
//!   (x86/blocks.rs), IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M
//!   (x86/lookup.rs; IQ1_M's AVX-512 instantiations override the shared
//!   per-group loop with a whole block in vectors, `iq1_m_vectors`);
//! - the E2M1 and integer packs: x86/packed512.rs;
//! - AVX2 kernels under `Isa::Avx512` for IQ4_NL, IQ4_XS, MXFP4, NVFP4,
//!   TQ1_0 and TQ2_0 (x86/lookup.rs: tables looked up with `pshufb`,
//!   already faster than memcpy on one thread; MXFP4's E8M0 scales can
//!   make subnormal products, which `vcvtne2ps2bf16` would flush).
//!
//! The kernels here reproduce `scalar` bit for bit: the same exact
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
//! Every public function is `unsafe`: callers must have checked
//! `Isa::Avx512.supported()`, and for the `bf16` variants
//! [`has_bf16`] too. Lengths: as `Kernel::check` leaves them (`src` whole
//! blocks or values, `dst` their elements).

use std::arch::x86_64::*;

use crate::kernel::{fp8_runs, ScaleGrid};
use crate::scalar;
use weightstream_format::{BlockFormat, Fp8Format};

/// A chunk kernel: callable only where its target features are present.
pub type KernelFn = unsafe fn(&[u8], &mut [u16]);

/// Whether this CPU has `vcvtne2ps2bf16` (the `bf16` kernel variants).
pub fn has_bf16() -> bool {
    is_x86_feature_detected!("avx512bf16")
}

/// 32 f32 lanes (two vectors, `a`'s first) -> 32 BF16 values in order.
///
/// The methods are `#[inline(always)]` without target features: they are
/// only called from the `#[target_feature]` kernels below, into which they
/// (and the intrinsics in them) are inlined.
pub(super) trait Round {
    /// Whether this is `vcvtne2ps2bf16`, which must not see subnormals.
    const CVT: bool;
    /// Any input but (for `CVT`) subnormals; NaN -> 0x7FC0.
    unsafe fn pack(a: __m512, b: __m512) -> __m512i;
    /// Inputs neither NaN nor subnormal.
    unsafe fn pack_ordinary(a: __m512, b: __m512) -> __m512i;
    /// 8 f32 lanes -> 8 BF16 values (inputs as for `pack`); a NaN lane
    /// gives some BF16 NaN, not necessarily 0x7FC0 (the callers fix them).
    unsafe fn round8(x: __m256) -> __m128i;
}

/// The scalar formula `(b + 0x7FFF + ((b >> 16) & 1)) >> 16`, lane by lane.
pub(super) struct IntRound;

/// `vcvtne2ps2bf16`, NaNs made canonical after it.
pub(super) struct Bf16Round;

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

impl Round for Bf16Round {
    const CVT: bool = true;

    #[inline(always)]
    unsafe fn pack(a: __m512, b: __m512) -> __m512i {
        // SAFETY: callers run inside a kernel with avx512f, avx512bw and
        // avx512bf16 enabled.
        unsafe {
            let r = Self::pack_ordinary(a, b);
            // A NaN input gives a BF16 NaN (quiet, sign and payload kept):
            // magnitude above 0x7F80, which no other input gives.
            let nan = _mm512_cmpgt_epu16_mask(_mm512_and_si512(r, _mm512_set1_epi16(0x7FFF)), _mm512_set1_epi16(0x7F80));
            _mm512_mask_mov_epi16(r, nan, _mm512_set1_epi16(0x7FC0))
        }
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

/// Store 32 BF16 values at `dst`.
#[inline(always)]
unsafe fn store(dst: *mut u16, v: __m512i) {
    // SAFETY: the caller guarantees 32 writable u16 at dst, inside a kernel
    // with avx512f enabled.
    unsafe { _mm512_storeu_si512(dst as *mut __m512i, v) }
}

/// An f16 bit pattern as f32 (exact: `vcvtph2ps`) in every lane.
#[inline(always)]
unsafe fn splat_f16(h: u16) -> __m512 {
    // SAFETY: inside a kernel with avx512f and f16c enabled.
    unsafe { _mm512_broadcastss_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(h as i32))) }
}

/// Whether an f16 bit pattern is finite (exponent not all ones).
#[inline(always)]
fn f16_finite(h: u16) -> bool {
    h & 0x7C00 != 0x7C00
}

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
        scalar::f32(&src[n * 4..], &mut dst[n..]);
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
        scalar::f16(&src[n * 2..], &mut dst[n..]);
    }
}

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

/// The kernels, each twice: `_int` with [`IntRound`], `_bf16` with [`Bf16Round`].
macro_rules! kernels {
    ($($int:ident, $bf16:ident => $body:ident;)*) => {$(
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,f16c")]
        unsafe fn $int(src: &[u8], dst: &mut [u16]) {
            // SAFETY: the caller confirmed these features (Isa::Avx512) and
            // the lengths (Kernel::check).
            unsafe { $body::<IntRound>(src, dst) }
        }

        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,f16c,avx512bf16")]
        unsafe fn $bf16(src: &[u8], dst: &mut [u16]) {
            // SAFETY: as in the integer variant, AVX512_BF16 confirmed too.
            unsafe { $body::<Bf16Round>(src, dst) }
        }
    )*};
}

kernels! {
    q4_0_int, q4_0_bf16 => q4_0_body;
    q8_0_int, q8_0_bf16 => q8_0_body;
    f16_int, f16_bf16 => f16_body;
}

/// The AVX-512 kernel of a block format, if it has one, with the integer
/// BF16 rounding or (`bf16`) `vcvtne2ps2bf16`: Q4_0 and Q8_0 (here), Q4_1,
/// Q5_0, Q5_1 and Q2_K ... Q6_K (x86/blocks.rs), the grid and IQ1 formats
/// (x86/lookup.rs). The codebook and ternary formats (IQ4_NL, IQ4_XS,
/// MXFP4, NVFP4, TQ1_0, TQ2_0) have none: their AVX2 kernels look every
/// output up in a BF16 table already.
pub fn block_kernel(f: BlockFormat, bf16: bool) -> Option<KernelFn> {
    use super::{blocks, lookup};
    let (int, cvt): (KernelFn, KernelFn) = match f {
        BlockFormat::Q4_0 => (q4_0_int, q4_0_bf16),
        BlockFormat::Q8_0 => (q8_0_int, q8_0_bf16),
        BlockFormat::Q4_1 => (blocks::q4_1_avx512_int, blocks::q4_1_avx512),
        BlockFormat::Q5_0 => (blocks::q5_0_avx512_int, blocks::q5_0_avx512),
        BlockFormat::Q5_1 => (blocks::q5_1_avx512_int, blocks::q5_1_avx512),
        BlockFormat::Q2_K => (blocks::q2_k_avx512_int, blocks::q2_k_avx512),
        BlockFormat::Q3_K => (blocks::q3_k_avx512_int, blocks::q3_k_avx512),
        BlockFormat::Q4_K => (blocks::q4_k_avx512_int, blocks::q4_k_avx512),
        BlockFormat::Q5_K => (blocks::q5_k_avx512_int, blocks::q5_k_avx512),
        BlockFormat::Q6_K => (blocks::q6_k_avx512_int, blocks::q6_k_avx512),
        BlockFormat::IQ2_XXS => (lookup::iq2_xxs_avx512_int, lookup::iq2_xxs_avx512),
        BlockFormat::IQ2_XS => (lookup::iq2_xs_avx512_int, lookup::iq2_xs_avx512),
        BlockFormat::IQ2_S => (lookup::iq2_s_avx512_int, lookup::iq2_s_avx512),
        BlockFormat::IQ3_XXS => (lookup::iq3_xxs_avx512_int, lookup::iq3_xxs_avx512),
        BlockFormat::IQ3_S => (lookup::iq3_s_avx512_int, lookup::iq3_s_avx512),
        BlockFormat::IQ1_S => (lookup::iq1_s_avx512_int, lookup::iq1_s_avx512),
        BlockFormat::IQ1_M => (lookup::iq1_m_avx512_int, lookup::iq1_m_avx512),
        _ => return None,
    };
    Some(if bf16 { cvt } else { int })
}

/// F32: the integer rounding whatever the CPU has (see `f32_body`).
pub fn f32() -> KernelFn {
    f32_int
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,f16c")]
unsafe fn f32_int(src: &[u8], dst: &mut [u16]) {
    // SAFETY: the caller confirmed these features (Isa::Avx512) and the
    // lengths (Kernel::check).
    unsafe { f32_body::<IntRound>(src, dst) }
}

pub fn f16(bf16: bool) -> KernelFn {
    if bf16 {
        f16_bf16
    } else {
        f16_int
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
