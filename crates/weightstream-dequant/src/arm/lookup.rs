//! The output tables the NEON lookup kernels share (lut4.rs: IQ4_NL,
//! IQ4_XS, MXFP4, NVFP4; ternary.rs: TQ1_0, TQ2_0; grid.rs: the IQ2, IQ3
//! and IQ1 grids). Each kernel reproduces its scalar kernel
//! (scalar/lut4.rs, ternary.rs, grid.rs) bit for bit.
//!
//! Why tables: a value of these formats can only be one of a few outputs
//! per scale (16 for the 4-bit codebooks, 3 or 4 ternary, 3 or 8 grid
//! magnitudes, 6 for IQ1), so they are computed once per (sub-)block scale
//! with the scalar kernel's f32 operations (exact integer -> f32, one
//! `vmulq_f32`, for IQ1 the `vaddq_f32` of the delta first, the output's
//! rounding `Out128`), and each value's output is then looked up: its low
//! and its high byte with a `vqtbl1q_u8` each, interleaved into u16s by
//! `vzip`. The codebook and ternary tables hold every level with its own
//! sign: a product is the scalar one exactly, whatever the scale. The IQ2
//! and IQ3 tables hold magnitudes, and a negative value's output is the
//! positive one's with the sign bit flipped (why that is exact: [`grid`]).
//!
//! Every kernel is `unsafe` with `#[target_feature(enable = "neon")]`, as
//! in neon.rs (NEON is the aarch64 baseline). Lengths: `src` whole blocks,
//! `dst` their elements (checked by `Kernel::check`).

use std::arch::aarch64::*;

use super::neon::*;

/// The blocks of `src` with their outputs: (block bytes, output pointer).
#[inline(always)]
pub(super) fn sized_blocks<'a>(
    src: &'a [u8],
    dst: &'a mut [u16],
    bytes: usize,
    elems: usize,
) -> impl Iterator<Item = (&'a [u8], *mut u16)> + 'a {
    src.chunks_exact(bytes).zip(dst.chunks_exact_mut(elems)).map(|(b, o)| (b, o.as_mut_ptr()))
}

/// A lookup table of up to 16 outputs (BF16 or float16) for `vqtbl1q_u8`: entry i's low
/// byte is byte i of `lo`, its high byte byte i of `hi`.
#[derive(Clone, Copy)]
pub(super) struct Table {
    lo: uint8x16_t,
    hi: uint8x16_t,
}

/// The table of 16 output values, entries 0..8 in `a` and 8..16 in `b` (for
/// 8 entries, `a == b`: entry i is also entry 8 + i).
#[inline(always)]
pub(super) unsafe fn table(a: uint16x8_t, b: uint16x8_t) -> Table {
    // SAFETY: NEON is always present on aarch64; no memory is touched.
    unsafe {
        let (a, b) = (vreinterpretq_u8_u16(a), vreinterpretq_u8_u16(b));
        // Little-endian u16s: the even bytes are the low ones.
        Table { lo: vuzp1q_u8(a, b), hi: vuzp2q_u8(a, b) }
    }
}

/// The table of 8 f32 values rounded to `O` (`a` entries 0..4, `b` 4..8).
#[inline(always)]
pub(super) unsafe fn table8<O: Out128>(a: float32x4_t, b: float32x4_t) -> Table {
    // SAFETY: NEON is always present on aarch64; no memory is touched.
    unsafe {
        let t = O::round8(a, b);
        table(t, t)
    }
}

/// 16 outputs to `out`: entry `idx[j]` (0..16) of `t`, its high byte XORed
/// with `flip[j]` (a sign bit, or 0).
#[inline(always)]
pub(super) unsafe fn lookup16(idx: uint8x16_t, t: Table, flip: uint8x16_t, out: *mut u16) {
    // SAFETY: the caller guarantees 16 writable u16 at out; NEON is always
    // present on aarch64.
    unsafe {
        let lo = vqtbl1q_u8(t.lo, idx);
        let hi = veorq_u8(vqtbl1q_u8(t.hi, idx), flip);
        let o = out as *mut u8;
        vst1q_u8(o, vzip1q_u8(lo, hi));
        vst1q_u8(o.add(16), vzip2q_u8(lo, hi));
    }
}

/// The 16 levels of a 4-bit codebook as f32 (exact i8 conversions), in
/// groups of 4.
#[derive(Clone, Copy)]
pub(super) struct Levels([float32x4_t; 4]);

impl Levels {
    #[inline(always)]
    pub(super) unsafe fn new(t: &[i8; 16]) -> Levels {
        // SAFETY: 16 readable bytes at t; NEON is always present on aarch64.
        unsafe {
            let q = vld1q_s8(t.as_ptr());
            let (lo, hi) = (vmovl_s8(vget_low_s8(q)), vmovl_high_s8(q));
            let f = |w: int32x4_t| vcvtq_f32_s32(w);
            Levels([f(vmovl_s16(vget_low_s16(lo))), f(vmovl_high_s16(lo)), f(vmovl_s16(vget_low_s16(hi))), f(vmovl_high_s16(hi))])
        }
    }

    /// Every output a value scaled by `d` can have: O(d * level) for
    /// the 16 levels, the scalar kernel's multiply and rounding once per
    /// level instead of once per value.
    #[inline(always)]
    pub(super) unsafe fn times<O: Out128>(self, d: f32) -> Table {
        // SAFETY: NEON is always present on aarch64; no memory is touched.
        unsafe {
            let dv = vdupq_n_f32(d);
            let x = |k: usize| vmulq_f32(self.0[k], dv);
            table(O::round8(x(0), x(1)), O::round8(x(2), x(3)))
        }
    }
}
