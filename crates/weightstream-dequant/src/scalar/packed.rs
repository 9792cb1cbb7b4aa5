//! Portable runs of the safetensors packs: E2M1 pairs and INT4/INT8
//! words, each run under one scale (and zero point).

use crate::numerics::{self};
use crate::output::Output;
use weightstream_blocks::E2M1_VALUES;

/// A run of E2M1 pairs (low nibble first) sharing one scale:
/// x = E2M1[q] * scale, one rounded f32 multiply, then BF16.
pub fn e2m1_run<O: Output>(scale: f32, src: &[u8], dst: &mut [u16]) {
    for (&b, o) in src.iter().zip(dst.chunks_exact_mut(2)) {
        o[0] = O::from_f32(E2M1_VALUES[(b & 0x0F) as usize] * scale);
        o[1] = O::from_f32(E2M1_VALUES[(b >> 4) as usize] * scale);
    }
}

/// A run of packed integers (`bits` 4 or 8, whole int32 words, values
/// stored with a `2^(bits-1)` offset, the first in the low bits) sharing
/// one scale and zero point: x = f32(q - zero) * scale (exact for F16 and
/// BF16 scales), rounded to F16 when `round_f16`, then BF16.
pub fn int_run<O: Output>(bits: u8, scale: f32, zero: f32, round_f16: bool, src: &[u8], dst: &mut [u16]) {
    let out = |q: i32| {
        let x = (q as f32 - zero) * scale;
        O::from_f32(if round_f16 { numerics::round_f16(x) } else { x })
    };
    if bits == 4 {
        for (&b, o) in src.iter().zip(dst.chunks_exact_mut(2)) {
            o[0] = out((b & 0x0F) as i32 - 8);
            o[1] = out((b >> 4) as i32 - 8);
        }
    } else {
        for (&b, o) in src.iter().zip(dst.iter_mut()) {
            *o = out(b as i32 - 128);
        }
    }
}
