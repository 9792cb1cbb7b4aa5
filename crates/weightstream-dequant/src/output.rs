//! The output dtype as a type parameter of the kernels: every kernel
//! computes the format's reference value in f32, as before, and its
//! `Output` rounds that once, to nearest even, to BF16 or to IEEE
//! float16 (docs/numerics.md). One kernel body per format, instantiated
//! for each output: the rounding is the only thing that differs.

use weightstream_blocks::OutDtype;

use crate::numerics::{bf16_to_f32, f16_to_f32, f32_to_bf16};

/// The one float16 NaN every path emits (BF16's is `numerics::CANONICAL_NAN`).
pub const CANONICAL_NAN_F16: u16 = 0x7E00;

/// f32 -> IEEE binary16, round to nearest even: past 65504 (from 65520,
/// the tie, up) to infinity, below 2^-14 to multiples of 2^-24 (f16
/// subnormals), at most 2^-25 to a signed zero; every NaN becomes
/// `CANONICAL_NAN_F16`. What numpy's `astype(float16)` gives for every
/// non-NaN f32, and `vcvtps2ph`, `fcvtn` and `cvt.rn.f16.f32` too.
#[inline(always)]
pub fn f32_to_f16(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let a = b & 0x7FFF_FFFF;
    if a > 0x7F80_0000 {
        return CANONICAL_NAN_F16;
    }
    if a >= 0x477F_F000 {
        return sign | 0x7C00; // >= 65520 (infinity included)
    }
    if a >= 0x3880_0000 {
        // A normal f16: rebias the exponent (127 -> 15), then round the
        // 13 mantissa bits dropped to nearest even; a carry into the
        // exponent is the right next binade (never past 0x7BFF here).
        let t = a - 0x3800_0000;
        return sign | ((t + 0x0FFF + ((t >> 13) & 1)) >> 13) as u16;
    }
    if a <= 0x3300_0000 {
        return sign; // <= 2^-25, half the smallest subnormal: ties to even 0
    }
    // An f16 subnormal: x / 2^-24 = m * 2^(e - 126), e <= 112, rounded to
    // nearest even (rounding up to 0x400 is the smallest normal).
    let e = a >> 23;
    let m = (a & 0x7F_FFFF) | 0x80_0000;
    let s = 126 - e;
    let (r, rem, half) = (m >> s, m & ((1 << s) - 1), 1u32 << (s - 1));
    sign | (r + (rem > half || (rem == half && r & 1 == 1)) as u32) as u16
}

/// What a kernel writes: `from_f32` rounds a reference value once;
/// float sources go through `from_f16_bits` / `from_bf16_bits` (a copy
/// where the source is the output's own type).
pub trait Output: Copy + Send + Sync + 'static {
    const DTYPE: OutDtype;
    /// The one NaN this output's paths emit.
    const NAN: u16;
    /// +infinity's bits: a magnitude above it is a NaN (the vector
    /// kernels' NaN test after a hardware conversion).
    const INF: u16;
    fn from_f32(x: f32) -> u16;
    fn from_f16_bits(h: u16) -> u16;
    fn from_bf16_bits(b: u16) -> u16;
}

#[derive(Debug, Clone, Copy)]
pub struct Bf16Out;

#[derive(Debug, Clone, Copy)]
pub struct F16Out;

impl Output for Bf16Out {
    const DTYPE: OutDtype = OutDtype::BF16;
    const NAN: u16 = crate::numerics::CANONICAL_NAN;
    const INF: u16 = 0x7F80;
    #[inline(always)]
    fn from_f32(x: f32) -> u16 {
        f32_to_bf16(x)
    }
    #[inline(always)]
    fn from_f16_bits(h: u16) -> u16 {
        f32_to_bf16(f16_to_f32(h))
    }
    /// Copied bit for bit (NaN payloads included), as always.
    #[inline(always)]
    fn from_bf16_bits(b: u16) -> u16 {
        b
    }
}

impl Output for F16Out {
    const DTYPE: OutDtype = OutDtype::F16;
    const NAN: u16 = CANONICAL_NAN_F16;
    const INF: u16 = 0x7C00;
    #[inline(always)]
    fn from_f32(x: f32) -> u16 {
        f32_to_f16(x)
    }
    /// Copied bit for bit (NaN payloads included): an F16 tensor comes
    /// back exactly as stored.
    #[inline(always)]
    fn from_f16_bits(h: u16) -> u16 {
        h
    }
    #[inline(always)]
    fn from_bf16_bits(b: u16) -> u16 {
        f32_to_f16(bf16_to_f32(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::numerics::round_f16;

    /// The exact f16 bits of a value f16 holds (round_f16's results).
    fn encode(v: f32) -> u16 {
        let sign = if v.is_sign_negative() { 0x8000 } else { 0 };
        let a = v.abs();
        if a.is_infinite() {
            return sign | 0x7C00;
        }
        (0u16..0x7C00).find(|&h| f16_to_f32(h) == a).map(|h| h | sign).expect("an f16 value")
    }

    /// f32_to_f16 against round_f16 (itself checked against a search over
    /// every f16 value, numerics.rs) and an exact encoding, on every
    /// f16 value, every midpoint and its neighbours, and a stride through
    /// all f32 bit patterns.
    #[test]
    fn f32_to_f16_is_round_f16_encoded() {
        let table: std::collections::HashMap<u32, u16> = (0u16..0x7C00).map(|h| (f16_to_f32(h).to_bits(), h)).collect();
        let fast_encode = |v: f32| -> u16 {
            let sign = if v.is_sign_negative() { 0x8000 } else { 0 };
            if v.is_infinite() {
                sign | 0x7C00
            } else {
                sign | *table.get(&v.abs().to_bits()).unwrap_or_else(|| panic!("{v:e} is no f16 value"))
            }
        };
        let mut xs: Vec<f32> = Vec::new();
        for h in 0u16..0x7C00 {
            let v = f16_to_f32(h);
            let next = f16_to_f32(h + 1);
            let mid = ((v as f64 + next as f64) / 2.0) as f32;
            xs.extend([v, mid, f32::from_bits(mid.to_bits().wrapping_sub(1)), f32::from_bits(mid.to_bits() + 1)]);
        }
        let mut bits = 0u32;
        while bits < 0x7F80_0000 {
            xs.push(f32::from_bits(bits));
            bits += 4099;
        }
        xs.extend([65504.0, 65519.996, 65520.0, 70000.0, f32::MAX, f32::INFINITY, 0.0, 2.9802322e-8, 2.9802326e-8, 5.9604645e-8]);
        for x in xs.into_iter().filter(|x| !x.is_nan()) {
            for v in [x, -x] {
                assert_eq!(f32_to_f16(v), fast_encode(round_f16(v)), "{v:e} ({:#010x})", v.to_bits());
            }
        }
        assert_eq!(encode(-2.0), 0xC000);
        for nan in [f32::NAN, -f32::NAN, f32::from_bits(0x7F80_0001), f32::from_bits(0xFFFF_FFFF)] {
            assert_eq!(f32_to_f16(nan), CANONICAL_NAN_F16);
        }
    }

    #[test]
    fn float_sources() {
        assert_eq!(F16Out::from_f16_bits(0x7C01), 0x7C01, "F16 sources copied, NaN payload included");
        assert_eq!(F16Out::from_bf16_bits(0x3F80), 0x3C00);
        assert_eq!(F16Out::from_bf16_bits(0x7F7F), 0x7C00, "BF16 beyond f16's range is infinity");
        assert_eq!(Bf16Out::from_bf16_bits(0x7FC1), 0x7FC1);
        assert_eq!(Bf16Out::from_f16_bits(0x3C00), 0x3F80);
    }
}
