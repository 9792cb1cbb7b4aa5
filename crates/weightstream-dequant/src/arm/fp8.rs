//! NEON kernels of FP8 (E4M3, E5M2) under any scale layout (this file) and
//! of the safetensors packs E2M1, INT4 and INT8 (packed.rs). Without them `Isa::Neon` ran these through the
//! portable code; they follow the x86 kernels' numerics (x86/fp8.rs
//! `fp8`, x86/packed256.rs), so each reproduces its scalar kernel
//! (`scalar::fp8_run`, `e2m1_run`, `int_run`) bit for bit:
//!
//! - FP8: each code becomes a binary16 bit pattern (E5M2 is a binary16's
//!   high byte; E4M3 shifted into binary16 position is its value times
//!   2^-8, its NaN codes binary16 NaNs), `fcvtl` makes that f32 exactly,
//!   and one `fmul` by `rebias * scale` gives the scalar kernel's one
//!   rounded product where that folded factor is exact and finite; two
//!   multiplies (the exact rebias, then the scale) otherwise.
//! - E2M1 and INT4: a run of one scale (and zero point) has at most 16
//!   outputs, so they are computed once per run by the scalar kernel's own
//!   operations on each code (the exact f32 level, `- zero` for integers,
//!   one `fmul`, F16 rounding where asked, the output's rounding,
//!   `Out128`), then looked up per nibble with `tbl` on the outputs' low
//!   bytes and on their high bytes.
//! - INT8: value by value, `(q - zero) * scale`.
//!
//! Runs come from `kernel::fp8_runs` / `pack_runs`; what a run leaves
//! under 16 values goes through the scalar kernel. `vmulq_f32`, `vaddq_f32`
//! and `vsubq_f32` only, never a fused multiply-add (arm/neon.rs).
//! Performance on Arm has not been measured (the tests run under qemu).

use std::arch::aarch64::*;

use super::neon::*;
use crate::kernel::{fp8_runs, ScaleGrid};
use crate::scalar;
use weightstream_blocks::Fp8Format;

/// A whole FP8 chunk: runs of one scale, each through the vector loop,
/// all inside this one target-feature function.
///
/// # Safety
/// `src.len() == dst.len()` (Kernel::check); NEON, which every aarch64 CPU has.
#[target_feature(enable = "neon")]
pub unsafe fn fp8<O: Out128>(format: Fp8Format, cols: u64, scales: Option<&ScaleGrid>, first: u64, src: &[u8], dst: &mut [u16]) {
    fp8_runs(cols, scales, first, dst.len(), |scale, i, len| {
        // SAFETY: NEON is present; the run lies within src and dst
        // (fp8_runs covers [0, dst.len())).
        unsafe { fp8_run::<O>(format, scale, &src[i..i + len], &mut dst[i..i + len]) }
    });
}

/// One run of one scale: whole 16-value steps, the rest through the scalar kernel.
#[inline(always)]
pub(super) unsafe fn fp8_run<O: Out128>(format: Fp8Format, scale: f32, src: &[u8], dst: &mut [u16]) {
    // x = (h * rebias) * scale with h * rebias exact. Folding rebias (a
    // power of two) into the scale gives the same single rounding as long
    // as the folded factor is finite (then it is exact); past f32's range
    // keep two multiplies. A non-finite scale folds to itself.
    let rebias = match format {
        Fp8Format::E4M3 => 256.0,
        Fp8Format::E5M2 => 1.0,
    };
    let folded = rebias * scale;
    let n = dst.len() / 16 * 16;
    // SAFETY: n <= dst.len() == src.len(); NEON is present.
    unsafe {
        if folded.is_finite() || !scale.is_finite() {
            fp8_loop::<O, false>(format, src, dst, n, folded, 1.0);
        } else {
            fp8_loop::<O, true>(format, src, dst, n, rebias, scale);
        }
    }
    scalar::fp8_run::<O>(format, scale, &src[n..], &mut dst[n..]);
}

/// Values `[0, n)` (`n` a multiple of 16): `h * m1`, then `* m2` if `TWO`.
#[inline(always)]
pub(super) unsafe fn fp8_loop<O: Out128, const TWO: bool>(format: Fp8Format, src: &[u8], dst: &mut [u16], n: usize, m1: f32, m2: f32) {
    // SAFETY: each step reads src[i..i + 16] and writes dst[i..i + 16],
    // i + 16 <= n <= dst.len() == src.len() (the caller's contract).
    unsafe {
        let (m1, m2) = (vdupq_n_f32(m1), vdupq_n_f32(m2));
        let scaled8 = |h: uint16x8_t, out: *mut u16| {
            let (a, b) = f16x8_to_f32(h);
            let (a, b) = (vmulq_f32(a, m1), vmulq_f32(b, m1));
            if TWO {
                store8::<O>(out, vmulq_f32(a, m2), vmulq_f32(b, m2))
            } else {
                store8::<O>(out, a, b)
            }
        };
        for i in (0..n).step_by(16) {
            let (h0, h1) = fp8_to_f16(format, load16(src.as_ptr().add(i)));
            scaled8(h0, dst.as_mut_ptr().add(i));
            scaled8(h1, dst.as_mut_ptr().add(i + 8));
        }
    }
}

/// 16 FP8 codes -> 16 binary16 bit patterns (codes 0..8, 8..16) whose
/// exact values, times the format's rebias (E4M3 2^8, E5M2 1), are the
/// codes' values (x86/fp8.rs `fp8_to_f16`).
#[inline(always)]
pub(super) unsafe fn fp8_to_f16(format: Fp8Format, v: uint8x16_t) -> (uint16x8_t, uint16x8_t) {
    // SAFETY: NEON is always present on aarch64; registers only.
    unsafe {
        // Each code in the high byte of a 16-bit lane (zipped under a zero
        // byte: little-endian lanes). That is E5M2's binary16 pattern.
        let zero = vdupq_n_u8(0);
        let words = (vreinterpretq_u16_u8(vzip1q_u8(zero, v)), vreinterpretq_u16_u8(vzip2q_u8(zero, v)));
        let e4m3 = |w: uint16x8_t| {
            // An arithmetic shift right by one: the sign stays at bit 15,
            // the magnitude lands at bits 7..13, and bit 14 (the sign's
            // copy) is cleared.
            let h = vandq_u16(vreinterpretq_u16_s16(vshrq_n_s16::<1>(vreinterpretq_s16_u16(w))), vdupq_n_u16(0xBFFF));
            // NaN codes (magnitude 0x7F) get an all-ones exponent.
            let exp = vdupq_n_u16(0x3F80);
            let nan = vceqq_u16(vandq_u16(h, exp), exp);
            vorrq_u16(h, vandq_u16(nan, vdupq_n_u16(0x7C00)))
        };
        match format {
            Fp8Format::E5M2 => words,
            Fp8Format::E4M3 => (e4m3(words.0), e4m3(words.1)),
        }
    }
}
