//! AVX-512 kernels of the safetensors packs (format/packed.rs): E2M1
//! (NVFP4, MXFP4) and INT4 through a table of the 16 outputs a run of one
//! scale can have; INT8 through a table of its 256 outputs in runs of at
//! least `INT8_TABLE_MIN` values (per-channel and per-tensor scales) where
//! the CPU has AVX512VBMI (under both AVX-512 paths), else value by
//! value. Each reproduces its scalar kernel
//! (`scalar::e2m1_run`, `scalar::int_run`) bit for bit:
//!
//! - a table entry is the scalar kernel's own operations on one code: the
//!   exact f32 level (E2M1 value, or `q - zero` for integers, whose `vsubps`
//!   is exact), one `vmulps` by the scale, F16 rounding where the scales
//!   are F16 (`round_f16`: the same two rounded adds as numerics.rs), and
//!   the output's exact rounding (avx512.rs `IntRound` for BF16:
//!   subnormal results rounded as the scalar formula does, every NaN
//!   0x7FC0; `F16Round`, `vcvtps2ph`, for float16, every NaN 0x7E00);
//! - each value's output is then its table entry (`vpermw` on its code,
//!   the codes in element order: low nibble of a byte first).
//!
//! Runs come from `kernel::grid_runs` (whole rows' groups, whole words);
//! what a run leaves under 16 values goes through the scalar kernel.
//!
//! E2M1 with groups of a power of two >= 16 values (NVFP4: 16, MXFP4: 32)
//! skips the tables for each row's whole 32-value steps (`e2m1_direct`):
//! level by `vpermps` on the code, one `vmulps` by the group's scale, then
//! the BF16 rounding, `vcvtne2ps2bf16` (avx512.rs `Bf16Round`) where the
//! CPU has it and no scale of the row can make a NaN or an f32 subnormal
//! product (`e2m1_ordinary`), else `IntRound`. A table per 16 values cost
//! as much as the lookups (docs/PERFORMANCE.md).
//! Every function is `unsafe`: callers must have checked
//! `Isa::Avx512.supported()`.

use std::arch::x86_64::*;

use super::avx512::Out512;
use super::avx512::{round_f16, Bf16Round, Round};
use super::packed512_int8::{int8_run, int8_table, int8_table_run, INT8_TABLE_MIN};
use crate::kernel::{grid_runs, IntPack, ScaleGrid};
use crate::scalar;
use weightstream_blocks::E2M1_VALUES;

/// INT4 codes 0..16 as values, before the zero point: q - 8.
const INT4_LEVELS: [f32; 16] = [-8.0, -7.0, -6.0, -5.0, -4.0, -3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0];

/// The 16 outputs of a run, in words 0..16: O(R(level * scale)), by `O`'s
/// exact rounding (results may be subnormal).
#[inline(always)]
unsafe fn table16<O: Out512>(levels: __m512, scale: f32, to_f16: bool) -> __m512i {
    // SAFETY: inside a kernel with avx512f and avx512bw enabled.
    unsafe {
        let x = _mm512_mul_ps(levels, _mm512_set1_ps(scale));
        let x = if to_f16 { round_f16(x) } else { x };
        O::Round512::pack(x, x)
    }
}

/// The codes of 16 bytes of nibble pairs in element order (low nibble of
/// each byte first): 32 code bytes.
#[inline(always)]
unsafe fn nibbles32(b: __m128i) -> __m256i {
    // SAFETY: inside a kernel with avx2 enabled.
    unsafe {
        let m = _mm_set1_epi8(0x0F);
        let (lo, hi) = (_mm_and_si128(b, m), _mm_and_si128(_mm_srli_epi16::<4>(b), m));
        _mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi))
    }
}

/// Values `[0, n - n % 16)` of a run of nibble pairs through `table`;
/// returns how many were written.
#[inline(always)]
unsafe fn nibble_run(table: __m512i, src: &[u8], dst: &mut [u16]) -> usize {
    let n = dst.len();
    let mut i = 0;
    // SAFETY: inside a kernel with avx512f/bw/vl and avx2 enabled; every
    // load reads src[i / 2..i / 2 + 16 or 8] and every store writes
    // dst[i..i + 32 or 16], inside the run (src holds n / 2 bytes).
    unsafe {
        while i + 32 <= n {
            let b = _mm_loadu_si128(src.as_ptr().add(i / 2) as *const __m128i);
            let idx = _mm512_cvtepu8_epi16(nibbles32(b));
            _mm512_storeu_si512(dst.as_mut_ptr().add(i) as *mut __m512i, _mm512_permutexvar_epi16(idx, table));
            i += 32;
        }
        if i + 16 <= n {
            let b = _mm_loadl_epi64(src.as_ptr().add(i / 2) as *const __m128i);
            let idx = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(nibbles32(b)));
            _mm256_storeu_si256(dst.as_mut_ptr().add(i) as *mut __m256i, _mm256_permutexvar_epi16(idx, _mm512_castsi512_si256(table)));
            i += 16;
        }
    }
    i
}

/// A whole E2M1 chunk (chunk.rs checked it: even rows and groups) to `O`:
/// BF16 rounded by `vcvtne2ps2bf16` where `bf16` (else the integer
/// formula), float16 by `vcvtps2ph`.
///
/// # Safety
/// `Isa::Avx512.supported()`, and `has_bf16()` where `bf16`;
/// `src.len() * 2 == dst.len()`.
pub unsafe fn e2m1<O: Out512>(bf16: bool, cols: u64, scales: &ScaleGrid, first: u64, src: &[u8], dst: &mut [u16]) {
    // SAFETY: the caller's contract above.
    unsafe {
        if bf16 && O::DTYPE == weightstream_blocks::OutDtype::BF16 {
            e2m1_bf16(cols, scales, first, src, dst)
        } else {
            e2m1_exact::<O::Round512>(cols, scales, first, src, dst)
        }
    }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,f16c")]
unsafe fn e2m1_exact<R: Round>(cols: u64, scales: &ScaleGrid, first: u64, src: &[u8], dst: &mut [u16]) {
    // SAFETY: this function's features; the caller's lengths.
    unsafe { e2m1_rows::<R>(cols, scales, first, src, dst) }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,f16c,avx512bf16")]
unsafe fn e2m1_bf16(cols: u64, scales: &ScaleGrid, first: u64, src: &[u8], dst: &mut [u16]) {
    // SAFETY: this function's features; the caller's lengths.
    unsafe { e2m1_rows::<Bf16Round>(cols, scales, first, src, dst) }
}

/// A chunk row by row: where groups are a power of two of at least 16
/// values, each row's stretch of whole 32-value steps from a multiple of
/// 16 is computed directly (`e2m1_direct`); the rest (per-tensor scales,
/// other groups, a row's head before a multiple of 16 and its tail)
/// through the tables (`e2m1_tables`).
#[inline(always)]
unsafe fn e2m1_rows<R: Round>(cols: u64, scales: &ScaleGrid, first: u64, src: &[u8], dst: &mut [u16]) {
    let (n, bc) = (dst.len(), scales.block_cols());
    // SAFETY: inside a kernel with R's features; every range passed
    // below lies within the chunk and starts on an even element.
    unsafe {
        if n == 0 || scales.uniform().is_some() || !bc.is_power_of_two() || bc < 16 {
            return e2m1_tables::<R::Out>(cols, scales, first, src, dst);
        }
        let cols = cols as usize;
        let (mut i, mut row, mut c) = (0usize, first / cols as u64, (first % cols as u64) as usize);
        while i < n {
            let len = (cols - c).min(n - i);
            let head = (c.next_multiple_of(16) - c).min(len);
            let steps = (len - head) / 32 * 32;
            let (a, b) = (i + head, i + head + steps);
            e2m1_tables::<R::Out>(cols as u64, scales, first + i as u64, &src[i / 2..a / 2], &mut dst[i..a]);
            e2m1_direct::<R>(scales.row(row), c + head, bc.trailing_zeros(), &src[a / 2..b / 2], &mut dst[a..b]);
            e2m1_tables::<R::Out>(cols as u64, scales, first + b as u64, &src[b / 2..(i + len) / 2], &mut dst[b..i + len]);
            i += len;
            row += 1;
            c = 0;
        }
    }
}

/// Elements through one output table per run of one scale (`grid_runs`).
#[inline(always)]
unsafe fn e2m1_tables<O: Out512>(cols: u64, scales: &ScaleGrid, first: u64, src: &[u8], dst: &mut [u16]) {
    // SAFETY: 16 readable f32.
    let levels = unsafe { _mm512_loadu_ps(E2M1_VALUES.as_ptr()) };
    grid_runs(cols, scales, first, dst.len(), |k, i, len| {
        let scale = scales.value(k);
        let (s, d) = (&src[i / 2..(i + len) / 2], &mut dst[i..i + len]);
        // SAFETY: the caller's features; the run lies within src and dst.
        let done = unsafe { nibble_run(table16::<O>(levels, scale, false), s, d) };
        scalar::e2m1_run::<O>(scale, &s[done / 2..], &mut d[done..]);
    });
}

/// Whether no product of an E2M1 value (magnitude 0 or >= 0.5) and `scale`
/// is an f32 subnormal (which `vcvtne2ps2bf16` would flush) or NaN: the
/// scale finite, zero or at least 2^-125.
#[inline(always)]
fn e2m1_ordinary(scale: f32) -> bool {
    let a = scale.to_bits() & 0x7FFF_FFFF;
    a < 0x7F80_0000 && (a == 0 || a >= 2 << 23)
}

/// `dst.len() / 32` steps of 32 values of one row from column `c` (a
/// multiple of 16; groups of `1 << shift` >= 16 values, `row` the row's
/// scales): each value its E2M1 level (`vpermps` on its code) times its
/// group's scale, rounded by `R` where no scale of the row can make a
/// NaN or subnormal product, else by the output's exact rounding
/// (`IntRound` for BF16; float16's `F16Round` is exact on every input).
#[inline(always)]
unsafe fn e2m1_direct<R: Round>(row: &[f32], c: usize, shift: u32, src: &[u8], dst: &mut [u16]) {
    let steps = dst.len() / 32;
    if steps == 0 {
        return;
    }
    let used = &row[c >> shift..=(c + 32 * steps - 1) >> shift];
    // SAFETY: inside a kernel with R's features.
    unsafe {
        if used.iter().fold(true, |ok, &s| ok & e2m1_ordinary(s)) {
            e2m1_steps::<R, false>(row, c, shift, src, dst)
        } else {
            e2m1_steps::<<R::Out as Out512>::Round512, true>(row, c, shift, src, dst)
        }
    }
}

#[inline(always)]
unsafe fn e2m1_steps<R: Round, const ANY: bool>(row: &[f32], c: usize, shift: u32, src: &[u8], dst: &mut [u16]) {
    // SAFETY: inside a kernel with R's features (avx512f/bw/vl at least);
    // step k reads src[16k..16k + 16] and writes dst[32k..32k + 32], both
    // inside the slices (dst.len() / 32 steps, src half as long).
    unsafe {
        let levels = _mm512_loadu_ps(E2M1_VALUES.as_ptr());
        for k in 0..dst.len() / 32 {
            let col = c + 32 * k;
            let b = _mm_loadu_si128(src.as_ptr().add(16 * k) as *const __m128i);
            // Byte j of `lo` holds code j of the step in its low nibble:
            // vpermps reads only the low 4 bits of each index.
            let hi = _mm_srli_epi16::<4>(b);
            let (lo, up) = (_mm_unpacklo_epi8(b, hi), _mm_unpackhi_epi8(b, hi));
            let s0 = _mm512_set1_ps(row[col >> shift]);
            let s1 = _mm512_set1_ps(row[(col + 16) >> shift]);
            let x0 = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_cvtepu8_epi32(lo), levels), s0);
            let x1 = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_cvtepu8_epi32(up), levels), s1);
            let v = if ANY { R::pack(x0, x1) } else { R::pack_ordinary(x0, x1) };
            _mm512_storeu_si512(dst.as_mut_ptr().add(32 * k) as *mut __m512i, v);
        }
    }
}

/// A whole INT4 or INT8 chunk (chunk.rs checked it: whole words per row
/// and group). With `vbmi` (the CPU has AVX512VBMI), INT8 runs of at least
/// [`INT8_TABLE_MIN`] values look their outputs up in a 256-entry table.
///
/// # Safety
/// `Isa::Avx512.supported()`, and [`has_vbmi`] when `vbmi`; `src` holds
/// `dst.len()` values of `bits` bits.
pub unsafe fn int<O: Out512>(vbmi: bool, pack: IntPack, first: u64, src: &[u8], dst: &mut [u16]) {
    // SAFETY: the caller's contract above.
    unsafe {
        if vbmi {
            int_vbmi::<O>(pack, first, src, dst)
        } else {
            int_plain::<O>(pack, first, src, dst)
        }
    }
}

/// Whether this CPU has `vpermi2b` (AVX512VBMI: the INT8 table lookup).
pub fn has_vbmi() -> bool {
    is_x86_feature_detected!("avx512vbmi")
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,f16c")]
unsafe fn int_plain<O: Out512>(pack: IntPack, first: u64, src: &[u8], dst: &mut [u16]) {
    // The closure is defined here so that it has these features.
    grid_runs(pack.cols, &pack.scales, first, dst.len(), |k, i, len| {
        // SAFETY: see `int` (these features confirmed by the caller);
        // grid_runs covers [0, dst.len()).
        unsafe { int_one_run::<O, false>(&pack, k, i, len, src, dst) }
    });
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,f16c,avx512vbmi")]
unsafe fn int_vbmi<O: Out512>(pack: IntPack, first: u64, src: &[u8], dst: &mut [u16]) {
    grid_runs(pack.cols, &pack.scales, first, dst.len(), |k, i, len| {
        // SAFETY: as in int_plain, AVX512VBMI confirmed too.
        unsafe { int_one_run::<O, true>(&pack, k, i, len, src, dst) }
    });
}

/// The run of scale `k`, values `[i, i + len)` of the chunk.
#[inline(always)]
unsafe fn int_one_run<O: Out512, const VBMI: bool>(pack: &IntPack, k: usize, i: usize, len: usize, src: &[u8], dst: &mut [u16]) {
    let IntPack { bits, ref scales, ref zeros, to_f16, .. } = *pack;
    let (scale, zero) = (scales.value(k), zeros.as_ref().map_or(0.0, |z| z.value(k)));
    let per_byte = 8 / bits as usize;
    let (s, d) = (&src[i / per_byte..(i + len) / per_byte], &mut dst[i..i + len]);
    // SAFETY: the enclosing kernel's features (avx512vbmi where VBMI); 16
    // readable f32 in INT4_LEVELS; the run lies within src and dst.
    let done = unsafe {
        if bits == 4 {
            let int4 = _mm512_loadu_ps(INT4_LEVELS.as_ptr());
            nibble_run(table16::<O>(_mm512_sub_ps(int4, _mm512_set1_ps(zero)), scale, to_f16), s, d)
        } else if VBMI && len >= INT8_TABLE_MIN {
            let done = int8_table_run(&int8_table::<O>(scale, zero, to_f16), s, d);
            done + int8_run::<O>(scale, zero, to_f16, &s[done..], &mut d[done..])
        } else {
            int8_run::<O>(scale, zero, to_f16, s, d)
        }
    };
    scalar::int_run::<O>(bits, scale, zero, to_f16, &s[done / per_byte..], &mut d[done..]);
}
