//! NEON kernels of the lookup formats: IQ4_NL, IQ4_XS, MXFP4 and NVFP4 (a
//! nibble picks one of 16 i8 levels). Each reproduces its scalar kernel
//! (scalar/lut4.rs) bit for bit.
//!
//! Why tables: a value of these formats can only be one of a few outputs
//! per scale (16 for the 4-bit codebooks), so they are
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

/// The NEON kernel of a lookup format, if it has one here.
pub fn block_kernel(f: BlockFormat) -> Option<KernelFn> {
    Some(match f {
        BlockFormat::IQ4_NL => iq4_nl,
        BlockFormat::IQ4_XS => iq4_xs,
        BlockFormat::MXFP4 => mxfp4,
        BlockFormat::NVFP4 => nvfp4,
        _ => return None,
    })
}
