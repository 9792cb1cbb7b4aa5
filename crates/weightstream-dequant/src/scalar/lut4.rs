//! The 4-bit lookup formats: a nibble indexes a 16-entry table of levels
//! (IQ4_NL's non-linear ones, FP4's E2M1), times a block or sub-block scale.

use super::f16_at;
use crate::output::Output;
use weightstream_blocks::block;
use weightstream_blocks::block_tables::{E2M1_DOUBLED, IQ4NL_VALUES};

/// Element `j` of 16 bytes of nibbles holding 32 values: the low nibbles of
/// all 16 bytes, then the high nibbles.
#[inline(always)]
fn nibble16(qs: &[u8], j: usize) -> usize {
    ((qs[j % 16] >> (4 * (j / 16))) & 0x0F) as usize
}

/// x = d * IQ4NL_VALUES[q].
pub fn iq4_nl<O: Output>(src: &[u8], dst: &mut [u16]) {
    use block::iq4_nl::*;
    for (b, out) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(ELEMS)) {
        let d = f16_at(b, D);
        for (j, o) in out.iter_mut().enumerate() {
            *o = O::from_f32(d * IQ4NL_VALUES[nibble16(&b[QS..], j)] as f32);
        }
    }
}

/// The 6-bit scale of sub-block `k` (0..8) of an IQ4_XS block, minus 32: a
/// nibble of `scales_l` and two bits of the u16 `scales_h`.
#[inline(always)]
pub(crate) fn iq4_xs_scale(b: &[u8], k: usize) -> i32 {
    use block::iq4_xs::*;
    let h = u16::from_le_bytes([b[SCALES_H], b[SCALES_H + 1]]);
    let lo = (b[SCALES_L + k / 2] >> (4 * (k % 2))) & 0x0F;
    let hi = ((h >> (2 * k)) & 3) as u8;
    (lo | (hi << 4)) as i32 - 32
}

/// x = (d * (sc - 32)) * IQ4NL_VALUES[q]; 16 bytes of nibbles per 32-element
/// sub-block, laid out as IQ4_NL's.
pub fn iq4_xs<O: Output>(src: &[u8], dst: &mut [u16]) {
    use block::iq4_xs::*;
    for (b, out) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(ELEMS)) {
        let d = f16_at(b, D);
        for (k, sub) in out.chunks_exact_mut(32).enumerate() {
            let dl = d * iq4_xs_scale(b, k) as f32;
            let qs = &b[QS + 16 * k..QS + 16 * k + 16];
            for (j, o) in sub.iter_mut().enumerate() {
                *o = O::from_f32(dl * IQ4NL_VALUES[nibble16(qs, j)] as f32);
            }
        }
    }
}

/// Half of an E8M0 scale, 2^(e - 128), as ggml_e8m0_to_fp32_half builds it:
/// subnormal for e < 2, so that every e is exact.
#[inline(always)]
pub(crate) fn e8m0_half(e: u8) -> f32 {
    f32::from_bits(if e < 2 { 0x0020_0000u32 << e } else { (e as u32 - 1) << 23 })
}

/// x = 2^(e - 128) * E2M1_DOUBLED[q] (the table holds E2M1 values doubled).
pub fn mxfp4<O: Output>(src: &[u8], dst: &mut [u16]) {
    use block::mxfp4::*;
    for (b, out) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(ELEMS)) {
        let d = e8m0_half(b[E]);
        for (j, o) in out.iter_mut().enumerate() {
            *o = O::from_f32(d * E2M1_DOUBLED[nibble16(&b[QS..], j)] as f32);
        }
    }
}

/// Half of an unsigned E4M3 scale as gguf-py's NVFP4.ue4m3_to_fp32 computes
/// it: bit 7 ignored, 0x00 and 0x7F are 0, no NaN; every value exact.
#[inline(always)]
pub(crate) fn ue4m3_half(x: u8) -> f32 {
    if x == 0 || x == 0x7F {
        return 0.0;
    }
    let (e, m) = (((x >> 3) & 0x0F) as u32, (x & 7) as u32);
    if e == 0 {
        m as f32 * (1.0 / 1024.0) // (m * 2^-9) / 2
    } else {
        f32::from_bits(((e + 119) << 23) | (m << 20)) // (1 + m/8) 2^(e-7) / 2
    }
}

/// Four 16-element sub-blocks, each with a UE4M3 scale s and 8 bytes of
/// nibbles (low, then high): x = (s / 2) * E2M1_DOUBLED[q].
pub fn nvfp4<O: Output>(src: &[u8], dst: &mut [u16]) {
    use block::nvfp4::*;
    for (b, out) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(ELEMS)) {
        for (k, sub) in out.chunks_exact_mut(16).enumerate() {
            let d = ue4m3_half(b[D + k]);
            let qs = &b[QS + 8 * k..QS + 8 * k + 8];
            for (j, o) in sub.iter_mut().enumerate() {
                let q = (qs[j % 8] >> (4 * (j / 8))) & 0x0F;
                *o = O::from_f32(d * E2M1_DOUBLED[q as usize] as f32);
            }
        }
    }
}
