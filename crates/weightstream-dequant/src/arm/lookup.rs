//! NEON kernels of the lookup formats: IQ4_NL, IQ4_XS, MXFP4 and NVFP4 (a
//! nibble picks one of 16 i8 levels) and the ternary TQ1_0 and TQ2_0. Each
//! reproduces its scalar kernel (scalar/lut4.rs, ternary.rs) bit for bit.
//!
//! Why tables: a value of these formats can only be one of a few outputs
//! per scale (16 for the 4-bit codebooks, 3 or 4 ternary), so they are
//! computed once per (sub-)block scale with the scalar kernel's f32
//! operations (exact i8 -> f32, one `vmulq_f32`, the shared BF16 rounding
//! `round4`), and each value's output is then looked up: its low and its
//! high byte with a `vqtbl1q_u8` each, interleaved into u16s by `vzip`.
//! The tables hold every level with its own sign (no sign-bit tricks): a
//! product is the scalar one exactly, whatever the scale.
//!
//! Every kernel is `unsafe` with `#[target_feature(enable = "neon")]`, as
//! in neon.rs (NEON is the aarch64 baseline). Lengths: `src` whole blocks,
//! `dst` their elements (checked by `Kernel::check`).

use std::arch::aarch64::*;

use super::neon::{load16, round4, KernelFn};
use crate::scalar::{e8m0_half, f16_at, iq4_xs_scale, ue4m3_half};
use weightstream_format::block_tables::{E2M1_DOUBLED, IQ4NL_VALUES};
use weightstream_format::{block, BlockFormat};

/// The blocks of `src` with their outputs: (block bytes, output pointer).
#[inline(always)]
fn blocks<'a>(src: &'a [u8], dst: &'a mut [u16], bytes: usize, elems: usize) -> impl Iterator<Item = (&'a [u8], *mut u16)> + 'a {
    src.chunks_exact(bytes).zip(dst.chunks_exact_mut(elems)).map(|(b, o)| (b, o.as_mut_ptr()))
}

/// A lookup table of up to 16 BF16 outputs for `vqtbl1q_u8`: entry i's low
/// byte is byte i of `lo`, its high byte byte i of `hi`.
#[derive(Clone, Copy)]
struct Table {
    lo: uint8x16_t,
    hi: uint8x16_t,
}

/// The table of 16 BF16 values, entries 0..8 in `a` and 8..16 in `b` (for
/// 8 entries, `a == b`: entry i is also entry 8 + i).
#[inline(always)]
unsafe fn table(a: uint16x8_t, b: uint16x8_t) -> Table {
    // SAFETY: NEON is always present on aarch64; no memory is touched.
    unsafe {
        let (a, b) = (vreinterpretq_u8_u16(a), vreinterpretq_u8_u16(b));
        // Little-endian u16s: the even bytes are the low ones.
        Table { lo: vuzp1q_u8(a, b), hi: vuzp2q_u8(a, b) }
    }
}

/// The table of 8 f32 values rounded to BF16 (`a` entries 0..4, `b` 4..8).
#[inline(always)]
unsafe fn table8(a: float32x4_t, b: float32x4_t) -> Table {
    // SAFETY: NEON is always present on aarch64; no memory is touched.
    unsafe {
        let t = vcombine_u16(round4(a), round4(b));
        table(t, t)
    }
}

/// 16 outputs to `out`: entry `idx[j]` (0..16) of `t`, its high byte XORed
/// with `flip[j]` (a sign bit, or 0).
#[inline(always)]
unsafe fn lookup16(idx: uint8x16_t, t: Table, flip: uint8x16_t, out: *mut u16) {
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
struct Levels([float32x4_t; 4]);

impl Levels {
    #[inline(always)]
    unsafe fn new(t: &[i8; 16]) -> Levels {
        // SAFETY: 16 readable bytes at t; NEON is always present on aarch64.
        unsafe {
            let q = vld1q_s8(t.as_ptr());
            let (lo, hi) = (vmovl_s8(vget_low_s8(q)), vmovl_high_s8(q));
            let f = |w: int32x4_t| vcvtq_f32_s32(w);
            Levels([f(vmovl_s16(vget_low_s16(lo))), f(vmovl_high_s16(lo)), f(vmovl_s16(vget_low_s16(hi))), f(vmovl_high_s16(hi))])
        }
    }

    /// Every output a value scaled by `d` can have: BF16(d * level) for
    /// the 16 levels, the scalar kernel's multiply and rounding once per
    /// level instead of once per value.
    #[inline(always)]
    unsafe fn times(self, d: f32) -> Table {
        // SAFETY: NEON is always present on aarch64; no memory is touched.
        unsafe {
            let dv = vdupq_n_f32(d);
            let r = |k: usize| round4(vmulq_f32(self.0[k], dv));
            table(vcombine_u16(r(0), r(1)), vcombine_u16(r(2), r(3)))
        }
    }
}

/// The 32 values of 16 bytes of nibbles at `qs` (the low nibbles, then the
/// high ones), the levels scaled by `d`, to `out`.
#[inline(always)]
unsafe fn lut32(qs: *const u8, levels: Levels, d: f32, out: *mut u16) {
    // SAFETY: the caller guarantees 16 readable bytes at qs and 32 writable
    // u16 at out.
    unsafe {
        let v = load16(qs);
        let t = levels.times(d);
        let zero = vdupq_n_u8(0);
        lookup16(vandq_u8(v, vdupq_n_u8(0x0F)), t, zero, out);
        lookup16(vshrq_n_u8::<4>(v), t, zero, out.add(16));
    }
}

#[target_feature(enable = "neon")]
unsafe fn iq4_nl(src: &[u8], dst: &mut [u16]) {
    use block::iq4_nl::*;
    // SAFETY: the table is 16 bytes.
    let levels = unsafe { Levels::new(&IQ4NL_VALUES) };
    for (b, o) in blocks(src, dst, BYTES, ELEMS) {
        // SAFETY: the 16 qs bytes lie inside the block; 32 outputs at o.
        unsafe { lut32(b.as_ptr().add(QS), levels, f16_at(b, D), o) };
    }
}

#[target_feature(enable = "neon")]
unsafe fn iq4_xs(src: &[u8], dst: &mut [u16]) {
    use block::iq4_xs::*;
    // SAFETY: the table is 16 bytes.
    let levels = unsafe { Levels::new(&IQ4NL_VALUES) };
    for (b, o) in blocks(src, dst, BYTES, ELEMS) {
        let d = f16_at(b, D);
        for k in 0..8 {
            // The scalar kernel's sub-block scale, (d * (sc - 32)).
            let dl = d * iq4_xs_scale(b, k) as f32;
            // SAFETY: qs[16k .. 16k + 16] inside the block; outputs 32k .. 32k + 32 of its 256.
            unsafe { lut32(b.as_ptr().add(QS + 16 * k), levels, dl, o.add(32 * k)) };
        }
    }
}

#[target_feature(enable = "neon")]
unsafe fn mxfp4(src: &[u8], dst: &mut [u16]) {
    use block::mxfp4::*;
    // SAFETY: the table is 16 bytes.
    let levels = unsafe { Levels::new(&E2M1_DOUBLED) };
    for (b, o) in blocks(src, dst, BYTES, ELEMS) {
        // SAFETY: the 16 qs bytes lie inside the block; 32 outputs at o.
        unsafe { lut32(b.as_ptr().add(QS), levels, e8m0_half(b[E]), o) };
    }
}

/// NVFP4: four 16-value sub-blocks, each with its own UE4M3 scale and 8
/// bytes of nibbles (low, then high): a table per sub-block.
#[target_feature(enable = "neon")]
unsafe fn nvfp4(src: &[u8], dst: &mut [u16]) {
    use block::nvfp4::*;
    // SAFETY: the table is 16 bytes.
    let levels = unsafe { Levels::new(&E2M1_DOUBLED) };
    for (b, o) in blocks(src, dst, BYTES, ELEMS) {
        let t = |k: usize| {
            // SAFETY: NEON is always present on aarch64.
            unsafe { levels.times(ue4m3_half(b[D + k])) }
        };
        for h in 0..2 {
            // SAFETY: qs[16h .. 16h + 16] (sub-blocks 2h, 2h + 1) inside the
            // block; outputs 32h .. 32h + 32 of its 64.
            unsafe {
                let v = load16(b.as_ptr().add(QS + 16 * h));
                let (lo, hi) = (vreinterpretq_u64_u8(vandq_u8(v, vdupq_n_u8(0x0F))), vreinterpretq_u64_u8(vshrq_n_u8::<4>(v)));
                // Sub-block 2h: the low nibbles of bytes 0..8, then their high ones; 2h + 1: of bytes 8..16.
                let (q0, q1) = (vreinterpretq_u8_u64(vzip1q_u64(lo, hi)), vreinterpretq_u8_u64(vzip2q_u64(lo, hi)));
                let zero = vdupq_n_u8(0);
                lookup16(q0, t(2 * h), zero, o.add(32 * h));
                lookup16(q1, t(2 * h + 1), zero, o.add(32 * h + 16));
            }
        }
    }
}

/// A ternary table: entry q is BF16(d * (q - 1)) for q = 0, 1, 2 and, for
/// TQ2_0's crumbs, 3 (the scalar kernel's one multiply each).
#[inline(always)]
unsafe fn ternary_table(d: f32) -> Table {
    const VALUES: [f32; 4] = [-1.0, 0.0, 1.0, 2.0];
    // SAFETY: 4 readable f32 in VALUES; NEON is always present on aarch64.
    unsafe {
        let x = vmulq_f32(vld1q_f32(VALUES.as_ptr()), vdupq_n_f32(d));
        table8(x, x)
    }
}

#[target_feature(enable = "neon")]
unsafe fn tq2_0(src: &[u8], dst: &mut [u16]) {
    use block::tq2_0::*;
    let (three, zero) = (vdupq_n_u8(3), vdupq_n_u8(0));
    for (b, o) in blocks(src, dst, BYTES, ELEMS) {
        // SAFETY: NEON is always present on aarch64.
        let t = unsafe { ternary_table(f16_at(b, D)) };
        // Element 128h + 32s + j is crumb s of qs[32h + j] (Q2_K's layout).
        for h in 0..2 {
            for half in 0..2 {
                // SAFETY: qs[32h + 16half ..][..16] inside the block's 64;
                // outputs 128h + 32s + 16half .. + 16 inside its 256.
                unsafe {
                    let v = load16(b.as_ptr().add(QS + 32 * h + 16 * half));
                    for s in 0..4 {
                        let q = vandq_u8(vshlq_u8(v, vdupq_n_s8(-2 * s as i8)), three);
                        lookup16(q, t, zero, o.add(128 * h + 32 * s + 16 * half));
                    }
                }
            }
        }
    }
}

/// Base-3 digits (0, 1, 2) of 16 bytes: digit k of byte b is
/// ((b * 3^k mod 256) * 3) >> 8 (scalar/ternary.rs), with `pow3` holding
/// each byte's 3^k: a wrapping u8 multiply, then the high bytes of the
/// widening multiply by 3.
#[inline(always)]
unsafe fn trits16(bytes: uint8x16_t, pow3: uint8x16_t) -> uint8x16_t {
    // SAFETY: NEON is always present on aarch64; no memory is touched.
    unsafe {
        let q = vmulq_u8(bytes, pow3);
        let lo = vmull_u8(vget_low_u8(q), vdup_n_u8(3));
        let hi = vmull_high_u8(q, vdupq_n_u8(3));
        vuzp2q_u8(vreinterpretq_u8_u16(lo), vreinterpretq_u8_u16(hi))
    }
}

#[target_feature(enable = "neon")]
unsafe fn tq1_0(src: &[u8], dst: &mut [u16]) {
    use block::tq1_0::*;
    const POW3: [u8; 5] = [1, 3, 9, 27, 81];
    // Elements 240..256: digit e/4 of qh[e % 4], so bytes qh[0..4] four
    // times with the powers 1, 3, 9, 27 in steps of four.
    const TAIL_POW: [u8; 16] = [1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27];
    // SAFETY: 16 readable bytes.
    let tail_pow = unsafe { load16(TAIL_POW.as_ptr()) };
    let zero = vdupq_n_u8(0);
    for (b, o) in blocks(src, dst, BYTES, ELEMS) {
        // SAFETY: qs[0..48] and qh[0..4] lie inside the block; outputs
        // 0..256 inside its elements.
        unsafe {
            let t = ternary_table(f16_at(b, D));
            let p = b.as_ptr();
            let (q0, q1, q2) = (load16(p.add(QS)), load16(p.add(QS + 16)), load16(p.add(QS + 32)));
            // Elements 0..160: digit k of qs[j] (j < 32) is 32k + j; 160..240:
            // digit k of qs[32 + j] (j < 16) is 160 + 16k + j.
            for (k, &pw) in POW3.iter().enumerate() {
                let pow = vdupq_n_u8(pw);
                lookup16(trits16(q0, pow), t, zero, o.add(32 * k));
                lookup16(trits16(q1, pow), t, zero, o.add(32 * k + 16));
                lookup16(trits16(q2, pow), t, zero, o.add(160 + 16 * k));
            }
            let qh = vreinterpretq_u8_u32(vdupq_n_u32(u32::from_le_bytes([b[QH], b[QH + 1], b[QH + 2], b[QH + 3]])));
            lookup16(trits16(qh, tail_pow), t, zero, o.add(240));
        }
    }
}

/// The NEON kernel of a lookup format, if it has one here.
pub fn block_kernel(f: BlockFormat) -> Option<KernelFn> {
    Some(match f {
        BlockFormat::IQ4_NL => iq4_nl,
        BlockFormat::IQ4_XS => iq4_xs,
        BlockFormat::MXFP4 => mxfp4,
        BlockFormat::NVFP4 => nvfp4,
        BlockFormat::TQ1_0 => tq1_0,
        BlockFormat::TQ2_0 => tq2_0,
        _ => return None,
    })
}
