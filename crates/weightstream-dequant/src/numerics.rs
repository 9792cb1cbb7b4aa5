//! The numerics contract (docs/numerics.md), element by element.
//!
//! These scalar functions *are* the definition every other path (AVX2, the
//! CUDA kernels, the host-compiled kernel grid) must reproduce bit for bit:
//! - every input converts to f32 exactly;
//! - Q4_0/Q8_0 and FP8 take one f32 multiply (round to nearest even);
//! - f32 -> BF16 rounds to nearest even; every NaN becomes 0x7FC0.

/// The one BF16 NaN every path emits.
pub const CANONICAL_NAN: u16 = 0x7FC0;

/// f32 -> BF16, round to nearest even, NaN canonical.
#[inline(always)]
pub fn f32_to_bf16(x: f32) -> u16 {
    let b = x.to_bits();
    if b & 0x7FFF_FFFF > 0x7F80_0000 {
        return CANONICAL_NAN;
    }
    // No overflow: the largest non-NaN pattern is 0xFF80_0000.
    ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) as u16
}

/// IEEE binary16 -> f32, exact (subnormals, infinities and NaNs included).
#[inline(always)]
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h as u32) & 0x8000) << 16;
    let exp = ((h >> 10) & 0x1F) as u32;
    let man = (h & 0x3FF) as u32;
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, m) => {
            // Subnormal: m * 2^-24, a normal f32, exact.
            let v = m as f32 * (1.0 / 16_777_216.0);
            return if sign != 0 { -v } else { v };
        }
        (0x1F, 0) => sign | 0x7F80_0000,
        (0x1F, m) => sign | 0x7FC0_0000 | (m << 13),
        (e, m) => sign | ((e + 112) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

#[inline(always)]
pub fn bf16_to_f32(b: u16) -> f32 {
    f32::from_bits((b as u32) << 16)
}

/// OCP E4M3FN (bias 7, no infinities, S.1111.111 is NaN) -> f32, exact.
///
/// Shifting the 7 magnitude bits into f32 position gives the value times
/// 2^-120 for normals and subnormals alike (an f32 subnormal for the
/// latter); the power-of-two multiply restores it exactly. The CUDA and
/// AVX2 paths use the same construction.
#[inline(always)]
pub fn e4m3_to_f32(v: u8) -> f32 {
    let mag = (v & 0x7F) as u32;
    let sign = ((v & 0x80) as u32) << 24;
    if mag == 0x7F {
        return f32::NAN;
    }
    f32::from_bits(sign | (mag << 20)) * E4M3_REBIAS
}

pub const E4M3_REBIAS: f32 = 1.329_228e36; // 2^120

/// E5M2 (bias 15, IEEE-like with infinities and NaNs) -> f32, exact.
#[inline(always)]
pub fn e5m2_to_f32(v: u8) -> f32 {
    let mag = (v & 0x7F) as u32;
    let sign = ((v & 0x80) as u32) << 24;
    if mag >= 0x7C {
        // Exponent all ones: infinity (mantissa 0) or NaN.
        return f32::from_bits(sign | 0x7F80_0000 | ((mag & 3) << 21));
    }
    f32::from_bits(sign | (mag << 21)) * E5M2_REBIAS
}

pub const E5M2_REBIAS: f32 = 5.192_297e33; // 2^112

/// All 256 codes decoded, for table lookups: the scalar kernels use these
/// rather than the constructions above, whose f32 subnormal intermediates
/// cost a microcode assist per subnormal code on common x86 cores.
pub struct Fp8Table(pub [f32; 256]);

impl Fp8Table {
    fn build(decode: fn(u8) -> f32) -> Fp8Table {
        let mut t = [0f32; 256];
        for (v, slot) in t.iter_mut().enumerate() {
            *slot = decode(v as u8);
        }
        Fp8Table(t)
    }

    pub fn e4m3() -> &'static Fp8Table {
        static T: std::sync::OnceLock<Fp8Table> = std::sync::OnceLock::new();
        T.get_or_init(|| Fp8Table::build(e4m3_to_f32))
    }

    pub fn e5m2() -> &'static Fp8Table {
        static T: std::sync::OnceLock<Fp8Table> = std::sync::OnceLock::new();
        T.get_or_init(|| Fp8Table::build(e5m2_to_f32))
    }
}

/// E8M0 scale (OCP MX): 2^(e - 127); 0xFF is NaN.
#[inline(always)]
pub fn e8m0_to_f32(v: u8) -> f32 {
    match v {
        0xFF => f32::NAN,
        // 2^-127 is an f32 subnormal: 0x0040_0000.
        0 => f32::from_bits(0x0040_0000),
        e => f32::from_bits((e as u32) << 23),
    }
}

/// A U8 biased exponent of the MXFP4 safetensors schemes: 2^(e - 127), 0
/// the subnormal 2^-127. 0xFF (NaN in OCP MX) is refused before any kernel
/// runs (the loader checks); here it is +inf, compressed-tensors' reading
/// (transformers' ldexp gives finite values for |x| < 1 instead).
pub fn exp2_u8_to_f32(v: u8) -> f32 {
    match v {
        0xFF => f32::INFINITY,
        e => e8m0_to_f32(e),
    }
}

/// `x` rounded to IEEE binary16 precision (round to nearest even, past
/// 65504 to infinity, f16 subnormals as multiples of 2^-24), as f32: what
/// torch's f16 arithmetic keeps of a product. Two exact-or-rounded f32
/// additions by a power of two whose ulp is f16's quantum there; the CUDA
/// kernels do the same (common.cuh `round_f16`).
pub fn round_f16(x: f32) -> f32 {
    let a = x.abs();
    let r = if a.is_nan() {
        return x;
    } else if a >= 65520.0 {
        // 65520 is halfway from 65504 (odd mantissa) to 65536: ties go up.
        f32::INFINITY
    } else if a < 6.103_515_6e-5 {
        // Below 2^-14: multiples of 2^-24, the ulp of 0.5.
        (a + 0.5) - 0.5
    } else {
        // 2^(e + 13), whose ulp is 2^(e - 10), f16's quantum in a's binade.
        let c = f32::from_bits((a.to_bits() & 0x7F80_0000) + (13 << 23));
        (a + c) - c
    };
    r.copysign(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// round_f16 against a search over every finite f16 value (nearest,
    /// ties to the even code), on every f16 value, every midpoint and its
    /// neighbours, and random f32 values.
    #[test]
    fn round_f16_is_nearest_even_f16() {
        let pos: Vec<f32> = (0u16..0x7C00).map(f16_to_f32).collect(); // sorted, 0 .. 65504
        let reference = |x: f32| -> f32 {
            let a = x.abs();
            if a.is_nan() {
                return x;
            }
            let k = pos.partition_point(|&v| v <= a); // pos[k - 1] <= a < pos[k]
            let r = if k == pos.len() {
                if a >= 65520.0 {
                    f32::INFINITY
                } else {
                    65504.0
                }
            } else {
                let (lo, hi) = (pos[k - 1], pos[k]);
                let (dl, dh) = (a as f64 - lo as f64, hi as f64 - a as f64);
                if dl < dh || (dl == dh && (k - 1) % 2 == 0) {
                    lo
                } else {
                    hi
                }
            };
            r.copysign(x)
        };
        let mut xs: Vec<f32> = Vec::new();
        for w in pos.windows(2) {
            let mid = ((w[0] as f64 + w[1] as f64) / 2.0) as f32;
            xs.extend([w[0], mid, f32::from_bits(mid.to_bits() - 1), f32::from_bits(mid.to_bits() + 1)]);
        }
        xs.extend([65504.0, 65519.996, 65520.0, 70000.0, f32::MAX, f32::INFINITY, 1e-30, 2.9802322e-8, 2.9802326e-8]);
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..200_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            xs.push(f32::from_bits(state as u32 & 0x7FFF_FFFF) % 70000.0);
        }
        for x in xs {
            for v in [x, -x] {
                assert_eq!(round_f16(v).to_bits(), reference(v).to_bits(), "{v:e}");
            }
        }
        assert!(round_f16(f32::NAN).is_nan());
    }

    #[test]
    fn rebias_constants_are_powers_of_two() {
        assert_eq!(E4M3_REBIAS, 2f32.powi(120));
        assert_eq!(E5M2_REBIAS, 2f32.powi(112));
    }

    #[test]
    fn bf16_rounding() {
        assert_eq!(f32_to_bf16(1.0), 0x3F80);
        // Halfway cases go to even.
        assert_eq!(f32_to_bf16(f32::from_bits(0x3F80_8000)), 0x3F80);
        assert_eq!(f32_to_bf16(f32::from_bits(0x3F81_8000)), 0x3F82);
        assert_eq!(f32_to_bf16(f32::from_bits(0x3F80_8001)), 0x3F81);
        assert_eq!(f32_to_bf16(f32::MAX), 0x7F80); // rounds up to infinity
        assert_eq!(f32_to_bf16(f32::INFINITY), 0x7F80);
        assert_eq!(f32_to_bf16(f32::NEG_INFINITY), 0xFF80);
        assert_eq!(f32_to_bf16(-0.0), 0x8000);
        assert_eq!(f32_to_bf16(f32::from_bits(0xFFFF_FFFF)), CANONICAL_NAN);
        assert_eq!(f32_to_bf16(f32::from_bits(0x7F80_0001)), CANONICAL_NAN);
    }

    #[test]
    fn f16_every_value() {
        for h in 0..=u16::MAX {
            let ours = f16_to_f32(h);
            // Reference: the decimal definition.
            let s = if h & 0x8000 != 0 { -1.0f64 } else { 1.0 };
            let e = ((h >> 10) & 0x1F) as i32;
            let m = (h & 0x3FF) as f64;
            let want = match e {
                0 => s * m * 2f64.powi(-24),
                31 if m == 0.0 => s * f64::INFINITY,
                31 => f64::NAN,
                _ => s * (1.0 + m / 1024.0) * 2f64.powi(e - 15),
            };
            if want.is_nan() {
                assert!(ours.is_nan(), "{h:#x}");
            } else {
                assert_eq!(ours as f64, want, "{h:#x}");
                assert_eq!(ours.is_sign_negative(), s < 0.0, "{h:#x}");
            }
        }
    }

    #[test]
    fn fp8_every_value() {
        for v in 0..=255u8 {
            let s = if v & 0x80 != 0 { -1.0f64 } else { 1.0 };
            let (e, m) = (((v >> 3) & 0xF) as i32, (v & 7) as f64);
            let want = if v & 0x7F == 0x7F {
                f64::NAN
            } else if e == 0 {
                s * m / 8.0 * 2f64.powi(-6)
            } else {
                s * (1.0 + m / 8.0) * 2f64.powi(e - 7)
            };
            let ours = e4m3_to_f32(v);
            assert!(if want.is_nan() { ours.is_nan() } else { ours as f64 == want && ours.is_sign_negative() == (s < 0.0) }, "e4m3 {v:#x}");

            let (e, m) = (((v >> 2) & 0x1F) as i32, (v & 3) as f64);
            let want = match e {
                0 => s * m / 4.0 * 2f64.powi(-14),
                31 if m == 0.0 => s * f64::INFINITY,
                31 => f64::NAN,
                _ => s * (1.0 + m / 4.0) * 2f64.powi(e - 15),
            };
            let ours = e5m2_to_f32(v);
            assert!(if want.is_nan() { ours.is_nan() } else { ours as f64 == want && ours.is_sign_negative() == (s < 0.0) }, "e5m2 {v:#x}");

            let want = if v == 0xFF { f64::NAN } else { 2f64.powi(v as i32 - 127) };
            let ours = e8m0_to_f32(v);
            assert!(if want.is_nan() { ours.is_nan() } else { ours as f64 == want }, "e8m0 {v:#x}");
        }
        assert_eq!(e4m3_to_f32(0x7E), 448.0);
    }
}
