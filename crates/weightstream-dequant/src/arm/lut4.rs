//! NEON kernels of the 4-bit codebook formats: IQ4_NL, IQ4_XS, MXFP4 and
//! NVFP4 (a nibble picks one of 16 levels; lookup.rs).

use std::arch::aarch64::*;

use super::lookup::*;
use super::neon::*;
use crate::scalar::{e8m0_half, f16_at, iq4_xs_scale, ue4m3_half};
use weightstream_blocks::block;
use weightstream_blocks::block_tables::*;

/// The 32 values of 16 bytes of nibbles at `qs` (the low nibbles, then the
/// high ones), the levels scaled by `d`, to `out`.
#[inline(always)]
pub(super) unsafe fn lut32<O: Out128>(qs: *const u8, levels: Levels, d: f32, out: *mut u16) {
    // SAFETY: the caller guarantees 16 readable bytes at qs and 32 writable
    // u16 at out.
    unsafe {
        let v = load16(qs);
        let t = levels.times::<O>(d);
        let zero = vdupq_n_u8(0);
        lookup16(vandq_u8(v, vdupq_n_u8(0x0F)), t, zero, out);
        lookup16(vshrq_n_u8::<4>(v), t, zero, out.add(16));
    }
}

#[target_feature(enable = "neon")]
pub(super) unsafe fn iq4_nl<O: Out128>(src: &[u8], dst: &mut [u16]) {
    use block::iq4_nl::*;
    // SAFETY: the table is 16 bytes.
    let levels = unsafe { Levels::new(&IQ4NL_VALUES) };
    for (b, o) in sized_blocks(src, dst, BYTES, ELEMS) {
        // SAFETY: the 16 qs bytes lie inside the block; 32 outputs at o.
        unsafe { lut32::<O>(b.as_ptr().add(QS), levels, f16_at(b, D), o) };
    }
}

#[target_feature(enable = "neon")]
pub(super) unsafe fn iq4_xs<O: Out128>(src: &[u8], dst: &mut [u16]) {
    use block::iq4_xs::*;
    // SAFETY: the table is 16 bytes.
    let levels = unsafe { Levels::new(&IQ4NL_VALUES) };
    for (b, o) in sized_blocks(src, dst, BYTES, ELEMS) {
        let d = f16_at(b, D);
        for k in 0..8 {
            // The scalar kernel's sub-block scale, (d * (sc - 32)).
            let dl = d * iq4_xs_scale(b, k) as f32;
            // SAFETY: qs[16k .. 16k + 16] inside the block; outputs 32k .. 32k + 32 of its 256.
            unsafe { lut32::<O>(b.as_ptr().add(QS + 16 * k), levels, dl, o.add(32 * k)) };
        }
    }
}

#[target_feature(enable = "neon")]
pub(super) unsafe fn mxfp4<O: Out128>(src: &[u8], dst: &mut [u16]) {
    use block::mxfp4::*;
    // SAFETY: the table is 16 bytes.
    let levels = unsafe { Levels::new(&E2M1_DOUBLED) };
    for (b, o) in sized_blocks(src, dst, BYTES, ELEMS) {
        // SAFETY: the 16 qs bytes lie inside the block; 32 outputs at o.
        unsafe { lut32::<O>(b.as_ptr().add(QS), levels, e8m0_half(b[E]), o) };
    }
}

/// NVFP4: four 16-value sub-blocks, each with its own UE4M3 scale and 8
/// bytes of nibbles (low, then high): a table per sub-block.
#[target_feature(enable = "neon")]
pub(super) unsafe fn nvfp4<O: Out128>(src: &[u8], dst: &mut [u16]) {
    use block::nvfp4::*;
    // SAFETY: the table is 16 bytes.
    let levels = unsafe { Levels::new(&E2M1_DOUBLED) };
    for (b, o) in sized_blocks(src, dst, BYTES, ELEMS) {
        let t = |k: usize| {
            // SAFETY: NEON is always present on aarch64.
            unsafe { levels.times::<O>(ue4m3_half(b[D + k])) }
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
