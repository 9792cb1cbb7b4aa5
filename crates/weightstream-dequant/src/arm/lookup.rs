//! NEON kernels of the lookup formats: IQ4_NL, IQ4_XS, MXFP4 and NVFP4 (a
//! nibble picks one of 16 i8 levels), the ternary TQ1_0 and TQ2_0, and the
//! IQ grid formats (IQ2_*, IQ3_*, IQ1_*). Each reproduces its scalar kernel
//! (scalar/lut4.rs, ternary.rs, grid.rs) bit for bit.
//!
//! Why tables: a value of these formats can only be one of a few outputs
//! per scale (16 for the 4-bit codebooks, 3 or 4 ternary, 3 or 8 grid
//! magnitudes, 6 for IQ1), so they are computed once per (sub-)block scale
//! with the scalar kernel's f32 operations (exact integer -> f32, one
//! `vmulq_f32`, for IQ1 the `vaddq_f32` of the delta first, the shared BF16
//! rounding `round4`), and each value's output is then looked up: its low
//! and its high byte with a `vqtbl1q_u8` each, interleaved into u16s by
//! `vzip`. The codebook and ternary tables hold every level with its own
//! sign: a product is the scalar one exactly, whatever the scale. The IQ2
//! and IQ3 tables hold magnitudes, and a negative value's BF16 is the
//! positive one's with the sign bit flipped (why that is exact: [`grid`]).
//!
//! Every kernel is `unsafe` with `#[target_feature(enable = "neon")]`, as
//! in neon.rs (NEON is the aarch64 baseline). Lengths: `src` whole blocks,
//! `dst` their elements (checked by `Kernel::check`).

use std::arch::aarch64::*;

use super::neon::{load16, round4, KernelFn};
use crate::scalar::{e8m0_half, f16_at, iq1_delta, iq1_m_d, iq2_scale, iq4_xs_scale, u16_at, u32_at, ue4m3_half};
use weightstream_blocks::block_tables::{
    E2M1_DOUBLED, IQ1S_GRID, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID, IQ4NL_VALUES, KSIGNS,
};
use weightstream_blocks::{block, BlockFormat};

/// The blocks of `src` with their outputs: (block bytes, output pointer).
#[inline(always)]
fn blocks<'a>(src: &'a [u8], dst: &'a mut [u16], bytes: usize, elems: usize) -> impl Iterator<Item = (&'a [u8], *mut u16)> + 'a {
    src.chunks_exact(bytes).zip(dst.chunks_exact_mut(elems)).map(|(b, o)| (b, o.as_mut_ptr()))
}

/// A lookup table of up to 16 BF16 outputs for `vqtbl1q_u8`: entry i's low
/// byte is byte i of `lo`, its high byte byte i of `hi`.
#[derive(Clone, Copy)]
struct Table {
    lo: uint8x16_t,
    hi: uint8x16_t,
}

/// The table of 16 BF16 values, entries 0..8 in `a` and 8..16 in `b` (for
/// 8 entries, `a == b`: entry i is also entry 8 + i).
#[inline(always)]
unsafe fn table(a: uint16x8_t, b: uint16x8_t) -> Table {
    // SAFETY: NEON is always present on aarch64; no memory is touched.
    unsafe {
        let (a, b) = (vreinterpretq_u8_u16(a), vreinterpretq_u8_u16(b));
        // Little-endian u16s: the even bytes are the low ones.
        Table { lo: vuzp1q_u8(a, b), hi: vuzp2q_u8(a, b) }
    }
}

/// The table of 8 f32 values rounded to BF16 (`a` entries 0..4, `b` 4..8).
#[inline(always)]
unsafe fn table8(a: float32x4_t, b: float32x4_t) -> Table {
    // SAFETY: NEON is always present on aarch64; no memory is touched.
    unsafe {
        let t = vcombine_u16(round4(a), round4(b));
        table(t, t)
    }
}

/// 16 outputs to `out`: entry `idx[j]` (0..16) of `t`, its high byte XORed
/// with `flip[j]` (a sign bit, or 0).
#[inline(always)]
unsafe fn lookup16(idx: uint8x16_t, t: Table, flip: uint8x16_t, out: *mut u16) {
    // SAFETY: the caller guarantees 16 writable u16 at out; NEON is always
    // present on aarch64.
    unsafe {
        let lo = vqtbl1q_u8(t.lo, idx);
        let hi = veorq_u8(vqtbl1q_u8(t.hi, idx), flip);
        let o = out as *mut u8;
        vst1q_u8(o, vzip1q_u8(lo, hi));
        vst1q_u8(o.add(16), vzip2q_u8(lo, hi));
    }
}

/// The 16 levels of a 4-bit codebook as f32 (exact i8 conversions), in
/// groups of 4.
#[derive(Clone, Copy)]
struct Levels([float32x4_t; 4]);

impl Levels {
    #[inline(always)]
    unsafe fn new(t: &[i8; 16]) -> Levels {
        // SAFETY: 16 readable bytes at t; NEON is always present on aarch64.
        unsafe {
            let q = vld1q_s8(t.as_ptr());
            let (lo, hi) = (vmovl_s8(vget_low_s8(q)), vmovl_high_s8(q));
            let f = |w: int32x4_t| vcvtq_f32_s32(w);
            Levels([f(vmovl_s16(vget_low_s16(lo))), f(vmovl_high_s16(lo)), f(vmovl_s16(vget_low_s16(hi))), f(vmovl_high_s16(hi))])
        }
    }

    /// Every output a value scaled by `d` can have: BF16(d * level) for
    /// the 16 levels, the scalar kernel's multiply and rounding once per
    /// level instead of once per value.
    #[inline(always)]
    unsafe fn times(self, d: f32) -> Table {
        // SAFETY: NEON is always present on aarch64; no memory is touched.
        unsafe {
            let dv = vdupq_n_f32(d);
            let r = |k: usize| round4(vmulq_f32(self.0[k], dv));
            table(vcombine_u16(r(0), r(1)), vcombine_u16(r(2), r(3)))
        }
    }
}

/// The 32 values of 16 bytes of nibbles at `qs` (the low nibbles, then the
/// high ones), the levels scaled by `d`, to `out`.
#[inline(always)]
unsafe fn lut32(qs: *const u8, levels: Levels, d: f32, out: *mut u16) {
    // SAFETY: the caller guarantees 16 readable bytes at qs and 32 writable
    // u16 at out.
    unsafe {
        let v = load16(qs);
        let t = levels.times(d);
        let zero = vdupq_n_u8(0);
        lookup16(vandq_u8(v, vdupq_n_u8(0x0F)), t, zero, out);
        lookup16(vshrq_n_u8::<4>(v), t, zero, out.add(16));
    }
}

#[target_feature(enable = "neon")]
unsafe fn iq4_nl(src: &[u8], dst: &mut [u16]) {
    use block::iq4_nl::*;
    // SAFETY: the table is 16 bytes.
    let levels = unsafe { Levels::new(&IQ4NL_VALUES) };
    for (b, o) in blocks(src, dst, BYTES, ELEMS) {
        // SAFETY: the 16 qs bytes lie inside the block; 32 outputs at o.
        unsafe { lut32(b.as_ptr().add(QS), levels, f16_at(b, D), o) };
    }
}

#[target_feature(enable = "neon")]
unsafe fn iq4_xs(src: &[u8], dst: &mut [u16]) {
    use block::iq4_xs::*;
    // SAFETY: the table is 16 bytes.
    let levels = unsafe { Levels::new(&IQ4NL_VALUES) };
    for (b, o) in blocks(src, dst, BYTES, ELEMS) {
        let d = f16_at(b, D);
        for k in 0..8 {
            // The scalar kernel's sub-block scale, (d * (sc - 32)).
            let dl = d * iq4_xs_scale(b, k) as f32;
            // SAFETY: qs[16k .. 16k + 16] inside the block; outputs 32k .. 32k + 32 of its 256.
            unsafe { lut32(b.as_ptr().add(QS + 16 * k), levels, dl, o.add(32 * k)) };
        }
    }
}

#[target_feature(enable = "neon")]
unsafe fn mxfp4(src: &[u8], dst: &mut [u16]) {
    use block::mxfp4::*;
    // SAFETY: the table is 16 bytes.
    let levels = unsafe { Levels::new(&E2M1_DOUBLED) };
    for (b, o) in blocks(src, dst, BYTES, ELEMS) {
        // SAFETY: the 16 qs bytes lie inside the block; 32 outputs at o.
        unsafe { lut32(b.as_ptr().add(QS), levels, e8m0_half(b[E]), o) };
    }
}

/// NVFP4: four 16-value sub-blocks, each with its own UE4M3 scale and 8
/// bytes of nibbles (low, then high): a table per sub-block.
#[target_feature(enable = "neon")]
unsafe fn nvfp4(src: &[u8], dst: &mut [u16]) {
    use block::nvfp4::*;
    // SAFETY: the table is 16 bytes.
    let levels = unsafe { Levels::new(&E2M1_DOUBLED) };
    for (b, o) in blocks(src, dst, BYTES, ELEMS) {
        let t = |k: usize| {
            // SAFETY: NEON is always present on aarch64.
            unsafe { levels.times(ue4m3_half(b[D + k])) }
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

/// A ternary table: entry q is BF16(d * (q - 1)) for q = 0, 1, 2 and, for
/// TQ2_0's crumbs, 3 (the scalar kernel's one multiply each).
#[inline(always)]
unsafe fn ternary_table(d: f32) -> Table {
    const VALUES: [f32; 4] = [-1.0, 0.0, 1.0, 2.0];
    // SAFETY: 4 readable f32 in VALUES; NEON is always present on aarch64.
    unsafe {
        let x = vmulq_f32(vld1q_f32(VALUES.as_ptr()), vdupq_n_f32(d));
        table8(x, x)
    }
}

#[target_feature(enable = "neon")]
unsafe fn tq2_0(src: &[u8], dst: &mut [u16]) {
    use block::tq2_0::*;
    let (three, zero) = (vdupq_n_u8(3), vdupq_n_u8(0));
    for (b, o) in blocks(src, dst, BYTES, ELEMS) {
        // SAFETY: NEON is always present on aarch64.
        let t = unsafe { ternary_table(f16_at(b, D)) };
        // Element 128h + 32s + j is crumb s of qs[32h + j] (Q2_K's layout).
        for h in 0..2 {
            for half in 0..2 {
                // SAFETY: qs[32h + 16half ..][..16] inside the block's 64;
                // outputs 128h + 32s + 16half .. + 16 inside its 256.
                unsafe {
                    let v = load16(b.as_ptr().add(QS + 32 * h + 16 * half));
                    for s in 0..4 {
                        let q = vandq_u8(vshlq_u8(v, vdupq_n_s8(-2 * s as i8)), three);
                        lookup16(q, t, zero, o.add(128 * h + 32 * s + 16 * half));
                    }
                }
            }
        }
    }
}

/// Base-3 digits (0, 1, 2) of 16 bytes: digit k of byte b is
/// ((b * 3^k mod 256) * 3) >> 8 (scalar/ternary.rs), with `pow3` holding
/// each byte's 3^k: a wrapping u8 multiply, then the high bytes of the
/// widening multiply by 3.
#[inline(always)]
unsafe fn trits16(bytes: uint8x16_t, pow3: uint8x16_t) -> uint8x16_t {
    // SAFETY: NEON is always present on aarch64; no memory is touched.
    unsafe {
        let q = vmulq_u8(bytes, pow3);
        let lo = vmull_u8(vget_low_u8(q), vdup_n_u8(3));
        let hi = vmull_high_u8(q, vdupq_n_u8(3));
        vuzp2q_u8(vreinterpretq_u8_u16(lo), vreinterpretq_u8_u16(hi))
    }
}

#[target_feature(enable = "neon")]
unsafe fn tq1_0(src: &[u8], dst: &mut [u16]) {
    use block::tq1_0::*;
    const POW3: [u8; 5] = [1, 3, 9, 27, 81];
    // Elements 240..256: digit e/4 of qh[e % 4], so bytes qh[0..4] four
    // times with the powers 1, 3, 9, 27 in steps of four.
    const TAIL_POW: [u8; 16] = [1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27];
    // SAFETY: 16 readable bytes.
    let tail_pow = unsafe { load16(TAIL_POW.as_ptr()) };
    let zero = vdupq_n_u8(0);
    for (b, o) in blocks(src, dst, BYTES, ELEMS) {
        // SAFETY: qs[0..48] and qh[0..4] lie inside the block; outputs
        // 0..256 inside its elements.
        unsafe {
            let t = ternary_table(f16_at(b, D));
            let p = b.as_ptr();
            let (q0, q1, q2) = (load16(p.add(QS)), load16(p.add(QS + 16)), load16(p.add(QS + 32)));
            // Elements 0..160: digit k of qs[j] (j < 32) is 32k + j; 160..240:
            // digit k of qs[32 + j] (j < 16) is 160 + 16k + j.
            for (k, &pw) in POW3.iter().enumerate() {
                let pow = vdupq_n_u8(pw);
                lookup16(trits16(q0, pow), t, zero, o.add(32 * k));
                lookup16(trits16(q1, pow), t, zero, o.add(32 * k + 16));
                lookup16(trits16(q2, pow), t, zero, o.add(160 + 16 * k));
            }
            let qh = vreinterpretq_u8_u32(vdupq_n_u32(u32::from_le_bytes([b[QH], b[QH + 1], b[QH + 2], b[QH + 3]])));
            lookup16(trits16(qh, tail_pow), t, zero, o.add(240));
        }
    }
}

/// The values of a grid table's entries: 8 bytes each (IQ2) or 4 (IQ3,
/// whose kernels pair two entries into 8 values).
#[derive(Clone, Copy)]
enum Entries {
    Eight(&'static [u64]),
    Four(&'static [u32]),
}

/// How a grid's bytes index the table of its magnitudes.
#[derive(Clone, Copy)]
struct Shape {
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
struct Group {
    db: [f32; 2],
    entries: [u64; 4],
    signs: [u8; 4],
}

/// A grid format as [`grid`] runs it.
trait Grid {
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
unsafe fn entries16(e: [u64; 2], s: [u8; 2]) -> (uint8x16_t, uint8x16_t) {
    // SAFETY: NEON is always present on aarch64; no memory is touched.
    unsafe {
        let g = vcombine_u8(vcreate_u8(e[0]), vcreate_u8(e[1]));
        let s = vcombine_u8(vdup_n_u8(s[0]), vdup_n_u8(s[1]));
        (g, vtstq_u8(s, vreinterpretq_u8_u64(vdupq_n_u64(0x8040_2010_0804_0201))))
    }
}

/// 8 magnitudes as f32 (exact): entries 0..4, 4..8.
#[inline(always)]
unsafe fn mags_f32(m: &[u8; 8]) -> (float32x4_t, float32x4_t) {
    // SAFETY: 8 readable bytes at m; NEON is always present on aarch64.
    unsafe {
        let w = vmovl_u8(vld1_u8(m.as_ptr()));
        (vcvtq_f32_u32(vmovl_u16(vget_low_u16(w))), vcvtq_f32_u32(vmovl_high_u16(w)))
    }
}

/// The IQ2/IQ3 kernels: per 32 values, a table of BF16(db * m) for the 8
/// magnitudes m (`vmulq_f32`, as the scalar `db * level`), and each value's
/// output looked up by its grid byte. The scalar kernel computes
/// `(db * g) * (±1)`: `db * g` is NaN only where db is (g > 0), and
/// otherwise `* -1` negates it exactly and round to nearest even is
/// symmetric, so a negative value's BF16 is the positive one's with the
/// sign bit flipped (zeros and infinities included). A NaN db gives the
/// canonical NaN either way, so its flip is 0.
#[target_feature(enable = "neon")]
unsafe fn grid<G: Grid>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: the magnitudes are 8 bytes.
    let (m0, m1) = unsafe { mags_f32(&G::SHAPE.mags) };
    let shift = vdupq_n_s8(-G::SHAPE.shift);
    for (b, o) in blocks(src, dst, G::BYTES, 256) {
        let d = f16_at(b, G::D);
        for ib in 0..8 {
            let g = G::group(b, d, ib);
            // SAFETY: outputs 32ib .. 32ib + 32 inside the block's 256.
            unsafe {
                let t = table8(vmulq_f32(m0, vdupq_n_f32(g.db[0])), vmulq_f32(m1, vdupq_n_f32(g.db[1])));
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
fn pair(lo: u32, hi: u32) -> u64 {
    lo as u64 | ((hi as u64) << 32)
}

struct Iq2Xxs;
struct Iq2Xs;
struct Iq2S;
struct Iq3Xxs;
struct Iq3S;

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
fn iq2_dbs(b: &[u8], scales: usize, d: f32, ib: usize) -> [f32; 2] {
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
struct Iq1Half {
    dl: f32,
    delta: [f32; 2],
    entries: [u64; 2],
}

/// An IQ1 format as [`iq1`] runs it.
trait Iq1 {
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
unsafe fn iq1<G: Iq1>(src: &[u8], dst: &mut [u16]) {
    const G3: [f32; 4] = [-1.0, 0.0, 1.0, 0.0];
    // SAFETY: 4 readable f32.
    let g3 = unsafe { vld1q_f32(G3.as_ptr()) };
    // The second entry's values look up entries 4..7.
    let second = vcombine_u8(vdup_n_u8(0), vdup_n_u8(4));
    for (b, o) in blocks(src, dst, G::BYTES, 256) {
        let d = G::d(b);
        for k in 0..16 {
            let h = G::half(b, d, k);
            // SAFETY: outputs 16k .. 16k + 16 inside the block's 256.
            unsafe {
                let dl = vdupq_n_f32(h.dl);
                let x = |delta: f32| vmulq_f32(vaddq_f32(g3, vdupq_n_f32(delta)), dl);
                let t = table8(x(h.delta[0]), x(h.delta[1]));
                let e = vcombine_u8(vcreate_u8(h.entries[0]), vcreate_u8(h.entries[1]));
                let idx = vorrq_u8(vandq_u8(vaddq_u8(e, vdupq_n_u8(1)), vdupq_n_u8(3)), second);
                lookup16(idx, t, vdupq_n_u8(0), o.add(16 * k));
            }
        }
    }
}

struct Iq1S;
struct Iq1M;

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

/// The NEON kernel of a lookup format, if it has one here.
pub fn block_kernel(f: BlockFormat) -> Option<KernelFn> {
    Some(match f {
        BlockFormat::IQ4_NL => iq4_nl,
        BlockFormat::IQ4_XS => iq4_xs,
        BlockFormat::MXFP4 => mxfp4,
        BlockFormat::NVFP4 => nvfp4,
        BlockFormat::TQ1_0 => tq1_0,
        BlockFormat::TQ2_0 => tq2_0,
        BlockFormat::IQ2_XXS => grid::<Iq2Xxs>,
        BlockFormat::IQ2_XS => grid::<Iq2Xs>,
        BlockFormat::IQ2_S => grid::<Iq2S>,
        BlockFormat::IQ3_XXS => grid::<Iq3Xxs>,
        BlockFormat::IQ3_S => grid::<Iq3S>,
        BlockFormat::IQ1_S => iq1::<Iq1S>,
        BlockFormat::IQ1_M => iq1::<Iq1M>,
        _ => return None,
    })
}
