//! Portable F32, F16 and BF16 -> the output dtype: F32 rounded once, a
//! source of the output's own type copied bit for bit.

use crate::output::Output;

pub fn f32<O: Output>(src: &[u8], dst: &mut [u16]) {
    for (s, o) in src.chunks_exact(4).zip(dst.iter_mut()) {
        *o = O::from_f32(f32::from_le_bytes([s[0], s[1], s[2], s[3]]));
    }
}

pub fn f16<O: Output>(src: &[u8], dst: &mut [u16]) {
    for (s, o) in src.chunks_exact(2).zip(dst.iter_mut()) {
        *o = O::from_f16_bits(u16::from_le_bytes([s[0], s[1]]));
    }
}

/// BF16 to BF16 is copied bit for bit (NaN payloads included).
pub fn bf16<O: Output>(src: &[u8], dst: &mut [u16]) {
    for (s, o) in src.chunks_exact(2).zip(dst.iter_mut()) {
        *o = O::from_bf16_bits(u16::from_le_bytes([s[0], s[1]]));
    }
}
