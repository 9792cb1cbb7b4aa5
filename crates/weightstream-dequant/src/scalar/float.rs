//! Portable F32, F16 and BF16 -> BF16.

use crate::numerics::{f16_to_f32, f32_to_bf16};

pub fn f32(src: &[u8], dst: &mut [u16]) {
    for (s, o) in src.chunks_exact(4).zip(dst.iter_mut()) {
        *o = f32_to_bf16(f32::from_le_bytes([s[0], s[1], s[2], s[3]]));
    }
}

pub fn f16(src: &[u8], dst: &mut [u16]) {
    for (s, o) in src.chunks_exact(2).zip(dst.iter_mut()) {
        *o = f32_to_bf16(f16_to_f32(u16::from_le_bytes([s[0], s[1]])));
    }
}

/// BF16 is copied bit for bit (NaN payloads included).
pub fn bf16(src: &[u8], dst: &mut [u16]) {
    for (s, o) in src.chunks_exact(2).zip(dst.iter_mut()) {
        *o = u16::from_le_bytes([s[0], s[1]]);
    }
}
