//! IQ1_M on AVX-512 with a whole block in vectors (grid.rs's
//! `Iq1mBlocks` picks it for the AVX-512 kernels): the same scalar f32
//! operations per output as `iq1_m_groups`, sixteen lanes at a time.

use std::arch::x86_64::*;

use super::avx512::Round;
use super::emit::blocks;
use weightstream_blocks::block;
use weightstream_blocks::block_tables::*;

/// 16 i32 lanes (a vector constant): lane `l` is the expression.
macro_rules! lanes16 {
    (|$l:ident| $e:expr) => {{
        let mut t = [0i32; 16];
        let mut $l = 0i32;
        while $l < 16 {
            t[$l as usize] = $e;
            $l += 1;
        }
        t
    }};
}

/// A `lanes16` constant as a vector.
#[inline(always)]
pub(super) unsafe fn vec16(t: &[i32; 16]) -> __m512i {
    // SAFETY: 64 readable bytes; callers run with avx512f enabled.
    unsafe { _mm512_loadu_si512(t.as_ptr() as *const __m512i) }
}

/// Group k's scale word (k / 4) for each lane k of `IQ1M_DL_SHIFT`.
pub(super) static IQ1M_SCALE_WORD: [i32; 16] = lanes16!(|k| k / 4);

/// Its 3-bit scale at bit 3 (k % 4) of that word.
pub(super) static IQ1M_DL_SHIFT: [i32; 16] = lanes16!(|k| 3 * (k % 4));

/// Grid index i's qh byte (i / 2 of the 16 qh bytes; plus 8 for i >= 16).
pub(super) static IQ1M_QH_BYTE: [i32; 16] = lanes16!(|i| i / 2);

/// Left shift putting its nibble's 3 index bits at bit 8: the low nibble
/// by 8, the high one by 4.
pub(super) static IQ1M_QH_SHIFT: [i32; 16] = lanes16!(|i| if i % 2 == 0 { 8 } else { 4 });

/// The table lanes of a pair of groups: lane l is group l / 8 of the pair,
/// its 8-value half (l / 4) % 2, grid value l % 4 - 1 (lane 3 unused).
/// The pair's group for each lane (add 2p for pair p).
pub(super) static IQ1M_PAIR_GROUP: [i32; 16] = lanes16!(|l| l / 8);

/// Left shift bringing the delta sign bit of lane l's 8 values (bit 3 of
/// their nibble: bit 4 (l / 4) + 3 of the pair's two qh bytes) to bit 31.
pub(super) static IQ1M_DELTA_SHIFT: [i32; 16] = lanes16!(|l| 28 - 4 * (l / 4));

/// Lane l's grid value as f32 bits (-1, 0, 1; 0 in the unused lane).
pub(super) static IQ1M_GRID_VALUE: [i32; 16] = lanes16!(|l| match l % 4 {
    0 => (-1.0f32).to_bits() as i32,
    2 => 1.0f32.to_bits() as i32,
    _ => 0,
});

/// IQ1_M on AVX-512, a block at a time in vectors. The 32 grid indices
/// (qs byte, 3 bits of a qh nibble) are built 16 at a time and their
/// entries fetched 8 at a time (`vpgatherdq`: 64 values, 4 groups). The
/// outputs dl * (g + delta) are computed per pair of groups, 16 f32 lanes
/// (group, delta half, g = -1, 0, 1), with the scalar kernel's operations:
/// dl = d * (2s + 1) (exact integer -> f32, one `vmulps`), g + delta (a
/// `vaddps`; exact anyway), times dl (a `vmulps`); two pairs are rounded
/// together by `R::pack` (NaN -> 0x7FC0), the 32-word table of 4 groups,
/// and each value looks its output up in it with one `vpermw`: word
/// 4 * (its 8-value run within the 4 groups) + g + 1.
#[inline(always)]
pub(super) unsafe fn iq1_m_vectors<R: Round>(src: &[u8], dst: &mut [u16]) {
    // SAFETY: inside a kernel of `kernels!` with avx512f, avx512bw,
    // avx512vl and f16c (and avx512bf16 for Bf16Round) enabled; the
    // lengths checked.
    unsafe {
        use block::iq1_m::*;
        for (b, o) in blocks(src, dst, BYTES, ELEMS) {
            let p = b.as_ptr();
            // SAFETY: scales[0..8] inside the block.
            let sc = (p.add(SCALES) as *const u64).read_unaligned();
            // d: the top nibbles of the four scale words (`iq1_m_d`), converted exactly by F16C.
            let bits = ((sc >> 12) & 0xF) | ((sc >> 24) & 0xF0) | ((sc >> 36) & 0xF00) | ((sc >> 48) & 0xF000);
            let d = _mm512_cvtph_ps(_mm256_set1_epi16(bits as i16));
            // dl of the 16 groups: 2s + 1 is ((word << 1) >> 3 (k % 4)) & 0xE | 1.
            let words = _mm_slli_epi32::<1>(_mm_cvtepu16_epi32(_mm_cvtsi64_si128(sc as i64)));
            let s =
                _mm512_srlv_epi32(_mm512_permutexvar_epi32(vec16(&IQ1M_SCALE_WORD), _mm512_castsi128_si512(words)), vec16(&IQ1M_DL_SHIFT));
            let odd = _mm512_ternarylogic_epi32::<0xEA>(s, _mm512_set1_epi32(0xE), _mm512_set1_epi32(1));
            let dl = _mm512_mul_ps(d, _mm512_cvtepi32_ps(odd));
            // SAFETY: qh[0..16] inside the block.
            let qh = _mm512_cvtepu8_epi32(_mm_loadu_si128(p.add(QH) as *const __m128i));
            // Grid indices 16m .. 16m + 16: qs byte | 3 bits of the nibble << 8 (< 2048).
            let indices = |m: usize| {
                // SAFETY: qs[16m .. 16m + 16] inside the block (m < 2).
                let qs = _mm512_cvtepu8_epi32(_mm_loadu_si128(p.add(QS + 16 * m) as *const __m128i));
                let nib = _mm512_permutexvar_epi32(_mm512_add_epi32(vec16(&IQ1M_QH_BYTE), _mm512_set1_epi32(8 * m as i32)), qh);
                _mm512_ternarylogic_epi32::<0xF8>(qs, _mm512_sllv_epi32(nib, vec16(&IQ1M_QH_SHIFT)), _mm512_set1_epi32(0x700))
            };
            let (i0, i1) = (indices(0), indices(1));
            // SAFETY: outputs 64q .. 64q + 64 inside the block's 256 (q < 4).
            iq1_m_quad::<R>(p, dl, _mm512_castsi512_si256(i0), 0, o);
            iq1_m_quad::<R>(p, dl, _mm512_extracti64x4_epi64::<1>(i0), 1, o);
            iq1_m_quad::<R>(p, dl, _mm512_castsi512_si256(i1), 2, o);
            iq1_m_quad::<R>(p, dl, _mm512_extracti64x4_epi64::<1>(i1), 3, o);
        }
    }
}

/// `iq1_m_vectors`' groups 4q .. 4q + 4 of the block at `p` (grid indices
/// `idx`: 8q .. 8q + 8; `dl` of the 16 groups): outputs 64q .. 64q + 64 at `o`.
#[inline(always)]
pub(super) unsafe fn iq1_m_quad<R: Round>(p: *const u8, dl: __m512, idx: __m256i, q: usize, o: *mut u16) {
    // SAFETY: as in iq1_m_vectors; the caller guarantees a whole block at
    // p, 64 writable u16 at o + 64q, and q < 4.
    unsafe {
        // SAFETY: every index below 2048 = IQ1S_GRID.len().
        let g = _mm512_i32gather_epi64::<8>(idx, IQ1S_GRID.as_ptr() as *const i64);
        let t = R::pack(iq1_m_pair(p, dl, 2 * q), iq1_m_pair(p, dl, 2 * q + 1));
        // Byte j of 64 (4 groups' values): 1 + 4 (j / 8), added to g.
        const B: i64 = 0x0101_0101_0101_0101;
        let i = _mm512_add_epi8(g, _mm512_setr_epi64(B, 5 * B, 9 * B, 13 * B, 17 * B, 21 * B, 25 * B, 29 * B));
        let out = o.add(64 * q);
        _mm512_storeu_si512(out as *mut __m512i, _mm512_permutexvar_epi16(_mm512_cvtepu8_epi16(_mm512_castsi512_si256(i)), t));
        _mm512_storeu_si512(
            out.add(32) as *mut __m512i,
            _mm512_permutexvar_epi16(_mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64::<1>(i)), t),
        );
    }
}

/// `iq1_m_vectors`' 16 f32 outputs of groups 2 pair, 2 pair + 1 of the
/// block at `p`: lane l is dl * (g + delta) for group 2 pair + l / 8, its
/// 8-value half (l / 4) % 2, g = l % 4 - 1 (0 in lane 3).
#[inline(always)]
pub(super) unsafe fn iq1_m_pair(p: *const u8, dl: __m512, pair: usize) -> __m512 {
    // SAFETY: as in iq1_m_vectors; the caller guarantees a whole block at
    // p and pair < 8.
    unsafe {
        use block::iq1_m::*;
        // The pair's two qh bytes (and two more, shifted out).
        // SAFETY: qh[2 pair .. 2 pair + 4] inside the block (bytes 32..50 of 56).
        let bits = _mm512_set1_epi32((p.add(QH + 2 * pair) as *const i32).read_unaligned());
        // ±0.125: 0x3E00_0000 with the delta bit as the sign.
        let delta = _mm512_ternarylogic_epi32::<0xEA>(
            _mm512_sllv_epi32(bits, vec16(&IQ1M_DELTA_SHIFT)),
            _mm512_set1_epi32(i32::MIN),
            _mm512_set1_epi32(0x3E00_0000),
        );
        let dl = _mm512_permutexvar_ps(_mm512_add_epi32(vec16(&IQ1M_PAIR_GROUP), _mm512_set1_epi32(2 * pair as i32)), dl);
        _mm512_mul_ps(_mm512_add_ps(_mm512_castsi512_ps(vec16(&IQ1M_GRID_VALUE)), _mm512_castsi512_ps(delta)), dl)
    }
}
