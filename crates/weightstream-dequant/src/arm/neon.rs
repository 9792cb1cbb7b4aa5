//! The NEON primitives every aarch64 kernel shares (the kernels are in
//! the family files: legacy.rs, kquant.rs, float.rs, ...): integers to f32, one `fmul` per value (never a fused
//! multiply-add: Rust does not contract, and these call `vmulq_f32`, not
//! `vfmaq_f32`), and the scalar BF16 rounding formula on 4 lanes at a time.
//! Each kernel reproduces `scalar` bit for bit (Linux runs aarch64 code
//! with FPCR.FZ clear: subnormals are IEEE, as on x86 without FTZ/DAZ).
//!
//! The output is a type parameter of every kernel ([`Out128`]): BF16
//! through that formula, float16 through `fcvtn` (round to nearest even by
//! FPCR.RMode, which Linux leaves at its default; f16 subnormals and
//! infinities as IEEE; FPCR.FZ would flush f32 subnormal inputs, which
//! round to a zero of their sign in f16 anyway, and FZ16 does not govern
//! conversions), its NaNs then made 0x7E00 (`fcvtn` keeps the payload top).
//!
//! `bfcvtn` (FEAT_BF16) is not used: it is an ARMv8.6 extension many
//! servers lack, and its subnormal handling follows FPCR, which the
//! formula's does not.
//!
//! Every kernel is `unsafe` with `#[target_feature(enable = "neon")]`:
//! NEON is part of the aarch64 baseline, so `Isa::Neon` is supported on
//! every aarch64 CPU; the helpers are `#[inline(always)]` so that their
//! intrinsics inline into the kernels. Lengths: as `Kernel::check` leaves
//! them (`src` whole blocks or values, `dst` their elements).

use std::arch::aarch64::*;

use weightstream_blocks::BlockLayout;

use crate::output::{Bf16Out, F16Out, Output};

/// A chunk kernel: callable only on aarch64 with NEON.
pub type KernelFn = unsafe fn(&[u8], &mut [u16]);

/// 4 f32 lanes -> 4 BF16 values: `(b + 0x7FFF + ((b >> 16) & 1)) >> 16`,
/// NaN lanes 0x7FC0 (numerics::f32_to_bf16).
#[inline(always)]
pub(super) unsafe fn round4(x: float32x4_t) -> uint16x4_t {
    // SAFETY: NEON is always present on aarch64; no memory is touched.
    unsafe {
        let b = vreinterpretq_u32_f32(x);
        let bias = vaddq_u32(vandq_u32(vshrq_n_u32::<16>(b), vdupq_n_u32(1)), vdupq_n_u32(0x7FFF));
        // The high halves of b + bias (no overflow but for NaNs).
        let r = vaddhn_u32(b, bias);
        // All ones where x is not NaN.
        let ordered = vmovn_u32(vceqq_f32(x, x));
        vbsl_u16(ordered, r, vdup_n_u16(0x7FC0))
    }
}

/// The output of the NEON kernels, a type parameter of every kernel body:
/// its rounding of f32 lanes, NaNs canonical (`Output::NAN`), bit for bit
/// the scalar `Output::from_f32`.
pub trait Out128: Output {
    /// 8 f32 lanes (`a` first) -> 8 outputs in order.
    unsafe fn round8(a: float32x4_t, b: float32x4_t) -> uint16x8_t;
}

impl Out128 for Bf16Out {
    #[inline(always)]
    unsafe fn round8(a: float32x4_t, b: float32x4_t) -> uint16x8_t {
        // SAFETY: NEON is always present on aarch64; no memory is touched.
        unsafe { vcombine_u16(round4(a), round4(b)) }
    }
}

impl Out128 for F16Out {
    #[inline(always)]
    unsafe fn round8(a: float32x4_t, b: float32x4_t) -> uint16x8_t {
        let h: uint16x8_t;
        // SAFETY: fcvtn/fcvtn2 are baseline aarch64 (FP and Advanced SIMD),
        // read and write registers only. Inline assembly: the f16 vector
        // types (`vcvt_f16_f32`) are stable only from Rust 1.94, above the
        // workspace's rust-version.
        unsafe {
            std::arch::asm!(
                "fcvtn {h:v}.4h, {a:v}.4s",
                "fcvtn2 {h:v}.8h, {b:v}.4s",
                a = in(vreg) a,
                b = in(vreg) b,
                h = out(vreg) h,
                options(pure, nomem, nostack, preserves_flags),
            );
            // A NaN keeps its sign and payload top: magnitude above 0x7C00,
            // which no other input gives.
            let nan = vcgtq_u16(vandq_u16(h, vdupq_n_u16(0x7FFF)), vdupq_n_u16(F16Out::INF));
            vbslq_u16(nan, vdupq_n_u16(F16Out::NAN), h)
        }
    }
}

/// 8 f32 lanes (`a` first) rounded to `O` and stored at `out`.
#[inline(always)]
pub(super) unsafe fn store8<O: Out128>(out: *mut u16, a: float32x4_t, b: float32x4_t) {
    // SAFETY: the caller guarantees 8 writable u16 at out.
    unsafe { vst1q_u16(out, O::round8(a, b)) }
}

/// 8 binary16 bit patterns -> their exact f32 values (`fcvtl`, `fcvtl2`):
/// subnormals, infinities and NaNs (payload kept, quieted) included.
///
/// Inline assembly: the f16 vector intrinsics (`vcvt_f32_f16`) are stable
/// only from Rust 1.94, above the workspace's rust-version.
#[inline(always)]
pub(super) unsafe fn f16x8_to_f32(h: uint16x8_t) -> (float32x4_t, float32x4_t) {
    let (lo, hi): (float32x4_t, float32x4_t);
    // SAFETY: fcvtl/fcvtl2 are baseline aarch64 (FP and Advanced SIMD),
    // read and write registers only.
    unsafe {
        std::arch::asm!(
            "fcvtl {lo:v}.4s, {h:v}.4h",
            "fcvtl2 {hi:v}.4s, {h:v}.8h",
            h = in(vreg) h,
            lo = out(vreg) lo,
            hi = out(vreg) hi,
            options(pure, nomem, nostack, preserves_flags),
        );
    }
    (lo, hi)
}

/// What follows the multiply in [`emit16`]: `d * q`, `d * q + m`, `d * q - m`.
pub(super) const NONE: u8 = 0;

pub(super) const ADD: u8 = 1;

pub(super) const SUB: u8 = 2;

/// 16 quants (the bytes of `q`, signed when `SIGNED`) -> 16 `O` values at
/// `out`: `d * q`, then `+ m` or `- m` per `OP`, each operation rounded.
#[inline(always)]
pub(super) unsafe fn emit16<O: Out128, const SIGNED: bool, const OP: u8>(q: uint8x16_t, d: f32, m: f32, out: *mut u16) {
    // SAFETY: NEON is always present; the caller guarantees 16 writable
    // u16 at out.
    unsafe {
        let (dv, mv) = (vdupq_n_f32(d), vdupq_n_f32(m));
        map16::<O, SIGNED>(q, out, |q| {
            let x = vmulq_f32(q, dv);
            match OP {
                ADD => vaddq_f32(x, mv),
                SUB => vsubq_f32(x, mv),
                _ => x,
            }
        })
    }
}

/// 16 integers (the bytes of `q`, signed when `SIGNED`), each converted
/// to f32 (exact) and passed through `f` 4 lanes at a time, rounded to
/// `O` and stored in order at `out`: the shape of every kernel that
/// computes value by value from bytes.
#[inline(always)]
pub(super) unsafe fn map16<O: Out128, const SIGNED: bool>(q: uint8x16_t, out: *mut u16, f: impl Fn(float32x4_t) -> float32x4_t) {
    // SAFETY: NEON is always present; the caller guarantees 16 writable
    // u16 at out.
    unsafe {
        let (lo, hi) = if SIGNED {
            let s = vreinterpretq_s8_u8(q);
            (vmovl_s8(vget_low_s8(s)), vmovl_high_s8(s))
        } else {
            (vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(q))), vreinterpretq_s16_u16(vmovl_high_u8(q)))
        };
        let g = |w: int32x4_t| f(vcvtq_f32_s32(w));
        store8::<O>(out, g(vmovl_s16(vget_low_s16(lo))), g(vmovl_high_s16(lo)));
        store8::<O>(out.add(8), g(vmovl_s16(vget_low_s16(hi))), g(vmovl_high_s16(hi)));
    }
}

/// 16 bytes from `p` (any alignment).
#[inline(always)]
pub(super) unsafe fn load16(p: *const u8) -> uint8x16_t {
    // SAFETY: the caller guarantees 16 readable bytes at p.
    unsafe { vld1q_u8(p) }
}

/// `N` 16-byte vectors from `p`, in order (any alignment).
#[inline(always)]
pub(super) unsafe fn load<const N: usize>(p: *const u8) -> [uint8x16_t; N] {
    std::array::from_fn(|i| {
        // SAFETY: the caller guarantees 16 * N readable bytes at p.
        unsafe { load16(p.add(16 * i)) }
    })
}

/// Elements `16 * k .. 16 * k + 16` of a packed field of `WIDTH` bits, one
/// per byte: `v` holds the field's bytes, in which each run of `run` bytes
/// (a multiple of 16) holds `8 / WIDTH` runs of `run` consecutive elements,
/// element i of them in byte `i % run` at bit `WIDTH * (i / run)`.
#[inline(always)]
pub(super) unsafe fn field16<const WIDTH: i32>(v: &[uint8x16_t], k: usize, run: usize) -> uint8x16_t {
    let e = 16 * k;
    // Elements per run of bytes.
    let per_run = run * (8 / WIDTH as usize);
    let vector = e / per_run * (run / 16) + e % run / 16;
    let shift = WIDTH as usize * (e % per_run / run);
    // SAFETY: NEON is always present on aarch64; registers only.
    unsafe { vandq_u8(vshlq_u8(v[vector], vdupq_n_s8(-(shift as i8))), vdupq_n_u8((1u8 << WIDTH) - 1)) }
}

/// Bits `16 * k .. 16 * k + 16` of the little-endian word at `qh`, one per
/// byte (0 or 1): Q5_0's and Q5_1's fifth quant bits.
#[inline(always)]
pub(super) unsafe fn bits_of_word16(qh: &[u8], k: usize) -> uint8x16_t {
    // Byte j of the vector gets bit j % 8 of its word byte to bit 0.
    const SHIFTS: [i8; 16] = [0, -1, -2, -3, -4, -5, -6, -7, 0, -1, -2, -3, -4, -5, -6, -7];
    // SAFETY: SHIFTS is 16 readable bytes; registers otherwise.
    unsafe {
        let bytes = vcombine_u8(vdup_n_u8(qh[2 * k]), vdup_n_u8(qh[2 * k + 1]));
        vandq_u8(vshlq_u8(bytes, vld1q_s8(SHIFTS.as_ptr())), vdupq_n_u8(1))
    }
}

/// The blocks of `src` with their outputs: (block bytes, output pointer).
#[inline(always)]
pub(super) fn blocks<'a>(src: &'a [u8], dst: &'a mut [u16], layout: &BlockLayout) -> impl Iterator<Item = (&'a [u8], *mut u16)> + 'a {
    src.chunks_exact(layout.bytes).zip(dst.chunks_exact_mut(layout.elems)).map(|(b, o)| (b, o.as_mut_ptr()))
}
