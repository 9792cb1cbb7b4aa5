//! NEON F32 -> BF16 or float16, F16 -> BF16, BF16 -> float16 (neon.rs
//! has the roundings; F16 to float16 and BF16 to BF16 are copies, the
//! portable kernels').

use std::arch::aarch64::*;

use super::neon::*;
use crate::scalar;

#[target_feature(enable = "neon")]
pub unsafe fn f32<O: Out128>(src: &[u8], dst: &mut [u16]) {
    let n = dst.len() / 8 * 8;
    for i in (0..n).step_by(8) {
        // SAFETY: i + 8 <= n <= dst.len(), and src holds 4 bytes per element.
        unsafe {
            let p = src.as_ptr().add(i * 4) as *const f32;
            store8::<O>(dst.as_mut_ptr().add(i), vld1q_f32(p), vld1q_f32(p.add(4)));
        }
    }
    scalar::f32::<O>(&src[n * 4..], &mut dst[n..]);
}

#[target_feature(enable = "neon")]
pub unsafe fn f16(src: &[u8], dst: &mut [u16]) {
    let n = dst.len() / 8 * 8;
    for i in (0..n).step_by(8) {
        // SAFETY: as in f32, 2 bytes per element. `fcvtl` is exact (an f16
        // value is never an f32 subnormal); its NaNs keep their payload,
        // which the rounding makes canonical.
        unsafe {
            let (a, b) = f16x8_to_f32(vld1q_u16(src.as_ptr().add(i * 2) as *const u16));
            store8::<crate::output::Bf16Out>(dst.as_mut_ptr().add(i), a, b);
        }
    }
    scalar::f16::<crate::output::Bf16Out>(&src[n * 2..], &mut dst[n..]);
}

/// BF16 -> float16 (chunk.rs never picks it for BF16 output, a copy):
/// each value widened exactly to f32 (`shll` by 16), then rounded once.
#[target_feature(enable = "neon")]
pub unsafe fn bf16<O: Out128>(src: &[u8], dst: &mut [u16]) {
    let n = dst.len() / 8 * 8;
    for i in (0..n).step_by(8) {
        // SAFETY: as in f32, 2 bytes per element.
        unsafe {
            let v = vld1q_u16(src.as_ptr().add(i * 2) as *const u16);
            let (a, b) = (vshll_n_u16::<16>(vget_low_u16(v)), vshll_high_n_u16::<16>(v));
            store8::<O>(dst.as_mut_ptr().add(i), vreinterpretq_f32_u32(a), vreinterpretq_f32_u32(b));
        }
    }
    scalar::bf16::<O>(&src[n * 2..], &mut dst[n..]);
}
