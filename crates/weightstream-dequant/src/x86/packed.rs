//! The safetensors packs on x86 (E2M1 pairs, INT4 and INT8 words): the run
//! logic written once for both vector widths. A run of one scale (and zero
//! point) goes through a table of the 16 outputs its codes can have (E2M1,
//! INT4) or value by value (INT8), then the scalar kernel for what is left
//! under one vector; each width (packed256.rs: AVX2, packed512.rs:
//! AVX-512) supplies its table, lookup and INT8 loop as a [`PackWidth`].

use crate::kernel::{IntPack, ScaleGrid};
use crate::scalar;
use weightstream_blocks::E2M1_VALUES;

/// INT4 codes 0..16 as values before the zero point: q - 8.
pub(super) const INT4_LEVELS: [f32; 16] = [-8.0, -7.0, -6.0, -5.0, -4.0, -3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0];

/// One vector width's pieces. The methods are `#[inline(always)]` without
/// target features: they are only called from the `#[target_feature]`
/// entry points of packed256.rs and packed512.rs, into which they inline.
pub(super) trait PackWidth {
    type Table: Copy;
    /// The 16 outputs BF16(R((level - zero) * scale)) of a run, rounded to
    /// F16 first where `to_f16`: `level - zero` is exact.
    unsafe fn table16(levels: &[f32; 16], zero: f32, scale: f32, to_f16: bool) -> Self::Table;
    /// Values `[0, n - n % 16)` of a run of nibble pairs through `table`;
    /// returns how many were written.
    unsafe fn nibble_run(table: Self::Table, src: &[u8], dst: &mut [u16]) -> usize;
    /// INT8 values of a run, whole vectors of them; returns how many were
    /// written.
    unsafe fn int8_run(scale: f32, zero: f32, to_f16: bool, src: &[u8], dst: &mut [u16]) -> usize;
}

/// E2M1 run `k` (values `[i, i + len)` of the chunk) through its table.
///
/// # Safety
/// Inside an entry point with `W`'s features; the run lies within the
/// chunk, on even elements.
#[inline(always)]
pub(super) unsafe fn e2m1_run<W: PackWidth>(scales: &ScaleGrid, k: usize, i: usize, len: usize, src: &[u8], dst: &mut [u16]) {
    let scale = scales.value(k);
    let (s, d) = (&src[i / 2..(i + len) / 2], &mut dst[i..i + len]);
    // SAFETY: the caller's contract.
    let done = unsafe { W::nibble_run(W::table16(&E2M1_VALUES, 0.0, scale, false), s, d) };
    scalar::e2m1_run(scale, &s[done / 2..], &mut d[done..]);
}

/// INT4 or INT8 run `k` (values `[i, i + len)` of the chunk).
///
/// # Safety
/// As for [`e2m1_run`], the run on whole words.
#[inline(always)]
pub(super) unsafe fn int_run<W: PackWidth>(pack: &IntPack, k: usize, i: usize, len: usize, src: &[u8], dst: &mut [u16]) {
    let IntPack { bits, ref scales, ref zeros, to_f16, .. } = *pack;
    let (scale, zero) = (scales.value(k), zeros.as_ref().map_or(0.0, |z| z.value(k)));
    let per_byte = 8 / bits as usize;
    let (s, d) = (&src[i / per_byte..(i + len) / per_byte], &mut dst[i..i + len]);
    // SAFETY: the caller's contract.
    let done = unsafe {
        if bits == 4 {
            W::nibble_run(W::table16(&INT4_LEVELS, zero, scale, to_f16), s, d)
        } else {
            W::int8_run(scale, zero, to_f16, s, d)
        }
    };
    scalar::int_run(bits, scale, zero, to_f16, &s[done / per_byte..], &mut d[done..]);
}
