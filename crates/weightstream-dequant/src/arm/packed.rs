//! NEON kernels of the safetensors packs: E2M1 (NVFP4, MXFP4), INT4 and
//! INT8, in runs of one scale (fp8.rs's module docs give the numerics).

use std::arch::aarch64::*;

use super::neon::*;
use crate::kernel::{grid_runs, IntPack, ScaleGrid};
use crate::scalar;
use weightstream_blocks::E2M1_VALUES;

/// INT4 codes 0..16 as values before the zero point: q - 8.
pub(super) const INT4_LEVELS: [f32; 16] = {
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
pub(super) fn levels(t: &[f32; 16]) -> [float32x4_t; 4] {
    // SAFETY: 16 readable f32; NEON is always present on aarch64.
    std::array::from_fn(|k| unsafe { vld1q_f32(t.as_ptr().add(4 * k)) })
}

/// The 16 outputs of a run, O(R(level * scale)) with R the F16
/// rounding where `to_f16`, as two `tbl` tables: their low bytes, their
/// high bytes.
#[inline(always)]
pub(super) unsafe fn table16<O: Out128>(levels: [float32x4_t; 4], scale: f32, to_f16: bool) -> uint8x16x2_t {
    // SAFETY: NEON is always present on aarch64; registers only.
    unsafe {
        let s = vdupq_n_f32(scale);
        let x = |l: float32x4_t| {
            let x = vmulq_f32(l, s);
            if to_f16 {
                round_f16(x)
            } else {
                x
            }
        };
        let t0 = vreinterpretq_u8_u16(O::round8(x(levels[0]), x(levels[1])));
        let t1 = vreinterpretq_u8_u16(O::round8(x(levels[2]), x(levels[3])));
        // Even bytes are the low halves (little-endian), odd the high.
        uint8x16x2_t(vuzp1q_u8(t0, t1), vuzp2q_u8(t0, t1))
    }
}

/// `numerics::round_f16` on 4 lanes: the same two rounded adds by a power
/// of two (0.5 below 2^-14, else 2^(e + 13)), infinity from 65520 up, NaN
/// kept, the sign restored (x86/packed256.rs's, with bit selects).
#[inline(always)]
pub(super) unsafe fn round_f16(x: float32x4_t) -> float32x4_t {
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
pub(super) unsafe fn nibbles(b: uint8x16_t) -> (uint8x16_t, uint8x16_t) {
    // SAFETY: NEON is always present on aarch64; registers only.
    unsafe {
        let (lo, hi) = (vandq_u8(b, vdupq_n_u8(0x0F)), vshrq_n_u8::<4>(b));
        (vzip1q_u8(lo, hi), vzip2q_u8(lo, hi))
    }
}

/// 16 codes looked up in `table` (table16's): 16 BF16 values at `out`.
#[inline(always)]
pub(super) unsafe fn lookup16(table: uint8x16x2_t, codes: uint8x16_t, out: *mut u16) {
    // SAFETY: the caller guarantees 16 writable u16 at out. `st2`
    // interleaves the low and high bytes: 16 little-endian u16.
    unsafe { vst2q_u8(out as *mut u8, uint8x16x2_t(vqtbl1q_u8(table.0, codes), vqtbl1q_u8(table.1, codes))) }
}

/// Values `[0, n - n % 16)` of a run of nibble pairs through `table`;
/// returns how many were written.
#[inline(always)]
pub(super) unsafe fn nibble_run(table: uint8x16x2_t, src: &[u8], dst: &mut [u16]) -> usize {
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
pub(super) fn pack_runs(
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
pub unsafe fn e2m1<O: Out128>(cols: u64, scales: &ScaleGrid, first: u64, src: &[u8], dst: &mut [u16]) {
    let l = levels(&E2M1_VALUES);
    pack_runs(
        cols,
        scales,
        first,
        2,
        src,
        dst,
        // SAFETY: NEON is present; s and d are one run's bytes and outputs.
        |k, s, d| unsafe { nibble_run(table16::<O>(l, scales.value(k), false), s, d) },
        |k, s, d| scalar::e2m1_run::<O>(scales.value(k), s, d),
    );
}

/// A whole INT4 or INT8 chunk (chunk.rs checked it: whole words per row
/// and group).
///
/// # Safety
/// `src` holds `dst.len()` values of `bits` bits (Kernel::check); NEON,
/// which every aarch64 CPU has.
#[target_feature(enable = "neon")]
pub unsafe fn int<O: Out128>(pack: IntPack, first: u64, src: &[u8], dst: &mut [u16]) {
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
                nibble_run(table16::<O>(int4.map(|l| vsubq_f32(l, z)), scale, to_f16), s, d)
            } else {
                int8_run::<O>(scale, zero, to_f16, s, d)
            }
        }
    };
    let rest = |k, s: &[u8], d: &mut [u16]| scalar::int_run::<O>(bits, scales.value(k), zero(k), to_f16, s, d);
    pack_runs(cols, scales, first, 8 / bits as usize, src, dst, vector, rest);
}

/// INT8 values `[0, n - n % 16)` of a run, value by value:
/// R((q - zero) * scale); returns how many were written.
#[inline(always)]
pub(super) unsafe fn int8_run<O: Out128>(scale: f32, zero: f32, to_f16: bool, src: &[u8], dst: &mut [u16]) -> usize {
    let n = dst.len() / 16 * 16;
    // SAFETY: each step reads src[i..i + 16] and writes dst[i..i + 16],
    // inside the run (src holds dst.len() bytes).
    unsafe {
        let (s, z) = (vdupq_n_f32(scale), vdupq_n_f32(zero));
        for i in (0..n).step_by(16) {
            // Offset bytes minus 128: the top bit flipped, read as i8.
            let q = veorq_u8(load16(src.as_ptr().add(i)), vdupq_n_u8(0x80));
            map16::<O, true>(q, dst.as_mut_ptr().add(i), |q| {
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
