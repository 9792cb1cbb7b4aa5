//! The emitter the x86 legacy and K-quant kernels share (legacy.rs,
//! kquant.rs): quant bytes to BF16 or float16 through `d * q (+/- m)`,
//! for AVX2 and AVX-512 (`Emit`), and the bit-field readers of their
//! blocks. One body per format, compiled for each ISA and output
//! (`kernels!`): for AVX2 + F16C ([`Avx2`]: 16 values per store, rounded
//! by its `Out256`) and for AVX-512 ([`Avx512`]: 32 values per store,
//! rounded by `vcvtne2ps2bf16` where the CPU has AVX512_BF16, by the
//! integer formula on 16 lanes where it has not, by `vcvtps2ph` to float16).
//!
//! Each reproduces its scalar kernel (scalar.rs) bit for bit: the per-block
//! scale products (`d * sc`, `dmin * m`) are the same scalar f32
//! multiplies; per element, the exact int -> f32 conversion, one `vmulps`,
//! then `vaddps`/`vsubps` as the formula says (never an FMA: Rust never
//! contracts), and a BF16 rounding equal to the scalar one (see
//! [`Avx512`] for why `vcvtne2ps2bf16` is exact here).
//!
//! Every public function is `unsafe` with `#[target_feature]`: callers must
//! have checked `Isa::Avx2.supported()` (for the `_avx512` ones
//! `Isa::Avx512.supported()` and `avx512::has_bf16()`). Lengths: `src`
//! whole blocks, `dst` their elements (checked by `Kernel::check`).

use std::arch::x86_64::*;

use std::marker::PhantomData;

use super::avx2::{store16, Out256};
use super::avx512::Round;

/// What follows the multiply: `dl * q`, `dl * q + m`, `dl * q - m`.
pub(super) const NONE: u8 = 0;

pub(super) const ADD: u8 = 1;

pub(super) const SUB: u8 = 2;

/// 16 quants (bytes of `q`, signed when `SIGNED`) -> 16 `O` values at `out`:
/// `dl * q`, then `+ m` or `- m` per `OP`, each operation rounded.
#[inline(always)]
pub(super) unsafe fn emit16<O: Out256, const SIGNED: bool, const OP: u8>(q: __m128i, dl: f32, m: f32, out: *mut u16) {
    // SAFETY: inside a kernel with avx2 and f16c enabled; the caller
    // guarantees 16 writable u16 at out.
    unsafe {
        let (a, b) = if SIGNED {
            (_mm256_cvtepi8_epi32(q), _mm256_cvtepi8_epi32(_mm_srli_si128::<8>(q)))
        } else {
            (_mm256_cvtepu8_epi32(q), _mm256_cvtepu8_epi32(_mm_srli_si128::<8>(q)))
        };
        let d = _mm256_set1_ps(dl);
        let mut x = _mm256_mul_ps(_mm256_cvtepi32_ps(a), d);
        let mut y = _mm256_mul_ps(_mm256_cvtepi32_ps(b), d);
        if OP != NONE {
            let mm = _mm256_set1_ps(m);
            (x, y) = if OP == ADD { (_mm256_add_ps(x, mm), _mm256_add_ps(y, mm)) } else { (_mm256_sub_ps(x, mm), _mm256_sub_ps(y, mm)) };
        }
        // SAFETY: the caller guarantees 16 writable u16 at out.
        store16::<O>(out, x, y);
    }
}

/// How a kernel turns 32 quants into 32 output values, per ISA and output.
///
/// The methods are `#[inline(always)]` without target features: they are
/// only called from the `#[target_feature]` kernels of `kernels!`, into
/// which they (and the intrinsics in them) are inlined.
pub(super) trait Emit {
    /// 32 quants (bytes of `q`, signed when `SIGNED`): the first 16 with
    /// (`d0`, `m0`), the next 16 with (`d1`, `m1`): `dl * q`, then `+ m` or
    /// `- m` per `OP`, each operation rounded, then rounded to the output and
    /// stored at `out` (32 writable u16). `finite`: the block's scale fields
    /// are all finite, so no output is NaN (a hint; either value is correct
    /// when false).
    unsafe fn emit32<const SIGNED: bool, const OP: u8>(q: __m256i, d0: f32, m0: f32, d1: f32, m1: f32, finite: bool, out: *mut u16);
}

/// AVX2: two `emit16`, rounded to `O`.
pub(super) struct Avx2<O>(PhantomData<O>);

impl<O: Out256> Emit for Avx2<O> {
    #[inline(always)]
    unsafe fn emit32<const SIGNED: bool, const OP: u8>(q: __m256i, d0: f32, m0: f32, d1: f32, m1: f32, _finite: bool, out: *mut u16) {
        // SAFETY: inside a kernel with avx2 and f16c enabled; the caller
        // guarantees 32 writable u16 at out.
        unsafe {
            emit16::<O, SIGNED, OP>(_mm256_castsi256_si128(q), d0, m0, out);
            emit16::<O, SIGNED, OP>(_mm256_extracti128_si256::<1>(q), d1, m1, out.add(16));
        }
    }
}

/// AVX-512: 16 lanes per `vmulps`, rounded by `R` (avx512.rs):
/// `vcvtne2ps2bf16` where the CPU has AVX512_BF16, else the integer
/// formula; `vcvtps2ph` for float16.
///
/// `vcvtne2ps2bf16` is exact here: that instruction rounds to nearest even like the scalar
/// formula but flushes f32 subnormal inputs to zero, and none reach it. In
/// these formats every scale field is an f16 (`d`, `m`, `dmin`), so a
/// multiple of 2^-24 (the smallest f16 subnormal); the sub-block scales are
/// integer multiples of it (`d * sc`: Q2_K's 4-bit, Q3_K's signed 6-bit,
/// Q4_K/Q5_K's 6-bit, Q6_K's i8 `sc`), the quants integers, and an f32
/// rounding of a multiple of 2^-24 below 2^24 in magnitude stays one (it is
/// exact below 2^-1; above, the result is a multiple of its ulp, itself a
/// multiple of 2^-24), as does a sum or difference of two. So every
/// product, sum and difference is zero or at least 2^-24 in magnitude (the
/// largest, 65504 * 63 * 255 plus 65504, is far from overflow): never an
/// f32 subnormal. NaN outputs (only from a NaN or infinite scale field)
/// are made canonical after it, checked only for blocks whose scales are
/// not all `finite`.
pub(super) struct Avx512<R>(PhantomData<R>);

impl<R: Round> Emit for Avx512<R> {
    #[inline(always)]
    unsafe fn emit32<const SIGNED: bool, const OP: u8>(q: __m256i, d0: f32, m0: f32, d1: f32, m1: f32, finite: bool, out: *mut u16) {
        // SAFETY: inside a kernel with avx512f, avx512bw, avx512vl and avx2
        // enabled (and avx512bf16 for Bf16Round); the caller guarantees 32 writable u16 at out.
        unsafe {
            let (lo, hi) = (_mm256_castsi256_si128(q), _mm256_extracti128_si256::<1>(q));
            let (a, b) = if SIGNED {
                (_mm512_cvtepi8_epi32(lo), _mm512_cvtepi8_epi32(hi))
            } else {
                (_mm512_cvtepu8_epi32(lo), _mm512_cvtepu8_epi32(hi))
            };
            let mut x = _mm512_mul_ps(_mm512_cvtepi32_ps(a), _mm512_set1_ps(d0));
            let mut y = _mm512_mul_ps(_mm512_cvtepi32_ps(b), _mm512_set1_ps(d1));
            if OP != NONE {
                let (mx, my) = (_mm512_set1_ps(m0), _mm512_set1_ps(m1));
                (x, y) =
                    if OP == ADD { (_mm512_add_ps(x, mx), _mm512_add_ps(y, my)) } else { (_mm512_sub_ps(x, mx), _mm512_sub_ps(y, my)) };
            }
            let v = if finite { R::pack_ordinary(x, y) } else { R::pack(x, y) };
            _mm512_storeu_si512(out as *mut __m512i, v);
        }
    }
}

/// 32 bytes from `p` (any alignment).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn load32(p: *const u8) -> __m256i {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables, and the pointers and lengths are as documented.
    unsafe { _mm256_loadu_si256(p as *const __m256i) }
}

/// Bytes `(v >> shift) & mask` (the shift crosses no byte boundary that
/// the mask keeps).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn bits(v: __m256i, shift: u32, mask: i8) -> __m256i {
    _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(shift as i32)), _mm256_set1_epi8(mask))
}

/// Byte j of the result is `value` where bit `bit` of byte j of `v` is set, else 0.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn where_bit(v: __m256i, bit: u32, value: i8) -> __m256i {
    let m = _mm256_set1_epi8((1u8 << bit) as i8);
    _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, m), m), _mm256_set1_epi8(value))
}

/// The 32 nibbles of a 32-element block in element order: low nibbles of
/// `qs[0..16]`, then high nibbles.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn nibbles32(qs: *const u8) -> __m256i {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables, and the pointers and lengths are as documented.
    unsafe {
        let v = _mm_loadu_si128(qs as *const __m128i);
        let f = _mm_set1_epi8(0x0F);
        _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16::<4>(v), f), _mm_and_si128(v, f))
    }
}

/// Bit j of `bits` as byte j: 0xFF where set, else 0.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn bit_bytes32(bits: u32) -> __m256i {
    // Each 128-bit lane holds the 4 bytes of bits; spread byte j/8 to byte j.
    let spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    let bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(bits as i32), spread);
    let m = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    _mm256_cmpeq_epi8(_mm256_and_si256(bytes, m), m)
}

/// Bit j of `qh` as byte j (0 or 0x10): the fifth bit of Q5_0/Q5_1 quants.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn fifth_bits32(qh: u32) -> __m256i {
    _mm256_and_si256(bit_bytes32(qh), _mm256_set1_epi8(0x10))
}

pub(super) fn qh_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The blocks of `src` with their outputs: (block bytes, output pointer).
#[inline(always)]
pub(super) fn blocks<'a>(src: &'a [u8], dst: &'a mut [u16], bytes: usize, elems: usize) -> impl Iterator<Item = (&'a [u8], *mut u16)> + 'a {
    src.chunks_exact(bytes).zip(dst.chunks_exact_mut(elems)).map(|(b, o)| (b, o.as_mut_ptr()))
}
