//! The IQ grid formats (IQ2_XXS ... IQ1_M): each index picks 8 (or 4)
//! values from a fixed grid (`block_tables`, ggml's packing: byte j of an
//! entry is value j), signs come from sign bytes or the KSIGNS patterns,
//! and a 4-bit (3-bit) sub-block scale multiplies the f16 d. Every formula
//! and its f32 operation order is gguf-py 0.19's (docs/numerics.md).

use super::f16_at;
use crate::numerics::f16_to_f32;
use crate::output::Output;
use weightstream_blocks::block;
use weightstream_blocks::block_tables::{IQ1S_GRID, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID, KSIGNS};

#[inline(always)]
pub(crate) fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

#[inline(always)]
pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Value j of a grid entry (unsigned grids: IQ2, IQ3).
#[inline(always)]
fn level(entry: u64, j: usize) -> f32 {
    ((entry >> (8 * j)) & 0xFF) as u8 as f32
}

/// 8 outputs: (db * grid[j]) * (±1 by bit j of `signs`).
#[inline(always)]
fn emit8<O: Output>(out: &mut [u16], db: f32, entry: u64, signs: u8) {
    for (j, o) in out.iter_mut().enumerate() {
        let s = if (signs >> j) & 1 == 0 { 1.0f32 } else { -1.0 };
        *o = O::from_f32(db * level(entry, j) * s);
    }
}

/// (d * (0.5 + s)) * 0.25, the IQ2 sub-block scale.
#[inline(always)]
pub(crate) fn iq2_scale(d: f32, s: u32) -> f32 {
    d * (0.5 + s as f32) * 0.25
}

/// Per 32 elements, a u32 of four grid index bytes and a u32 of four 7-bit
/// sign indices (bits 0..28) and the scale (bits 28..32).
pub fn iq2_xxs<O: Output>(src: &[u8], dst: &mut [u16]) {
    use block::iq2_xxs::*;
    for (b, out) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(ELEMS)) {
        let d = f16_at(b, D);
        for (ib, sub) in out.chunks_exact_mut(32).enumerate() {
            let idx = u32_at(b, QS + 8 * ib);
            let aux = u32_at(b, QS + 8 * ib + 4);
            let db = iq2_scale(d, aux >> 28);
            for (l, o) in sub.chunks_exact_mut(8).enumerate() {
                let entry = IQ2XXS_GRID[((idx >> (8 * l)) & 0xFF) as usize];
                emit8::<O>(o, db, entry, KSIGNS[((aux >> (7 * l)) & 0x7F) as usize]);
            }
        }
    }
}

/// Per 8 elements a u16: 9-bit grid index, 7-bit sign index; a 4-bit scale
/// per 16 elements.
pub fn iq2_xs<O: Output>(src: &[u8], dst: &mut [u16]) {
    use block::iq2_xs::*;
    for (b, out) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(ELEMS)) {
        let d = f16_at(b, D);
        for (i, o) in out.chunks_exact_mut(8).enumerate() {
            let q = u16_at(b, QS + 2 * i);
            let db = iq2_scale(d, ((b[SCALES + i / 4] >> (4 * ((i / 2) % 2))) & 0x0F) as u32);
            emit8::<O>(o, db, IQ2XS_GRID[(q & 511) as usize], KSIGNS[(q >> 9) as usize]);
        }
    }
}

/// Per 8 elements a grid index byte with 2 high bits from `qh` and a sign
/// byte; a 4-bit scale per 16 elements.
pub fn iq2_s<O: Output>(src: &[u8], dst: &mut [u16]) {
    use block::iq2_s::*;
    for (b, out) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(ELEMS)) {
        let d = f16_at(b, D);
        for (i, o) in out.chunks_exact_mut(8).enumerate() {
            let hi = ((b[QH + i / 4] >> (2 * (i % 4))) & 3) as usize;
            let db = iq2_scale(d, ((b[SCALES + i / 4] >> (4 * ((i / 2) % 2))) & 0x0F) as u32);
            emit8::<O>(o, db, IQ2S_GRID[b[QS + i] as usize | (hi << 8)], b[SIGNS + i]);
        }
    }
}

/// Per 32 elements, 8 grid index bytes (4 values each) and a u32 of four
/// 7-bit sign indices and the scale: db = (d * (0.5 + s)) * 0.5.
pub fn iq3_xxs<O: Output>(src: &[u8], dst: &mut [u16]) {
    use block::iq3_xxs::*;
    for (b, out) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(ELEMS)) {
        let d = f16_at(b, D);
        for (ib, sub) in out.chunks_exact_mut(32).enumerate() {
            let aux = u32_at(b, SCALES + 4 * ib);
            let db = d * (0.5 + (aux >> 28) as f32) * 0.5;
            for (l, o) in sub.chunks_exact_mut(8).enumerate() {
                let lo = IQ3XXS_GRID[b[QS + 8 * ib + 2 * l] as usize] as u64;
                let hi = IQ3XXS_GRID[b[QS + 8 * ib + 2 * l + 1] as usize] as u64;
                emit8::<O>(o, db, lo | (hi << 32), KSIGNS[((aux >> (7 * l)) & 0x7F) as usize]);
            }
        }
    }
}

/// Per 4 elements a grid index byte with a ninth bit from `qh`; sign bytes
/// per 8; a 4-bit scale per 32: db = d * (1 + 2s).
pub fn iq3_s<O: Output>(src: &[u8], dst: &mut [u16]) {
    use block::iq3_s::*;
    for (b, out) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(ELEMS)) {
        let d = f16_at(b, D);
        for (ib, sub) in out.chunks_exact_mut(32).enumerate() {
            let s = (b[SCALES + ib / 2] >> (4 * (ib % 2))) & 0x0F;
            let db = d * (1 + 2 * s) as f32;
            for (l, o) in sub.chunks_exact_mut(8).enumerate() {
                let index = |i: usize| b[QS + i] as usize | ((((b[QH + i / 8] >> (i % 8)) & 1) as usize) << 8);
                let i = 8 * ib + 2 * l;
                let entry = IQ3S_GRID[index(i)] as u64 | ((IQ3S_GRID[index(i + 1)] as u64) << 32);
                emit8::<O>(o, db, entry, b[SIGNS + 4 * ib + l]);
            }
        }
    }
}

/// 8 outputs of the IQ1 formats: dl * (grid[j] + delta), grid values -1, 0, 1.
#[inline(always)]
fn emit8_iq1<O: Output>(out: &mut [u16], dl: f32, entry: u64, delta: f32) {
    for (j, o) in out.iter_mut().enumerate() {
        let g = ((entry >> (8 * j)) & 0xFF) as u8 as i8 as f32;
        *o = O::from_f32(dl * (g + delta));
    }
}

/// The IQ1 delta: 0.125, negative where the flag is set.
#[inline(always)]
pub(crate) fn iq1_delta(negative: bool) -> f32 {
    if negative {
        -0.125
    } else {
        0.125
    }
}

/// Per 32 elements a u16 of `qh`: four 3-bit high index parts, a 3-bit
/// scale (bits 12..15), the delta's sign (bit 15); dl = d * (2s + 1).
pub fn iq1_s<O: Output>(src: &[u8], dst: &mut [u16]) {
    use block::iq1_s::*;
    for (b, out) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(ELEMS)) {
        let d = f16_at(b, D);
        for (ib, sub) in out.chunks_exact_mut(32).enumerate() {
            let qh = u16_at(b, QH + 2 * ib);
            let dl = d * (2 * ((qh >> 12) & 7) + 1) as f32;
            let delta = iq1_delta(qh & 0x8000 != 0);
            for (l, o) in sub.chunks_exact_mut(8).enumerate() {
                let index = b[QS + 4 * ib + l] as usize | ((((qh >> (3 * l)) & 7) as usize) << 8);
                emit8_iq1::<O>(o, dl, IQ1S_GRID[index], delta);
            }
        }
    }
}

/// The f16 d of an IQ1_M block: the top nibbles of its four scale u16s.
#[inline(always)]
pub(crate) fn iq1_m_d(b: &[u8]) -> f32 {
    use block::iq1_m::*;
    let sc = |k: usize| u16_at(b, SCALES + 2 * k);
    f16_to_f32((sc(0) >> 12) | ((sc(1) >> 8) & 0x00F0) | ((sc(2) >> 4) & 0x0F00) | (sc(3) & 0xF000))
}

/// Per 8 elements a grid index byte with 3 high bits and the delta's sign
/// from a nibble of `qh`; a 3-bit scale per 16 elements (dl = d * (2s + 1)).
pub fn iq1_m<O: Output>(src: &[u8], dst: &mut [u16]) {
    use block::iq1_m::*;
    for (b, out) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(ELEMS)) {
        let d = iq1_m_d(b);
        for (i, o) in out.chunks_exact_mut(8).enumerate() {
            let k = i / 2; // 16-element group
            let s = (u16_at(b, SCALES + 2 * (k / 4)) >> (3 * (k % 4))) & 7;
            let dl = d * (2 * s + 1) as f32;
            let h = (b[QH + i / 2] >> (4 * (i % 2))) & 0x0F;
            let index = b[QS + i] as usize | (((h & 7) as usize) << 8);
            emit8_iq1::<O>(o, dl, IQ1S_GRID[index], iq1_delta(h & 8 != 0));
        }
    }
}
