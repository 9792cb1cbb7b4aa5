//! GPTQ's layout (AutoGPTQ / GPTQModel checkpoints, vLLM's `auto_gptq`):
//! `qweight` int32 `[in / (32 / bits), out]`, the codes of input feature
//! `k` of output feature `r` in bits `bits * (k % pack)` of word
//! `[k / pack][r]`; `scales` `[in / group, out]` (fp16); symmetric, so the
//! value is `scale * (code - 2^(bits-1))` (vLLM's `uint4b8`, `uint8b128`).
//!
//! A GGUF weight is stored `[out, in]`, one row per output feature, its
//! blocks along the input features. Where a block's every value is `d`
//! (one fp16 per block) times a small integer, GPTQ holds the same values
//! exactly: the integer moves as a biased code, `d` becomes the group's
//! scale (codes.rs has each format's codes):
//!
//! | GGUF | value | GPTQ | code |
//! |---|---|---|---|
//! | Q4_0 | d·(q - 8), q a nibble | uint4b8, group 32 | q |
//! | Q8_0 | d·q, q int8 | uint8b128, group 32 | q + 128 |
//! | Q5_0 | d·(q - 16), q 5 bits | uint8b128, group 32 | q + 112 |
//! | IQ4_NL | d·table[q], int8 levels | uint8b128, group 32 | table[q] + 128 |
//! | Q1_0 | ±d, 128 per d | uint4b8, group 128 | 9 or 7 |
//! | Q2_0 | d·(q - 1), 64 per d | uint4b8, group 64 | q + 7 |
//! | TQ1_0, TQ2_0 | d·(t - 1), 256 per d | uint4b8, group 128 (each d twice) | t + 7 |
//!
//! A group never spans two blocks' scales: it is the block, or half of a
//! 256-element ternary block (GPTQ kernels take groups of at most 128).

use std::ops::Range;

use rayon::prelude::*;
use weightstream_blocks::BlockFormat;

use crate::codes::{block_codes, block_scale};

/// The GPTQ layout a block format maps onto exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GptqTarget {
    /// Bits per code: 4 (uint4b8) or 8 (uint8b128).
    pub bits: u32,
    /// Input features per scale: the block's elements, or half a ternary
    /// block.
    pub group: usize,
}

impl GptqTarget {
    /// Codes per int32 word.
    pub fn pack(self) -> usize {
        32 / self.bits as usize
    }
}

/// The exact GPTQ target of `format`, if it has one (the table above).
pub fn target(format: BlockFormat) -> Option<GptqTarget> {
    let (bits, group) = match format {
        BlockFormat::Q4_0 => (4, 32),
        BlockFormat::Q8_0 | BlockFormat::Q5_0 | BlockFormat::IQ4_NL => (8, 32),
        BlockFormat::Q1_0 => (4, 128),
        BlockFormat::Q2_0 => (4, 64),
        BlockFormat::TQ1_0 | BlockFormat::TQ2_0 => (4, 128),
        _ => return None,
    };
    Some(GptqTarget { bits, group })
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RepackError {
    #[error("{0:?} has no exact GPTQ layout (Q4_0, Q8_0, Q5_0, IQ4_NL, Q1_0, Q2_0, TQ1_0 and TQ2_0 have)")]
    NoTarget(BlockFormat),
    #[error("columns {cols:?} of {ncols}: a GPTQ slice starts and ends on a group of {group}")]
    Columns { cols: Range<usize>, ncols: usize, group: usize },
    #[error("buffer sizes: {what} holds {got} values, {want} needed")]
    Size { what: &'static str, got: usize, want: usize },
}

/// Repack `nrows` stored rows (`raw`: their bytes, rows of `ncols`
/// elements back to back) cut to input features `cols` (whole groups)
/// into GPTQ's `qweight` (`[cols.len() / pack, nrows]`) and `scales`
/// (`[cols.len() / group, nrows]`, fp16 bits). Groups are independent:
/// split across threads by group.
pub fn repack(
    format: BlockFormat,
    raw: &[u8],
    nrows: usize,
    ncols: usize,
    cols: Range<usize>,
    qweight: &mut [u32],
    scales: &mut [u16],
) -> Result<(), RepackError> {
    let t = target(format).ok_or(RepackError::NoTarget(format))?;
    let layout = format.layout();
    if !crate::whole_groups(&cols, ncols, t.group, layout.elems) {
        return Err(RepackError::Columns { cols, ncols, group: t.group });
    }
    let groups = cols.len() / t.group;
    let row_bytes = ncols / layout.elems * layout.bytes;
    if let Some((what, got, want)) = crate::wrong_size([
        ("raw bytes", raw.len(), nrows * row_bytes),
        ("qweight", qweight.len(), cols.len() / t.pack() * nrows),
        ("scales", scales.len(), groups * nrows),
    ]) {
        return Err(RepackError::Size { what, got, want });
    }
    if nrows == 0 || groups == 0 {
        return Ok(());
    }
    let words_per_group = t.group / t.pack();
    qweight.par_chunks_mut(words_per_group * nrows).zip(scales.par_chunks_mut(nrows)).enumerate().for_each(|(g, (words, scale_row))| {
        let first = cols.start + g * t.group;
        let (b, within) = (first / layout.elems, first % layout.elems);
        let mut codes = [0u8; 256];
        let codes = &mut codes[..layout.elems];
        for r in 0..nrows {
            let block = &raw[r * row_bytes + b * layout.bytes..][..layout.bytes];
            scale_row[r] = block_scale(format, block);
            block_codes(format, block, codes);
            for (w, chunk) in codes[within..within + t.group].chunks_exact(t.pack()).enumerate() {
                words[w * nrows + r] = chunk.iter().enumerate().fold(0u32, |acc, (i, &c)| acc | (c as u32) << (t.bits as usize * i));
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use weightstream_dequant::numerics::{f16_to_f32, f32_to_bf16};
    use weightstream_dequant::scalar::block_kernel;
    use weightstream_io::testing::random_bytes;

    const FORMATS: [BlockFormat; 8] = [
        BlockFormat::Q4_0,
        BlockFormat::Q8_0,
        BlockFormat::Q5_0,
        BlockFormat::IQ4_NL,
        BlockFormat::Q1_0,
        BlockFormat::Q2_0,
        BlockFormat::TQ1_0,
        BlockFormat::TQ2_0,
    ];

    /// Random blocks whose d is finite: the GPTQ side's value is d times
    /// an integer, which for an infinite d gives NaN where ggml's 0 * inf
    /// does too, but a NaN d has no bits to compare.
    fn blocks(format: BlockFormat, n: usize, seed: u64) -> Vec<u8> {
        let l = format.layout();
        let mut raw = random_bytes(n * l.bytes, seed);
        let at = l.field("D").unwrap().0;
        for (k, b) in raw.chunks_exact_mut(l.bytes).enumerate() {
            let d = [0x2C00u16, 0x3C00, 0xBC00, 0x0001, 0x7BFF, 0x8000][k % 6] ^ (k as u16 & 0x3F);
            b[at..at + 2].copy_from_slice(&d.to_le_bytes());
        }
        raw
    }

    /// Every element's GPTQ value, scale * (code - bias) in f32 rounded to
    /// BF16, is the dequant crate's scalar kernel's BF16 for that element
    /// (those kernels are checked against gguf-py and ggml elsewhere).
    #[test]
    fn every_element_keeps_its_value() {
        for format in FORMATS {
            let t = target(format).unwrap();
            let l = format.layout();
            let ncols = 2 * l.elems.max(t.group * 2);
            for (nrows, cols) in [(3usize, 0..ncols), (5, t.group..ncols - t.group), (1, 0..t.group), (4, ncols..ncols)] {
                let row_bytes = ncols / l.elems * l.bytes;
                let raw = blocks(format, nrows * ncols / l.elems, (nrows * ncols) as u64);
                let mut want = vec![0u16; nrows * ncols];
                block_kernel::<weightstream_dequant::Bf16Out>(format)(&raw, &mut want);
                let mut q = vec![0xDEAD_BEEF; cols.len() / t.pack() * nrows];
                let mut s = vec![0xBEEF; cols.len() / t.group * nrows];
                repack(format, &raw, nrows, ncols, cols.clone(), &mut q, &mut s).unwrap();
                assert_eq!(raw.len(), nrows * row_bytes);
                for r in 0..nrows {
                    for k in cols.clone() {
                        let kk = k - cols.start;
                        let code = (q[kk / t.pack() * nrows + r] >> (t.bits as usize * (kk % t.pack()))) & ((1 << t.bits) - 1);
                        let scale = f16_to_f32(s[kk / t.group * nrows + r]);
                        let got = f32_to_bf16(scale * (code as i32 - (1 << (t.bits - 1))) as f32);
                        assert_eq!(got, want[r * ncols + k], "{format:?} row {r} col {k}: code {code}, scale {scale}");
                    }
                }
            }
        }
    }

    #[test]
    fn refusals_are_typed() {
        let mut q = vec![0; 8];
        let mut s = vec![0; 2];
        let raw = vec![0u8; 36];
        assert_eq!(repack(BlockFormat::Q4_1, &raw, 1, 64, 0..64, &mut q, &mut s), Err(RepackError::NoTarget(BlockFormat::Q4_1)));
        assert!(matches!(repack(BlockFormat::Q4_0, &raw, 2, 32, 0..16, &mut q, &mut s), Err(RepackError::Columns { .. })));
        assert!(matches!(repack(BlockFormat::Q4_0, &raw, 1, 96, 0..96, &mut q, &mut s), Err(RepackError::Size { what: "raw bytes", .. })));
        assert!(matches!(
            repack(BlockFormat::Q4_0, &raw, 2, 32, 0..32, &mut q[..4], &mut s),
            Err(RepackError::Size { what: "qweight", .. })
        ));
        // A ternary group is half a block: 128 columns of 256 repack, 64 do not.
        let raw = vec![0u8; 54];
        let mut q = vec![0; 16];
        let mut s = vec![0; 1];
        assert!(repack(BlockFormat::TQ1_0, &raw, 1, 256, 128..256, &mut q, &mut s).is_ok());
        assert!(matches!(repack(BlockFormat::TQ1_0, &raw, 1, 256, 64..192, &mut q, &mut s), Err(RepackError::Columns { .. })));
    }
}
