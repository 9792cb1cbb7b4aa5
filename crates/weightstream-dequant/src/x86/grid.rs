//! x86 kernels of the IQ grid formats: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
//! IQ3_S, IQ1_S, IQ1_M, each for AVX2 and AVX-512 through `Lut`
//! (lookup.rs has the tables and why they are exact).

use std::arch::x86_64::*;

use super::avx512::Round;
use super::emit::{bit_bytes32, blocks};
use super::lookup::*;
use crate::scalar::{f16_at, iq1_m_d};
use weightstream_blocks::block;
use weightstream_blocks::block_tables::*;

kernels! {
    iq2_xxs, iq2_xxs_avx512_int, iq2_xxs_avx512 => iq2_xxs_body;
    iq2_xs, iq2_xs_avx512_int, iq2_xs_avx512 => iq2_xs_body;
    iq2_s, iq2_s_avx512_int, iq2_s_avx512 => iq2_s_body;
    iq3_xxs, iq3_xxs_avx512_int, iq3_xxs_avx512 => iq3_xxs_body;
    iq3_s, iq3_s_avx512_int, iq3_s_avx512 => iq3_s_body;
    iq1_s, iq1_s_avx512_int, iq1_s_avx512 => iq1_s_body;
    iq1_m, iq1_m_avx512_int, iq1_m_avx512 => iq1_m_body;
}

/// Two grid entries (8 bytes each) and their sign bytes: the 16 grid
/// bytes, and 0xFF where value j's sign bit (bit j of its sign byte) is set.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn entries16(e0: u64, s0: u8, e1: u64, s1: u8) -> (__m128i, __m128i) {
    let g = _mm_set_epi64x(e1 as i64, e0 as i64);
    let bit = _mm_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    let s = _mm_set_epi64x(i64::from_ne_bytes([s1; 8]), i64::from_ne_bytes([s0; 8]));
    (g, _mm_cmpeq_epi8(_mm_and_si128(s, bit), bit))
}

/// The grids' byte values: IQ2's three at index `byte >> 4` (and again at
/// 4 + that, for a second scale), IQ3_XXS's eight at `byte >> 3`, IQ3_S's
/// eight at `byte >> 1` (checked below).
pub(super) const IQ2_MAGS: [u8; 8] = [0x08, 0x19, 0x2B, 0, 0x08, 0x19, 0x2B, 0];

pub(super) const IQ3XXS_MAGS: [u8; 8] = [0x04, 0x0C, 0x14, 0x1C, 0x24, 0x2C, 0x34, 0x3E];

pub(super) const IQ3S_MAGS: [u8; 8] = [1, 3, 5, 7, 9, 11, 13, 15];

/// Whether every byte of every entry (`width` bytes) is `mags[byte >> shift]`.
pub(super) const fn grid_bytes_are(grid: &[u64], width: usize, mags: &[u8; 8], shift: u32) -> bool {
    let mut i = 0;
    while i < grid.len() {
        let mut k = 0;
        while k < width {
            let b = (grid[i] >> (8 * k)) as u8;
            if mags[(b >> shift) as usize & 7] != b {
                return false;
            }
            k += 1;
        }
        i += 1;
    }
    true
}

pub(super) const fn widen<const N: usize>(g: &[u32; N]) -> [u64; N] {
    let mut w = [0u64; N];
    let mut i = 0;
    while i < g.len() {
        w[i] = g[i] as u64;
        i += 1;
    }
    w
}

const _: () = {
    assert!(grid_bytes_are(&IQ2XXS_GRID, 8, &IQ2_MAGS, 4));
    assert!(grid_bytes_are(&IQ2XS_GRID, 8, &IQ2_MAGS, 4));
    assert!(grid_bytes_are(&IQ2S_GRID, 8, &IQ2_MAGS, 4));
    assert!(grid_bytes_are(&widen(&IQ3XXS_GRID), 4, &IQ3XXS_MAGS, 3));
    assert!(grid_bytes_are(&widen(&IQ3S_GRID), 4, &IQ3S_MAGS, 1));
};

/// A grid's magnitudes as f32 (exact).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn mags_f32(m: &[u8; 8]) -> __m256 {
    // SAFETY: `m` is 8 readable bytes, all that loadl reads.
    let v = unsafe { _mm_loadl_epi64(m.as_ptr() as *const __m128i) };
    _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v))
}

/// The outputs of db * m (BF16 or float16, `L`'s) for the 8 magnitudes m as a `pshufb` table (low bytes,
/// then high bytes), db0 for entries 0..4 and db1 for 4..8 (IQ2's three
/// magnitudes fit twice: two 16-value groups' scales in one table), and
/// the masks that flip a negative value's sign bit: 0x80, or 0 where db is
/// NaN (see `grid16`).
#[inline(always)]
pub(super) unsafe fn grid_table<L: Lut>(mags: __m256, db0: f32, db1: f32) -> (L::Table, __m128i, __m128i) {
    // SAFETY: inside a kernel of `kernels!` (avx2 at least).
    unsafe {
        let t = L::table8(_mm256_mul_ps(mags, _mm256_set_m128(_mm_set1_ps(db1), _mm_set1_ps(db0))));
        let flip = |db: f32| _mm_set1_epi8(if db.is_nan() { 0 } else { -128 });
        (t, flip(db0), flip(db1))
    }
}

/// 16 grid values (bytes `g`, negative where `neg`) times db, from
/// `grid_table`'s outputs: entry `BASE | byte >> SHIFT`, sign bit flipped
/// (`flip`) for the negative ones. gguf-py computes `(db * g) * sign`;
/// `db * g` is never NaN unless db is (g > 0), and otherwise `* -1` negates
/// it exactly and round to nearest even is symmetric, so its output is the
/// positive one's with the sign bit flipped (zeros and infinities
/// included). A NaN db gives the canonical NaN either way: its flip is 0.
#[inline(always)]
pub(super) unsafe fn grid16<L: Lut, const SHIFT: i32, const BASE: i8>(
    (g, neg): (__m128i, __m128i),
    t: L::Table,
    flip: __m128i,
    out: *mut u16,
) {
    // SAFETY: inside a kernel of `kernels!` (avx2 at least); the caller
    // guarantees 16 writable u16 at out.
    unsafe {
        let m = _mm_or_si128(_mm_and_si128(_mm_srli_epi16::<SHIFT>(g), _mm_set1_epi8(7)), _mm_set1_epi8(BASE));
        // SAFETY: the caller guarantees 16 writable u16 at out.
        L::lookup16(m, t, _mm_and_si128(neg, flip), out);
    }
}

/// Two grid entries of 4 values each as one of 8 (IQ3).
#[inline(always)]
pub(super) fn pair(lo: u32, hi: u32) -> u64 {
    lo as u64 | ((hi as u64) << 32)
}

/// IQ2_XS/IQ2_S: the table of two 16-value groups whose scales are the
/// nibbles of `scales`, each d * (0.5 + nibble) * 0.25.
#[inline(always)]
pub(super) unsafe fn iq2_table<L: Lut>(mags: __m256, d: f32, scales: u8) -> (L::Table, __m128i, __m128i) {
    let db = |s: u8| d * (0.5 + s as f32) * 0.25;
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables.
    unsafe { grid_table::<L>(mags, db(scales & 0x0F), db(scales >> 4)) }
}

#[inline(always)]
pub(super) unsafe fn iq2_xxs_body<L: Lut>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: inside a kernel of `kernels!`: its features are enabled, the
    // lengths checked.
    unsafe {
        use block::iq2_xxs::*;
        let mags = mags_f32(&IQ2_MAGS);
        for (b, o) in blocks(src, dst, BYTES, ELEMS) {
            let d = f16_at(b, D);
            for ib in 0..8 {
                let at = QS + 8 * ib;
                let aux = u32::from_le_bytes([b[at + 4], b[at + 5], b[at + 6], b[at + 7]]);
                let db = d * (0.5 + (aux >> 28) as f32) * 0.25;
                let (t, flip, _) = grid_table::<L>(mags, db, db);
                let sign = |l: usize| KSIGNS[((aux >> (7 * l)) & 0x7F) as usize];
                let entry = |l: usize| IQ2XXS_GRID[b[at + l] as usize];
                for h in 0..2 {
                    let q = entries16(entry(2 * h), sign(2 * h), entry(2 * h + 1), sign(2 * h + 1));
                    // SAFETY: outputs 32ib + 16h .. + 16 inside the block's 256.
                    grid16::<L, 4, 0>(q, t, flip, o.add(32 * ib + 16 * h));
                }
            }
        }
    }
}

#[inline(always)]
pub(super) unsafe fn iq2_xs_body<L: Lut>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: inside a kernel of `kernels!`: its features are enabled, the
    // lengths checked.
    unsafe {
        use block::iq2_xs::*;
        let mags = mags_f32(&IQ2_MAGS);
        for (b, o) in blocks(src, dst, BYTES, ELEMS) {
            let d = f16_at(b, D);
            // Two groups of 16 values: four u16, each a 9-bit grid index and a 7-bit sign index.
            let qs: [u64; 8] = std::array::from_fn(|j| u64::from_le_bytes(b[QS + 8 * j..QS + 8 * j + 8].try_into().unwrap()));
            let group = |w: u64| {
                let (a, c) = (w as usize & 0xFFFF, (w >> 16) as usize & 0xFFFF);
                entries16(IQ2XS_GRID[a & 511], KSIGNS[a >> 9], IQ2XS_GRID[c & 511], KSIGNS[c >> 9])
            };
            for (j, &w) in qs.iter().enumerate() {
                let (t, flip0, flip1) = iq2_table::<L>(mags, d, b[SCALES + j]);
                // SAFETY: outputs 32j .. 32j + 32 inside the block's 256.
                grid16::<L, 4, 0>(group(w), t, flip0, o.add(32 * j));
                grid16::<L, 4, 4>(group(w >> 32), t, flip1, o.add(32 * j + 16));
            }
        }
    }
}

#[inline(always)]
pub(super) unsafe fn iq2_s_body<L: Lut>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: inside a kernel of `kernels!`: its features are enabled, the
    // lengths checked.
    unsafe {
        use block::iq2_s::*;
        let mags = mags_f32(&IQ2_MAGS);
        for (b, o) in blocks(src, dst, BYTES, ELEMS) {
            let d = f16_at(b, D);
            let entry = |i: usize| IQ2S_GRID[b[QS + i] as usize | ((((b[QH + i / 4] >> (2 * (i % 4))) & 3) as usize) << 8)];
            let group = |k: usize| entries16(entry(2 * k), b[SIGNS + 2 * k], entry(2 * k + 1), b[SIGNS + 2 * k + 1]);
            for j in 0..8 {
                let k = 2 * j;
                let (t, flip0, flip1) = iq2_table::<L>(mags, d, b[SCALES + j]);
                // SAFETY: outputs 16k .. 16k + 32 inside the block's 256.
                grid16::<L, 4, 0>(group(k), t, flip0, o.add(16 * k));
                grid16::<L, 4, 4>(group(k + 1), t, flip1, o.add(16 * k + 16));
            }
        }
    }
}

#[inline(always)]
pub(super) unsafe fn iq3_xxs_body<L: Lut>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: inside a kernel of `kernels!`: its features are enabled, the
    // lengths checked.
    unsafe {
        use block::iq3_xxs::*;
        let mags = mags_f32(&IQ3XXS_MAGS);
        for (b, o) in blocks(src, dst, BYTES, ELEMS) {
            let d = f16_at(b, D);
            for ib in 0..8 {
                let at = SCALES + 4 * ib;
                let aux = u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
                let db = d * (0.5 + (aux >> 28) as f32) * 0.5;
                let (t, flip, _) = grid_table::<L>(mags, db, db);
                let sign = |l: usize| KSIGNS[((aux >> (7 * l)) & 0x7F) as usize];
                let entry = |l: usize| {
                    let i = QS + 8 * ib + 2 * l;
                    pair(IQ3XXS_GRID[b[i] as usize], IQ3XXS_GRID[b[i + 1] as usize])
                };
                for h in 0..2 {
                    let q = entries16(entry(2 * h), sign(2 * h), entry(2 * h + 1), sign(2 * h + 1));
                    // SAFETY: outputs 32ib + 16h .. + 16 inside the block's 256.
                    grid16::<L, 3, 0>(q, t, flip, o.add(32 * ib + 16 * h));
                }
            }
        }
    }
}

#[inline(always)]
pub(super) unsafe fn iq3_s_body<L: Lut>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: inside a kernel of `kernels!`: its features are enabled, the
    // lengths checked.
    unsafe {
        use block::iq3_s::*;
        let mags = mags_f32(&IQ3S_MAGS);
        for (b, o) in blocks(src, dst, BYTES, ELEMS) {
            let d = f16_at(b, D);
            for ib in 0..8 {
                let s = (b[SCALES + ib / 2] >> (4 * (ib % 2))) & 0x0F;
                let db = d * (1 + 2 * s) as f32;
                let (t, flip, _) = grid_table::<L>(mags, db, db);
                // The 8 grid indices of the group: byte qs[8ib + j], bit j
                // of qh[ib] as bit 8 (< 512); their entries in order are
                // the group's 32 bytes, one `vpgatherdd`.
                // SAFETY: qs[8ib .. 8ib + 8] inside the block; every index
                // below 512 = IQ3S_GRID.len().
                let qs = _mm256_cvtepu8_epi32(_mm_loadl_epi64(b.as_ptr().add(QS + 8 * ib) as *const __m128i));
                let hi = _mm256_srlv_epi32(_mm256_set1_epi32(b[QH + ib] as i32), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
                let idx = _mm256_or_si256(qs, _mm256_slli_epi32::<8>(_mm256_and_si256(hi, _mm256_set1_epi32(1))));
                let g = _mm256_i32gather_epi32::<4>(IQ3S_GRID.as_ptr() as *const i32, idx);
                // Value j's sign: bit j % 8 of signs[4ib + j / 8].
                let neg = bit_bytes32(u32::from_le_bytes([
                    b[SIGNS + 4 * ib],
                    b[SIGNS + 4 * ib + 1],
                    b[SIGNS + 4 * ib + 2],
                    b[SIGNS + 4 * ib + 3],
                ]));
                // SAFETY: outputs 32ib .. 32ib + 32 inside the block's 256.
                let o = o.add(32 * ib);
                grid16::<L, 1, 0>((_mm256_castsi256_si128(g), _mm256_castsi256_si128(neg)), t, flip, o);
                grid16::<L, 1, 0>((_mm256_extracti128_si256::<1>(g), _mm256_extracti128_si256::<1>(neg)), t, flip, o.add(16));
            }
        }
    }
}

/// The IQ1 outputs dl * (g + delta) for g = -1, 0, 1: entries 0..3 with
/// `delta0`, 4..7 with `delta1` (the add and the multiply each rounded, as
/// in the scalar kernel), as a `table8` table.
#[inline(always)]
pub(super) unsafe fn iq1_table<L: Lut>(dl: f32, delta0: f32, delta1: f32) -> L::Table {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables.
    unsafe {
        let g = _mm256_setr_ps(-1.0, 0.0, 1.0, 0.0, -1.0, 0.0, 1.0, 0.0);
        let delta = _mm256_set_m128(_mm_set1_ps(delta1), _mm_set1_ps(delta0));
        L::table8(_mm256_mul_ps(_mm256_add_ps(g, delta), _mm256_set1_ps(dl)))
    }
}

/// 16 IQ1 outputs: two grid entries (i8 values -1, 0, 1), the first with
/// `iq1_table`'s `delta0`, the second with its `delta1`.
#[inline(always)]
pub(super) unsafe fn iq1_16<L: Lut>(e0: u64, e1: u64, t: L::Table, out: *mut u16) {
    // SAFETY: the caller upholds this function's contract: the CPU has the
    // features it enables, and the pointers and lengths are as documented.
    unsafe {
        let g = _mm_set_epi64x(e1 as i64, e0 as i64);
        let idx =
            _mm_or_si128(_mm_and_si128(_mm_add_epi8(g, _mm_set1_epi8(1)), _mm_set1_epi8(3)), _mm_set_epi64x(0x0404_0404_0404_0404, 0));
        // SAFETY: the caller guarantees 16 writable u16 at out.
        L::lookup16(idx, t, _mm_setzero_si128(), out);
    }
}

#[inline(always)]
pub(super) unsafe fn iq1_s_body<L: Lut>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: inside a kernel of `kernels!`: its features are enabled, the
    // lengths checked.
    unsafe {
        use block::iq1_s::*;
        for (b, o) in blocks(src, dst, BYTES, ELEMS) {
            let d = f16_at(b, D);
            for ib in 0..8 {
                let qh = u16::from_le_bytes([b[QH + 2 * ib], b[QH + 2 * ib + 1]]);
                let dl = d * (2 * ((qh >> 12) & 7) + 1) as f32;
                let delta = f32::from_bits(0x3E00_0000 | (((qh & 0x8000) as u32) << 16)); // ±0.125 by bit 15
                let entry = |l: usize| IQ1S_GRID[b[QS + 4 * ib + l] as usize | ((((qh >> (3 * l)) & 7) as usize) << 8)];
                let t = iq1_table::<L>(dl, delta, delta);
                for h in 0..2 {
                    // SAFETY: outputs 32ib + 16h .. + 16 inside the block's 256.
                    iq1_16::<L>(entry(2 * h), entry(2 * h + 1), t, o.add(32 * ib + 16 * h));
                }
            }
        }
    }
}

/// IQ1_M's whole blocks: a table per 16 outputs (`iq1_m_groups`) on AVX2;
/// AVX-512 does a block's work in vectors (grid512.rs).
pub(super) trait Iq1mBlocks: Lut {
    unsafe fn iq1_m(src: &[u8], dst: &mut [u16]);
}

impl<O: super::avx2::Out256> Iq1mBlocks for Avx2<O> {
    #[inline(always)]
    unsafe fn iq1_m(src: &[u8], dst: &mut [u16]) {
        // SAFETY: as for the kernel calling this (features enabled, lengths checked).
        unsafe { iq1_m_groups::<Self>(src, dst) }
    }
}

impl<R: Round> Iq1mBlocks for Avx512<R> {
    #[inline(always)]
    unsafe fn iq1_m(src: &[u8], dst: &mut [u16]) {
        // SAFETY: as for the kernel calling this; lengths as `Kernel::check` leaves them.
        unsafe { super::grid512::iq1_m_vectors::<R>(src, dst) }
    }
}

#[inline(always)]
pub(super) unsafe fn iq1_m_body<L: Iq1mBlocks>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: inside a kernel of `kernels!`: its features are enabled, the
    // lengths checked.
    unsafe { L::iq1_m(src, dst) }
}

/// IQ1_M per 16 outputs: a table of 8 (`iq1_table`), two grid entries
/// looked up in it (`iq1_16`).
#[inline(always)]
pub(super) unsafe fn iq1_m_groups<L: Lut>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: inside a kernel of `kernels!`: its features are enabled, the
    // lengths checked.
    unsafe {
        use block::iq1_m::*;
        for (b, o) in blocks(src, dst, BYTES, ELEMS) {
            let d = iq1_m_d(b);
            // The four scale words as one u64: group k's 3 bits at 16 (k / 4) + 3 (k % 4).
            let sc = u64::from_le_bytes(b[SCALES..SCALES + 8].try_into().unwrap());
            for k in 0..16 {
                let s = ((sc >> (16 * (k / 4) + 3 * (k % 4))) & 7) as u16;
                let dl = d * (2 * s + 1) as f32;
                // Groups 2k and 2k + 1 share byte k of qh: a nibble each.
                let (h0, h1) = (b[QH + k] & 0x0F, b[QH + k] >> 4);
                let entry = |i: usize, h: u8| IQ1S_GRID[b[QS + i] as usize | (((h & 7) as usize) << 8)];
                let (e0, e1) = (entry(2 * k, h0), entry(2 * k + 1, h1));
                // ±0.125 by bit 3 of the nibble, without a branch (random bits mispredict).
                let delta = |h: u8| f32::from_bits(0x3E00_0000 | (((h & 8) as u32) << 28));
                // SAFETY: outputs 16k .. 16k + 16 inside the block's 256.
                iq1_16::<L>(e0, e1, iq1_table::<L>(dl, delta(h0), delta(h1)), o.add(16 * k));
            }
        }
    }
}
