//! NEON kernels of the IQ grid formats: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
//! IQ3_S, IQ1_S, IQ1_M (lookup.rs has the tables).

use std::arch::aarch64::*;

use super::neon::Out128;

use super::lookup::*;
use crate::scalar::{f16_at, iq1_delta, iq1_m_d, iq2_scale, u16_at, u32_at};
use weightstream_blocks::block;
use weightstream_blocks::block_tables::*;

/// The values of a grid table's entries: 8 bytes each (IQ2) or 4 (IQ3,
/// whose kernels pair two entries into 8 values).
#[derive(Clone, Copy)]
pub(super) enum Entries {
    Eight(&'static [u64]),
    Four(&'static [u32]),
}

/// How a grid's bytes index the table of its magnitudes.
#[derive(Clone, Copy)]
pub(super) struct Shape {
    /// The magnitude of entry k: every byte of every grid entry is
    /// `mags[(byte >> shift) & 7]`, none 0 (for the sign flip, see [`grid`]).
    mags: [u8; 8],
    shift: i8,
    /// Whether the bytes index 0..4 only (IQ2's three magnitudes), repeated
    /// at 4..8 for a second scale: 0..4 scaled by `db[0]`, 4..8 by `db[1]`.
    /// Otherwise the 8 are scaled by `db[0] == db[1]`.
    split: bool,
}

impl Shape {
    /// The shape of `grid`, its bytes indexing by `byte >> shift`, checked
    /// at compile time: a grid these kernels cannot look up does not build.
    const fn of(grid: Entries, shift: u32, split: bool) -> Shape {
        let (len, width) = match grid {
            Entries::Eight(g) => (g.len(), 8),
            Entries::Four(g) => (g.len(), 4),
        };
        let mut mags = [0u8; 8];
        let mut i = 0;
        while i < len * width {
            let byte = match grid {
                Entries::Eight(g) => (g[i / 8] >> (8 * (i % 8))) as u8,
                Entries::Four(g) => (g[i / 4] >> (8 * (i % 4))) as u8,
            };
            let k = (byte >> shift) as usize;
            assert!(byte != 0 && k < if split { 4 } else { 8 }, "grid byte out of the table's range");
            assert!(mags[k] == 0 || mags[k] == byte, "two grid bytes share a table entry");
            mags[k] = byte;
            i += 1;
        }
        if split {
            let mut k = 0;
            while k < 4 {
                mags[4 + k] = mags[k];
                k += 1;
            }
        }
        Shape { mags, shift: shift as i8, split }
    }
}

/// 32 values of a grid format: four 8-value grid entries (byte j: value
/// j's magnitude) with their sign bytes (bit j set: value j negative), and
/// the scale of values 0..16 and of 16..32.
pub(super) struct Group {
    db: [f32; 2],
    entries: [u64; 4],
    signs: [u8; 4],
}

/// A grid format as [`grid`] runs it.
pub(super) trait Grid {
    const BYTES: usize;
    /// The offset of the block's f16 d.
    const D: usize;
    const SHAPE: Shape;
    /// Values 32ib .. 32ib + 32 of block `b`, scales as the scalar kernel
    /// computes them.
    fn group(b: &[u8], d: f32, ib: usize) -> Group;
}

/// The 16 bytes of two grid entries and, per value, 0xFF where its sign bit
/// (bit j of its sign byte) is set.
#[inline(always)]
pub(super) unsafe fn entries16(e: [u64; 2], s: [u8; 2]) -> (uint8x16_t, uint8x16_t) {
    // SAFETY: NEON is always present on aarch64; no memory is touched.
    unsafe {
        let g = vcombine_u8(vcreate_u8(e[0]), vcreate_u8(e[1]));
        let s = vcombine_u8(vdup_n_u8(s[0]), vdup_n_u8(s[1]));
        (g, vtstq_u8(s, vreinterpretq_u8_u64(vdupq_n_u64(0x8040_2010_0804_0201))))
    }
}

/// 8 magnitudes as f32 (exact): entries 0..4, 4..8.
#[inline(always)]
pub(super) unsafe fn mags_f32(m: &[u8; 8]) -> (float32x4_t, float32x4_t) {
    // SAFETY: 8 readable bytes at m; NEON is always present on aarch64.
    unsafe {
        let w = vmovl_u8(vld1_u8(m.as_ptr()));
        (vcvtq_f32_u32(vmovl_u16(vget_low_u16(w))), vcvtq_f32_u32(vmovl_high_u16(w)))
    }
}

/// The IQ2/IQ3 kernels: per 32 values, a table of O(db * m) (BF16 or float16) for the 8
/// magnitudes m (`vmulq_f32`, as the scalar `db * level`), and each value's
/// output looked up by its grid byte. The scalar kernel computes
/// `(db * g) * (±1)`: `db * g` is NaN only where db is (g > 0), and
/// otherwise `* -1` negates it exactly and round to nearest even is
/// symmetric, so a negative value's output is the positive one's with the
/// sign bit flipped (zeros and infinities included). A NaN db gives the
/// canonical NaN either way, so its flip is 0.
#[target_feature(enable = "neon")]
pub(super) unsafe fn grid<O: Out128, G: Grid>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: the magnitudes are 8 bytes.
    let (m0, m1) = unsafe { mags_f32(&G::SHAPE.mags) };
    let shift = vdupq_n_s8(-G::SHAPE.shift);
    for (b, o) in sized_blocks(src, dst, G::BYTES, 256) {
        let d = f16_at(b, G::D);
        for ib in 0..8 {
            let g = G::group(b, d, ib);
            // SAFETY: outputs 32ib .. 32ib + 32 inside the block's 256.
            unsafe {
                let t = table8::<O>(vmulq_f32(m0, vdupq_n_f32(g.db[0])), vmulq_f32(m1, vdupq_n_f32(g.db[1])));
                for h in 0..2 {
                    let (q, neg) = entries16([g.entries[2 * h], g.entries[2 * h + 1]], [g.signs[2 * h], g.signs[2 * h + 1]]);
                    let base = vdupq_n_u8(if G::SHAPE.split { 4 * h as u8 } else { 0 });
                    let idx = vorrq_u8(vandq_u8(vshlq_u8(q, shift), vdupq_n_u8(7)), base);
                    let flip = vandq_u8(neg, vdupq_n_u8(if g.db[h].is_nan() { 0 } else { 0x80 }));
                    lookup16(idx, t, flip, o.add(32 * ib + 16 * h));
                }
            }
        }
    }
}

/// Two IQ3 entries of 4 values as one of 8.
#[inline(always)]
pub(super) fn pair(lo: u32, hi: u32) -> u64 {
    lo as u64 | ((hi as u64) << 32)
}

pub(super) struct Iq2Xxs;

pub(super) struct Iq2Xs;

pub(super) struct Iq2S;

pub(super) struct Iq3Xxs;

pub(super) struct Iq3S;

/// Per 32 values, a u32 of four grid index bytes and a u32 of four 7-bit
/// sign indices and the scale.
impl Grid for Iq2Xxs {
    const BYTES: usize = block::iq2_xxs::BYTES;
    const D: usize = block::iq2_xxs::D;
    const SHAPE: Shape = Shape::of(Entries::Eight(&IQ2XXS_GRID), 4, true);
    #[inline(always)]
    fn group(b: &[u8], d: f32, ib: usize) -> Group {
        use block::iq2_xxs::*;
        let (idx, aux) = (u32_at(b, QS + 8 * ib), u32_at(b, QS + 8 * ib + 4));
        let db = iq2_scale(d, aux >> 28);
        Group {
            db: [db, db],
            entries: std::array::from_fn(|l| IQ2XXS_GRID[((idx >> (8 * l)) & 0xFF) as usize]),
            signs: std::array::from_fn(|l| KSIGNS[((aux >> (7 * l)) & 0x7F) as usize]),
        }
    }
}

/// The 4-bit scale of values 16h .. 16h + 16 of group ib (IQ2_XS, IQ2_S).
#[inline(always)]
pub(super) fn iq2_dbs(b: &[u8], scales: usize, d: f32, ib: usize) -> [f32; 2] {
    let s = b[scales + ib];
    [iq2_scale(d, (s & 0x0F) as u32), iq2_scale(d, (s >> 4) as u32)]
}

/// Per 8 values a u16: a 9-bit grid index and a 7-bit sign index.
impl Grid for Iq2Xs {
    const BYTES: usize = block::iq2_xs::BYTES;
    const D: usize = block::iq2_xs::D;
    const SHAPE: Shape = Shape::of(Entries::Eight(&IQ2XS_GRID), 4, true);
    #[inline(always)]
    fn group(b: &[u8], d: f32, ib: usize) -> Group {
        use block::iq2_xs::*;
        let q: [u16; 4] = std::array::from_fn(|l| u16_at(b, QS + 2 * (4 * ib + l)));
        Group {
            db: iq2_dbs(b, SCALES, d, ib),
            entries: q.map(|q| IQ2XS_GRID[(q & 511) as usize]),
            signs: q.map(|q| KSIGNS[(q >> 9) as usize]),
        }
    }
}

/// Per 8 values a grid index byte with 2 high bits from `qh`, and a sign byte.
impl Grid for Iq2S {
    const BYTES: usize = block::iq2_s::BYTES;
    const D: usize = block::iq2_s::D;
    const SHAPE: Shape = Shape::of(Entries::Eight(&IQ2S_GRID), 4, true);
    #[inline(always)]
    fn group(b: &[u8], d: f32, ib: usize) -> Group {
        use block::iq2_s::*;
        let qh = b[QH + ib] as usize;
        Group {
            db: iq2_dbs(b, SCALES, d, ib),
            entries: std::array::from_fn(|l| IQ2S_GRID[b[QS + 4 * ib + l] as usize | (((qh >> (2 * l)) & 3) << 8)]),
            signs: std::array::from_fn(|l| b[SIGNS + 4 * ib + l]),
        }
    }
}

/// Per 32 values, 8 grid index bytes (4 values each) and a u32 of four
/// 7-bit sign indices and the scale.
impl Grid for Iq3Xxs {
    const BYTES: usize = block::iq3_xxs::BYTES;
    const D: usize = block::iq3_xxs::D;
    const SHAPE: Shape = Shape::of(Entries::Four(&IQ3XXS_GRID), 3, false);
    #[inline(always)]
    fn group(b: &[u8], d: f32, ib: usize) -> Group {
        use block::iq3_xxs::*;
        let aux = u32_at(b, SCALES + 4 * ib);
        let db = d * (0.5 + (aux >> 28) as f32) * 0.5;
        let entry = |i: usize| IQ3XXS_GRID[b[QS + 8 * ib + i] as usize];
        Group {
            db: [db, db],
            entries: std::array::from_fn(|l| pair(entry(2 * l), entry(2 * l + 1))),
            signs: std::array::from_fn(|l| KSIGNS[((aux >> (7 * l)) & 0x7F) as usize]),
        }
    }
}

/// Per 4 values a grid index byte with a ninth bit from `qh`; sign bytes per
/// 8; a 4-bit scale per 32.
impl Grid for Iq3S {
    const BYTES: usize = block::iq3_s::BYTES;
    const D: usize = block::iq3_s::D;
    const SHAPE: Shape = Shape::of(Entries::Four(&IQ3S_GRID), 1, false);
    #[inline(always)]
    fn group(b: &[u8], d: f32, ib: usize) -> Group {
        use block::iq3_s::*;
        let s = (b[SCALES + ib / 2] >> (4 * (ib % 2))) & 0x0F;
        let db = d * (1 + 2 * s) as f32;
        // Index bytes 8ib .. 8ib + 8, their ninth bits the bits of qh[ib].
        let entry = |i: usize| IQ3S_GRID[b[QS + 8 * ib + i] as usize | ((((b[QH + ib] >> i) & 1) as usize) << 8)];
        Group {
            db: [db, db],
            entries: std::array::from_fn(|l| pair(entry(2 * l), entry(2 * l + 1))),
            signs: std::array::from_fn(|l| b[SIGNS + 4 * ib + l]),
        }
    }
}

/// 16 values of an IQ1 format: two grid entries (bytes: i8 values -1, 0,
/// 1), their scale, and each one's delta (±0.125).
pub(super) struct Iq1Half {
    dl: f32,
    delta: [f32; 2],
    entries: [u64; 2],
}

/// An IQ1 format as [`iq1`] runs it.
pub(super) trait Iq1 {
    const BYTES: usize;
    /// The block's f16 d.
    fn d(b: &[u8]) -> f32;
    /// Values 16k .. 16k + 16 of block `b`.
    fn half(b: &[u8], d: f32, k: usize) -> Iq1Half;
}

/// The IQ1 kernels: per 16 values, a table of the 6 outputs
/// dl * (g + delta) for g = -1, 0, 1 and either entry's delta (entries 0..3
/// and 4..7; the add, then the multiply, each rounded, as in the scalar
/// kernel), and each value looked up by g + 1.
#[target_feature(enable = "neon")]
pub(super) unsafe fn iq1<O: Out128, G: Iq1>(src: &[u8], dst: &mut [u16]) {
    const G3: [f32; 4] = [-1.0, 0.0, 1.0, 0.0];
    // SAFETY: 4 readable f32.
    let g3 = unsafe { vld1q_f32(G3.as_ptr()) };
    // The second entry's values look up entries 4..7.
    let second = vcombine_u8(vdup_n_u8(0), vdup_n_u8(4));
    for (b, o) in sized_blocks(src, dst, G::BYTES, 256) {
        let d = G::d(b);
        for k in 0..16 {
            let h = G::half(b, d, k);
            // SAFETY: outputs 16k .. 16k + 16 inside the block's 256.
            unsafe {
                let dl = vdupq_n_f32(h.dl);
                let x = |delta: f32| vmulq_f32(vaddq_f32(g3, vdupq_n_f32(delta)), dl);
                let t = table8::<O>(x(h.delta[0]), x(h.delta[1]));
                let e = vcombine_u8(vcreate_u8(h.entries[0]), vcreate_u8(h.entries[1]));
                let idx = vorrq_u8(vandq_u8(vaddq_u8(e, vdupq_n_u8(1)), vdupq_n_u8(3)), second);
                lookup16(idx, t, vdupq_n_u8(0), o.add(16 * k));
            }
        }
    }
}

pub(super) struct Iq1S;

pub(super) struct Iq1M;

/// Per 32 values a u16 of `qh`: four 3-bit high index parts, a 3-bit
/// scale (bits 12..15), the delta's sign (bit 15).
impl Iq1 for Iq1S {
    const BYTES: usize = block::iq1_s::BYTES;
    fn d(b: &[u8]) -> f32 {
        f16_at(b, block::iq1_s::D)
    }
    #[inline(always)]
    fn half(b: &[u8], d: f32, k: usize) -> Iq1Half {
        use block::iq1_s::*;
        let ib = k / 2;
        let qh = u16_at(b, QH + 2 * ib);
        let delta = iq1_delta(qh & 0x8000 != 0);
        let entry = |l: usize| IQ1S_GRID[b[QS + 4 * ib + l] as usize | ((((qh >> (3 * l)) & 7) as usize) << 8)];
        let l = 2 * (k % 2);
        Iq1Half { dl: d * (2 * ((qh >> 12) & 7) + 1) as f32, delta: [delta, delta], entries: [entry(l), entry(l + 1)] }
    }
}

/// Per 8 values a grid index byte with 3 high bits and the delta's sign
/// from a nibble of `qh`; a 3-bit scale per 16 values.
impl Iq1 for Iq1M {
    const BYTES: usize = block::iq1_m::BYTES;
    fn d(b: &[u8]) -> f32 {
        iq1_m_d(b)
    }
    #[inline(always)]
    fn half(b: &[u8], d: f32, k: usize) -> Iq1Half {
        use block::iq1_m::*;
        let s = (u16_at(b, SCALES + 2 * (k / 4)) >> (3 * (k % 4))) & 7;
        // Entries 2k and 2k + 1: a nibble of qh[k] each.
        let h = [b[QH + k] & 0x0F, b[QH + k] >> 4];
        let entry = |l: usize| IQ1S_GRID[b[QS + 2 * k + l] as usize | (((h[l] & 7) as usize) << 8)];
        Iq1Half { dl: d * (2 * s + 1) as f32, delta: h.map(|h| iq1_delta(h & 8 != 0)), entries: [entry(0), entry(1)] }
    }
}
