//! NEON kernels of the scaled formats: FP8 (E4M3, E5M2) under any scale
//! layout, and the safetensors packs (format/packed.rs) E2M1 (NVFP4,
//! MXFP4), INT4 and INT8. Without them `Isa::Neon` ran these through the
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
//!   one `fmul`, F16 rounding where asked, the BF16 rounding formula), then
//!   looked up per nibble with `tbl` on the outputs' low bytes and on their
//!   high bytes.
//! - INT8: value by value, `(q - zero) * scale`.
//!
//! Runs come from `kernel::fp8_runs` / `pack_runs`; what a run leaves
//! under 16 values goes through the scalar kernel. `vmulq_f32`, `vaddq_f32`
//! and `vsubq_f32` only, never a fused multiply-add (arm/neon.rs).
//! Performance on Arm has not been measured (the tests run under qemu).

use std::arch::aarch64::*;

use super::neon::{f16x8_to_f32, load16, map16, round4, store8};
use crate::kernel::{fp8_runs, grid_runs, IntPack, ScaleGrid};
use crate::scalar;
use weightstream_blocks::{Fp8Format, E2M1_VALUES};

/// A whole FP8 chunk: runs of one scale, each through the vector loop,
/// all inside this one target-feature function.
///
/// # Safety
/// `src.len() == dst.len()` (Kernel::check); NEON, which every aarch64 CPU has.
#[target_feature(enable = "neon")]
pub unsafe fn fp8(format: Fp8Format, cols: u64, scales: Option<&ScaleGrid>, first: u64, src: &[u8], dst: &mut [u16]) {
    fp8_runs(cols, scales, first, dst.len(), |scale, i, len| {
        // SAFETY: NEON is present; the run lies within src and dst
        // (fp8_runs covers [0, dst.len())).
        unsafe { fp8_run(format, scale, &src[i..i + len], &mut dst[i..i + len]) }
    });
}

/// One run of one scale: whole 16-value steps, the rest through the scalar kernel.
#[inline(always)]
unsafe fn fp8_run(format: Fp8Format, scale: f32, src: &[u8], dst: &mut [u16]) {
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
            fp8_loop::<false>(format, src, dst, n, folded, 1.0);
        } else {
            fp8_loop::<true>(format, src, dst, n, rebias, scale);
        }
    }
    scalar::fp8_run(format, scale, &src[n..], &mut dst[n..]);
}

/// Values `[0, n)` (`n` a multiple of 16): `h * m1`, then `* m2` if `TWO`.
#[inline(always)]
unsafe fn fp8_loop<const TWO: bool>(format: Fp8Format, src: &[u8], dst: &mut [u16], n: usize, m1: f32, m2: f32) {
    // SAFETY: each step reads src[i..i + 16] and writes dst[i..i + 16],
    // i + 16 <= n <= dst.len() == src.len() (the caller's contract).
    unsafe {
        let (m1, m2) = (vdupq_n_f32(m1), vdupq_n_f32(m2));
        let scaled8 = |h: uint16x8_t, out: *mut u16| {
            let (a, b) = f16x8_to_f32(h);
            let (a, b) = (vmulq_f32(a, m1), vmulq_f32(b, m1));
            if TWO {
                store8(out, vmulq_f32(a, m2), vmulq_f32(b, m2))
            } else {
                store8(out, a, b)
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
unsafe fn fp8_to_f16(format: Fp8Format, v: uint8x16_t) -> (uint16x8_t, uint16x8_t) {
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

/// INT4 codes 0..16 as values before the zero point: q - 8.
const INT4_LEVELS: [f32; 16] = {
    let mut t = [0.0; 16];
    let mut q = 0;
    while q < 16 {
        t[q] = q as f32 - 8.0;
        q += 1;
    }
    t
};

/// 16 f32 levels in four vectors.
#[inline(always)]
fn levels(t: &[f32; 16]) -> [float32x4_t; 4] {
    // SAFETY: 16 readable f32; NEON is always present on aarch64.
    std::array::from_fn(|k| unsafe { vld1q_f32(t.as_ptr().add(4 * k)) })
}

/// The 16 outputs of a run, BF16(R(level * scale)) with R the F16
/// rounding where `to_f16`, as two `tbl` tables: their low bytes, their
/// high bytes.
#[inline(always)]
unsafe fn table16(levels: [float32x4_t; 4], scale: f32, to_f16: bool) -> uint8x16x2_t {
    // SAFETY: NEON is always present on aarch64; registers only.
    unsafe {
        let s = vdupq_n_f32(scale);
        let out = |l: float32x4_t| {
            let x = vmulq_f32(l, s);
            round4(if to_f16 { round_f16(x) } else { x })
        };
        let t0 = vreinterpretq_u8_u16(vcombine_u16(out(levels[0]), out(levels[1])));
        let t1 = vreinterpretq_u8_u16(vcombine_u16(out(levels[2]), out(levels[3])));
        // Even bytes are the low halves (little-endian), odd the high.
        uint8x16x2_t(vuzp1q_u8(t0, t1), vuzp2q_u8(t0, t1))
    }
}

/// `numerics::round_f16` on 4 lanes: the same two rounded adds by a power
/// of two (0.5 below 2^-14, else 2^(e + 13)), infinity from 65520 up, NaN
/// kept, the sign restored (x86/packed256.rs's, with bit selects).
#[inline(always)]
unsafe fn round_f16(x: float32x4_t) -> float32x4_t {
    // SAFETY: NEON is always present on aarch64; registers only.
    unsafe {
        let bits = vreinterpretq_u32_f32(x);
        let sign = vandq_u32(bits, vdupq_n_u32(0x8000_0000));
        let mag = vandq_u32(bits, vdupq_n_u32(0x7FFF_FFFF));
        let a = vreinterpretq_f32_u32(mag);
        let half = vdupq_n_f32(0.5);
        let small = vsubq_f32(vaddq_f32(a, half), half);
        let c = vreinterpretq_f32_u32(vaddq_u32(vandq_u32(mag, vdupq_n_u32(0x7F80_0000)), vdupq_n_u32(13 << 23)));
        let normal = vsubq_f32(vaddq_f32(a, c), c);
        let r = vbslq_f32(vcltq_f32(a, vdupq_n_f32(6.103_515_6e-5)), small, normal);
        let r = vbslq_f32(vcgeq_f32(a, vdupq_n_f32(65520.0)), vdupq_n_f32(f32::INFINITY), r);
        let r = vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(r), sign));
        // All ones where x is not NaN: NaN lanes pass through.
        vbslq_f32(vceqq_f32(x, x), r, x)
    }
}

/// 16 bytes of nibble pairs -> the codes of their 32 values in element
/// order (each byte's low nibble first): codes 0..16, 16..32.
#[inline(always)]
unsafe fn nibbles(b: uint8x16_t) -> (uint8x16_t, uint8x16_t) {
    // SAFETY: NEON is always present on aarch64; registers only.
    unsafe {
        let (lo, hi) = (vandq_u8(b, vdupq_n_u8(0x0F)), vshrq_n_u8::<4>(b));
        (vzip1q_u8(lo, hi), vzip2q_u8(lo, hi))
    }
}

/// 16 codes looked up in `table` (table16's): 16 BF16 values at `out`.
#[inline(always)]
unsafe fn lookup16(table: uint8x16x2_t, codes: uint8x16_t, out: *mut u16) {
    // SAFETY: the caller guarantees 16 writable u16 at out. `st2`
    // interleaves the low and high bytes: 16 little-endian u16.
    unsafe { vst2q_u8(out as *mut u8, uint8x16x2_t(vqtbl1q_u8(table.0, codes), vqtbl1q_u8(table.1, codes))) }
}

/// Values `[0, n - n % 16)` of a run of nibble pairs through `table`;
/// returns how many were written.
#[inline(always)]
unsafe fn nibble_run(table: uint8x16x2_t, src: &[u8], dst: &mut [u16]) -> usize {
    let n = dst.len();
    let mut i = 0;
    // SAFETY: each step reads src[i / 2..i / 2 + 16 or 8] and writes
    // dst[i..i + 32 or 16], inside the run (src holds n / 2 bytes).
    unsafe {
        while i + 32 <= n {
            let (c0, c1) = nibbles(load16(src.as_ptr().add(i / 2)));
            lookup16(table, c0, dst.as_mut_ptr().add(i));
            lookup16(table, c1, dst.as_mut_ptr().add(i + 16));
            i += 32;
        }
        if i + 16 <= n {
            let (c0, _) = nibbles(vcombine_u8(vld1_u8(src.as_ptr().add(i / 2)), vdup_n_u8(0)));
            lookup16(table, c0, dst.as_mut_ptr().add(i));
            i += 16;
        }
    }
    i
}

/// The runs of a safetensors-pack chunk (`per_byte` values a byte: E2M1,
/// INT4 or INT8), each as its grid index `k`, its bytes and its outputs:
/// `vector(k, src, dst)` does a prefix of the run (whole bytes) and says
/// how many values, `rest(k, src, dst)` (the scalar kernel) the remainder.
/// Inlined into the caller, so that a vector closure stays inside its
/// `#[target_feature]` function (as `kernel::grid_runs`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn pack_runs(
    cols: u64,
    scales: &ScaleGrid,
    first: u64,
    per_byte: usize,
    src: &[u8],
    dst: &mut [u16],
    mut vector: impl FnMut(usize, &[u8], &mut [u16]) -> usize,
    mut rest: impl FnMut(usize, &[u8], &mut [u16]),
) {
    grid_runs(cols, scales, first, dst.len(), |k, i, len| {
        let (s, d) = (&src[i / per_byte..(i + len) / per_byte], &mut dst[i..i + len]);
        let done = vector(k, s, d);
        rest(k, &s[done / per_byte..], &mut d[done..]);
    });
}

/// A whole E2M1 chunk (chunk.rs checked it: even rows and groups).
///
/// # Safety
/// `src.len() * 2 == dst.len()` (Kernel::check); NEON, which every aarch64 CPU has.
#[target_feature(enable = "neon")]
pub unsafe fn e2m1(cols: u64, scales: &ScaleGrid, first: u64, src: &[u8], dst: &mut [u16]) {
    let l = levels(&E2M1_VALUES);
    pack_runs(
        cols,
        scales,
        first,
        2,
        src,
        dst,
        // SAFETY: NEON is present; s and d are one run's bytes and outputs.
        |k, s, d| unsafe { nibble_run(table16(l, scales.value(k), false), s, d) },
        |k, s, d| scalar::e2m1_run(scales.value(k), s, d),
    );
}

/// A whole INT4 or INT8 chunk (chunk.rs checked it: whole words per row
/// and group).
///
/// # Safety
/// `src` holds `dst.len()` values of `bits` bits (Kernel::check); NEON,
/// which every aarch64 CPU has.
#[target_feature(enable = "neon")]
pub unsafe fn int(pack: IntPack, first: u64, src: &[u8], dst: &mut [u16]) {
    let IntPack { bits, cols, ref scales, zeros, to_f16 } = pack;
    let zeros = zeros.as_ref();
    let int4 = levels(&INT4_LEVELS);
    let zero = |k| zeros.map_or(0.0, |z| z.value(k));
    let vector = |k, s: &[u8], d: &mut [u16]| {
        let (scale, zero) = (scales.value(k), zero(k));
        // SAFETY: NEON is present; s and d are one run's bytes and outputs.
        unsafe {
            if bits == 4 {
                // q - zero: exact, as in the scalar kernel.
                let z = vdupq_n_f32(zero);
                nibble_run(table16(int4.map(|l| vsubq_f32(l, z)), scale, to_f16), s, d)
            } else {
                int8_run(scale, zero, to_f16, s, d)
            }
        }
    };
    let rest = |k, s: &[u8], d: &mut [u16]| scalar::int_run(bits, scales.value(k), zero(k), to_f16, s, d);
    pack_runs(cols, scales, first, 8 / bits as usize, src, dst, vector, rest);
}

/// INT8 values `[0, n - n % 16)` of a run, value by value:
/// R((q - zero) * scale); returns how many were written.
#[inline(always)]
unsafe fn int8_run(scale: f32, zero: f32, to_f16: bool, src: &[u8], dst: &mut [u16]) -> usize {
    let n = dst.len() / 16 * 16;
    // SAFETY: each step reads src[i..i + 16] and writes dst[i..i + 16],
    // inside the run (src holds dst.len() bytes).
    unsafe {
        let (s, z) = (vdupq_n_f32(scale), vdupq_n_f32(zero));
        for i in (0..n).step_by(16) {
            // Offset bytes minus 128: the top bit flipped, read as i8.
            let q = veorq_u8(load16(src.as_ptr().add(i)), vdupq_n_u8(0x80));
            map16::<true>(q, dst.as_mut_ptr().add(i), |q| {
                let x = vmulq_f32(vsubq_f32(q, z), s);
                if to_f16 {
                    round_f16(x)
                } else {
                    x
                }
            });
        }
    }
    n
}
