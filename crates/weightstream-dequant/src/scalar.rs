//! Portable kernels: the reference, and the path on CPUs without AVX2.
//! Written as plain loops over fixed-size blocks, which LLVM vectorises
//! for the target's baseline SIMD (SSE2, NEON).

use crate::numerics::{self, f16_to_f32, f32_to_bf16, Fp8Table};
use weightstream_blocks::{block, BlockFormat, BlockLayout, Fp8Format, E2M1_VALUES};

mod grid;
mod lut4;
mod ternary;

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) use grid::iq1_m_d;
#[cfg(target_arch = "aarch64")]
pub(crate) use grid::{iq1_delta, iq2_scale, u16_at, u32_at};
pub use grid::{iq1_m, iq1_s, iq2_s, iq2_xs, iq2_xxs, iq3_s, iq3_xxs};
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) use lut4::{e8m0_half, iq4_xs_scale, ue4m3_half};
pub use lut4::{iq4_nl, iq4_xs, mxfp4, nvfp4};
pub use ternary::{tq1_0, tq2_0};

/// The portable kernel of a block format: whole blocks of `src` to `dst`.
pub fn block_kernel(f: BlockFormat) -> fn(&[u8], &mut [u16]) {
    match f {
        BlockFormat::Q4_0 => q4_0,
        BlockFormat::Q4_1 => q4_1,
        BlockFormat::Q5_0 => q5_0,
        BlockFormat::Q5_1 => q5_1,
        BlockFormat::Q8_0 => q8_0,
        BlockFormat::Q2_K => q2_k,
        BlockFormat::Q3_K => q3_k,
        BlockFormat::Q4_K => q4_k,
        BlockFormat::Q5_K => q5_k,
        BlockFormat::Q6_K => q6_k,
        BlockFormat::IQ4_NL => iq4_nl,
        BlockFormat::IQ4_XS => iq4_xs,
        BlockFormat::MXFP4 => mxfp4,
        BlockFormat::NVFP4 => nvfp4,
        BlockFormat::IQ2_XXS => iq2_xxs,
        BlockFormat::IQ2_XS => iq2_xs,
        BlockFormat::IQ2_S => iq2_s,
        BlockFormat::IQ3_XXS => iq3_xxs,
        BlockFormat::IQ3_S => iq3_s,
        BlockFormat::IQ1_S => iq1_s,
        BlockFormat::IQ1_M => iq1_m,
        BlockFormat::TQ1_0 => tq1_0,
        BlockFormat::TQ2_0 => tq2_0,
    }
}

/// The f16 field at `offset` of a block, as f32 (exact).
#[inline(always)]
pub(crate) fn f16_at(b: &[u8], offset: usize) -> f32 {
    f16_to_f32(u16::from_le_bytes([b[offset], b[offset + 1]]))
}

/// Element `j` (0..32) of a 32-element nibble block: low nibbles first,
/// then high nibbles (Q4_0, Q4_1, Q5_0, Q5_1).
#[inline(always)]
fn nibble(qs: &[u8], j: usize) -> u8 {
    if j < 16 {
        qs[j] & 0x0F
    } else {
        qs[j - 16] >> 4
    }
}

// Every kernel below evaluates gguf-py 0.19's formula (docs/numerics.md)
// with the same f32 operations in the same order, each rounded to nearest
// even: Rust never contracts `a * b - c` into a fused multiply-add.

pub fn q4_0(src: &[u8], dst: &mut [u16]) {
    use block::q4_0::*;
    for (b, out) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(ELEMS)) {
        let d = f16_at(b, D);
        for (j, o) in out.iter_mut().enumerate() {
            *o = f32_to_bf16(d * (nibble(&b[QS..], j) as i32 - 8) as f32);
        }
    }
}

/// x = d * q + m.
pub fn q4_1(src: &[u8], dst: &mut [u16]) {
    use block::q4_1::*;
    for (b, out) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(ELEMS)) {
        let (d, m) = (f16_at(b, D), f16_at(b, M));
        for (j, o) in out.iter_mut().enumerate() {
            *o = f32_to_bf16(d * nibble(&b[QS..], j) as f32 + m);
        }
    }
}

/// Bit `j` of a 5-bit format's `qh` word, as the quant's bit 4.
#[inline(always)]
fn high_bit(qh: u32, j: usize) -> u8 {
    (((qh >> j) & 1) << 4) as u8
}

/// x = d * (q - 16), q 5 bits.
pub fn q5_0(src: &[u8], dst: &mut [u16]) {
    use block::q5_0::*;
    for (b, out) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(ELEMS)) {
        let d = f16_at(b, D);
        let h = u32::from_le_bytes([b[QH], b[QH + 1], b[QH + 2], b[QH + 3]]);
        for (j, o) in out.iter_mut().enumerate() {
            let q = (nibble(&b[QS..], j) | high_bit(h, j)) as i32 - 16;
            *o = f32_to_bf16(d * q as f32);
        }
    }
}

/// x = d * q + m, q 5 bits.
pub fn q5_1(src: &[u8], dst: &mut [u16]) {
    use block::q5_1::*;
    for (b, out) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(ELEMS)) {
        let (d, m) = (f16_at(b, D), f16_at(b, M));
        let h = u32::from_le_bytes([b[QH], b[QH + 1], b[QH + 2], b[QH + 3]]);
        for (j, o) in out.iter_mut().enumerate() {
            let q = nibble(&b[QS..], j) | high_bit(h, j);
            *o = f32_to_bf16(d * q as f32 + m);
        }
    }
}

pub fn q8_0(src: &[u8], dst: &mut [u16]) {
    use block::q8_0::*;
    for (b, out) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(ELEMS)) {
        let d = f16_at(b, D);
        for (j, o) in out.iter_mut().enumerate() {
            *o = f32_to_bf16(d * (b[QS + j] as i8) as f32);
        }
    }
}

/// The 2-bit field of element `e` (0..256) in a K-quant's 64 `qs` bytes:
/// each 32-byte half holds 128 elements, four 32-element groups at bit
/// shifts 0, 2, 4, 6 (Q2_K, Q3_K).
#[inline(always)]
fn crumb(qs: &[u8], e: usize) -> u8 {
    (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3
}

/// x = (d * sc) * q - (dmin * m), sc and m 4 bits per 16 elements.
pub fn q2_k(src: &[u8], dst: &mut [u16]) {
    use block::q2_k::*;
    for (b, out) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(ELEMS)) {
        let (d, dmin) = (f16_at(b, D), f16_at(b, DMIN));
        for (k, sub) in out.chunks_exact_mut(16).enumerate() {
            let sm = b[SCALES + k];
            let dl = d * (sm & 0x0F) as f32;
            let ml = dmin * (sm >> 4) as f32;
            for (l, o) in sub.iter_mut().enumerate() {
                *o = f32_to_bf16(dl * crumb(&b[QS..], 16 * k + l) as f32 - ml);
            }
        }
    }
}

/// The 6-bit signed scale `j` (0..16) of a Q3_K block: low nibbles from
/// bytes 0..8 (low halves first), two high bits from bytes 8..12.
#[inline(always)]
pub(crate) fn q3_k_scale(sc: &[u8], j: usize) -> i32 {
    let lo = if j < 8 { sc[j] & 0x0F } else { sc[j - 8] >> 4 };
    let hi = (sc[8 + j % 4] >> (2 * (j / 4))) & 3;
    (lo | (hi << 4)) as i32 - 32
}

/// x = (d * sc) * q, q = 2 low bits minus 4 where the `hmask` bit is clear.
pub fn q3_k(src: &[u8], dst: &mut [u16]) {
    use block::q3_k::*;
    for (b, out) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(ELEMS)) {
        let d = f16_at(b, D);
        for (k, sub) in out.chunks_exact_mut(16).enumerate() {
            let dl = d * q3_k_scale(&b[SCALES..], k) as f32;
            for (l, o) in sub.iter_mut().enumerate() {
                let e = 16 * k + l;
                let high = (b[HMASK + e % 32] >> (e / 32)) & 1;
                let q = crumb(&b[QS..], e) as i32 - if high == 0 { 4 } else { 0 };
                *o = f32_to_bf16(dl * q as f32);
            }
        }
    }
}

/// Scale and min `j` (0..8) of a Q4_K/Q5_K block's 12 packed bytes, 6 bits
/// each (ggml's get_scale_min_k4).
#[inline(always)]
pub(crate) fn k4_scale_min(sc: &[u8], j: usize) -> (u8, u8) {
    if j < 4 {
        (sc[j] & 0x3F, sc[j + 4] & 0x3F)
    } else {
        ((sc[j + 4] & 0x0F) | ((sc[j - 4] >> 2) & 0x30), (sc[j + 4] >> 4) | ((sc[j] >> 2) & 0x30))
    }
}

/// The nibble of element `e` (0..256) in 128 `qs` bytes: 32-byte groups,
/// low nibbles for the even 32-element sub-block, high for the odd (Q4_K, Q5_K).
#[inline(always)]
fn k_nibble(qs: &[u8], e: usize) -> u8 {
    let k = e / 32;
    (qs[32 * (k / 2) + e % 32] >> (4 * (k % 2))) & 0x0F
}

/// The Q4_K/Q5_K formula: x = (d * sc) * q - (dmin * m), sc and m per 32
/// elements; `quant(block, e)` gives element e's unsigned q.
#[inline(always)]
fn k4_family(src: &[u8], dst: &mut [u16], layout: &BlockLayout, quant: impl Fn(&[u8], usize) -> u8) {
    let field = |name| layout.field(name).expect("K-quant field").0;
    let (d_at, dmin_at, scales_at) = (field("D"), field("DMIN"), field("SCALES"));
    for (b, out) in src.chunks_exact(layout.bytes).zip(dst.chunks_exact_mut(layout.elems)) {
        let (d, dmin) = (f16_at(b, d_at), f16_at(b, dmin_at));
        for (k, sub) in out.chunks_exact_mut(32).enumerate() {
            let (sc, m) = k4_scale_min(&b[scales_at..], k);
            let (dl, ml) = (d * sc as f32, dmin * m as f32);
            for (l, o) in sub.iter_mut().enumerate() {
                *o = f32_to_bf16(dl * quant(b, 32 * k + l) as f32 - ml);
            }
        }
    }
}

pub fn q4_k(src: &[u8], dst: &mut [u16]) {
    use block::q4_k::*;
    k4_family(src, dst, &LAYOUT, |b, e| k_nibble(&b[QS..], e));
}

/// As Q4_K with a fifth bit: bit k of `qh[l]` for element 32k + l.
pub fn q5_k(src: &[u8], dst: &mut [u16]) {
    use block::q5_k::*;
    k4_family(src, dst, &LAYOUT, |b, e| k_nibble(&b[QS..], e) | (((b[QH + e % 32] >> (e / 32)) & 1) << 4));
}

/// x = (d * sc) * (q - 32), q 6 bits: a nibble of `ql` (64-byte groups,
/// low nibbles first) and two bits of `qh` (as Q2_K's crumbs), sc an i8
/// per 16 elements.
pub fn q6_k(src: &[u8], dst: &mut [u16]) {
    use block::q6_k::*;
    for (b, out) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(ELEMS)) {
        let d = f16_at(b, D);
        for (k, sub) in out.chunks_exact_mut(16).enumerate() {
            let dl = d * (b[SCALES + k] as i8) as f32;
            for (l, o) in sub.iter_mut().enumerate() {
                let e = 16 * k + l;
                let (half, i) = (e / 128, e % 128);
                let low = (b[QL + 64 * half + i % 64] >> (4 * (i / 64))) & 0x0F;
                let q = (low | (crumb(&b[QH..], e) << 4)) as i32 - 32;
                *o = f32_to_bf16(dl * q as f32);
            }
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

/// A run of E2M1 pairs (low nibble first) sharing one scale:
/// x = E2M1[q] * scale, one rounded f32 multiply, then BF16.
pub fn e2m1_run(scale: f32, src: &[u8], dst: &mut [u16]) {
    for (&b, o) in src.iter().zip(dst.chunks_exact_mut(2)) {
        o[0] = f32_to_bf16(E2M1_VALUES[(b & 0x0F) as usize] * scale);
        o[1] = f32_to_bf16(E2M1_VALUES[(b >> 4) as usize] * scale);
    }
}

/// A run of packed integers (`bits` 4 or 8, whole int32 words, values
/// stored with a `2^(bits-1)` offset, the first in the low bits) sharing
/// one scale and zero point: x = f32(q - zero) * scale (exact for F16 and
/// BF16 scales), rounded to F16 when `round_f16`, then BF16.
pub fn int_run(bits: u8, scale: f32, zero: f32, round_f16: bool, src: &[u8], dst: &mut [u16]) {
    let out = |q: i32| {
        let x = (q as f32 - zero) * scale;
        f32_to_bf16(if round_f16 { numerics::round_f16(x) } else { x })
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
