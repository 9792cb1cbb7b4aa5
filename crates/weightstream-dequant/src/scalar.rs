//! Portable kernels: the reference, and the path on CPUs without AVX2.
//! Written as plain loops over fixed-size blocks, which LLVM vectorises
//! for the target's baseline SIMD (SSE2, NEON).

use crate::numerics::{f16_to_f32, f32_to_bf16, Fp8Table};
use weightstream_format::Fp8Format;

pub fn q4_0(src: &[u8], dst: &mut [u16]) {
    for (b, out) in src.chunks_exact(18).zip(dst.chunks_exact_mut(32)) {
        let d = f16_to_f32(u16::from_le_bytes([b[0], b[1]]));
        let qs = &b[2..18];
        for j in 0..16 {
            out[j] = f32_to_bf16(d * ((qs[j] & 0x0F) as i32 - 8) as f32);
            out[j + 16] = f32_to_bf16(d * ((qs[j] >> 4) as i32 - 8) as f32);
        }
    }
}

pub fn q8_0(src: &[u8], dst: &mut [u16]) {
    for (b, out) in src.chunks_exact(34).zip(dst.chunks_exact_mut(32)) {
        let d = f16_to_f32(u16::from_le_bytes([b[0], b[1]]));
        for j in 0..32 {
            out[j] = f32_to_bf16(d * (b[2 + j] as i8) as f32);
        }
    }
}

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

/// A run of FP8 values sharing one scale.
pub fn fp8_run(format: Fp8Format, scale: f32, src: &[u8], dst: &mut [u16]) {
    let table = match format {
        Fp8Format::E4M3 => Fp8Table::e4m3(),
        Fp8Format::E5M2 => Fp8Table::e5m2(),
    };
    for (&v, o) in src.iter().zip(dst.iter_mut()) {
        *o = f32_to_bf16(table.0[v as usize] * scale);
    }
}
