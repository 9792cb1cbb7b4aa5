//! GPTQ's layout (AutoGPTQ / GPTQModel checkpoints, vLLM's `auto_gptq`):
//! `qweight` int32 `[in / (32 / bits), out]`, the codes of input feature
//! `k` of output feature `r` in bits `bits * (k % pack)` of word
//! `[k / pack][r]`; `scales` `[in / group, out]` (fp16); symmetric, so the
//! value is `scale * (code - 2^(bits-1))` (vLLM's `uint4b8`, `uint8b128`).
//!
//! A GGUF weight is stored `[out, in]`, one row per output feature, its
//! blocks along the input features. Where a block's value is
//! `d * (q - bias)` with `q` a `bits`-bit code and `d` one fp16 per block,
//! GPTQ holds the same values exactly: the code moves (re-biased by a bit
//! flip for Q8_0's signed bytes), `d` becomes the group's scale.
//!
//! | GGUF | value | GPTQ |
//! |---|---|---|
//! | Q4_0 | d·(q - 8), q the nibble | uint4b8, group 32: code q |
//! | Q8_0 | d·q, q int8 | uint8b128, group 32: code q + 128 |

use std::ops::Range;

use rayon::prelude::*;
use weightstream_blocks::block::{q4_0, q8_0};
use weightstream_blocks::BlockFormat;

/// The GPTQ layout a block format maps onto exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GptqTarget {
    /// Bits per code: 4 (uint4b8) or 8 (uint8b128).
    pub bits: u32,
    /// Input features per scale: the block's elements.
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
    match format {
        BlockFormat::Q4_0 => Some(GptqTarget { bits: 4, group: q4_0::ELEMS }),
        BlockFormat::Q8_0 => Some(GptqTarget { bits: 8, group: q8_0::ELEMS }),
        _ => None,
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RepackError {
    #[error("{0:?} has no exact GPTQ layout (Q4_0 and Q8_0 have)")]
    NoTarget(BlockFormat),
    #[error("columns {cols:?} of {ncols}: a GPTQ slice starts and ends on a group of {group}")]
    Columns { cols: Range<usize>, ncols: usize, group: usize },
    #[error("buffer sizes: {what} holds {got} values, {want} needed")]
    Size { what: &'static str, got: usize, want: usize },
}

/// Repack `nrows` stored rows (`raw`: their bytes, rows of `ncols`
/// elements back to back) cut to input features `cols` into GPTQ's
/// `qweight` (`[cols.len() / pack, nrows]`) and `scales` (`[cols.len() /
/// group, nrows]`, fp16 bits). Groups are independent: split across
/// threads by group.
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
    if cols.start > cols.end || cols.end > ncols || cols.start % t.group != 0 || cols.end % t.group != 0 || ncols % t.group != 0 {
        return Err(RepackError::Columns { cols, ncols, group: t.group });
    }
    let groups = cols.len() / t.group;
    let row_bytes = ncols / layout.elems * layout.bytes;
    let sizes = [
        ("raw bytes", raw.len(), nrows * row_bytes),
        ("qweight", qweight.len(), cols.len() / t.pack() * nrows),
        ("scales", scales.len(), groups * nrows),
    ];
    for (what, got, want) in sizes {
        if got != want {
            return Err(RepackError::Size { what, got, want });
        }
    }
    if nrows == 0 || groups == 0 {
        return Ok(());
    }
    let words_per_group = t.group / t.pack();
    let first_block = cols.start / t.group;
    qweight.par_chunks_mut(words_per_group * nrows).zip(scales.par_chunks_mut(nrows)).enumerate().for_each(|(g, (words, scale_row))| {
        for r in 0..nrows {
            let at = r * row_bytes + (first_block + g) * layout.bytes;
            let block = &raw[at..at + layout.bytes];
            scale_row[r] = u16::from_le_bytes([block[0], block[1]]);
            let mut codes = [0u8; 32];
            block_codes(format, block, &mut codes);
            for (w, chunk) in codes.chunks_exact(t.pack()).enumerate() {
                let word = chunk.iter().enumerate().fold(0u32, |acc, (i, &c)| acc | (c as u32) << (t.bits as usize * i));
                words[w * nrows + r] = word;
            }
        }
    });
    Ok(())
}

/// The GPTQ codes of one block, in element order.
fn block_codes(format: BlockFormat, block: &[u8], codes: &mut [u8; 32]) {
    match format {
        BlockFormat::Q4_0 => {
            // ggml: element j is the low nibble of qs[j], element j + 16 its
            // high nibble; uint4b8's code is the nibble itself.
            let qs = &block[q4_0::QS..q4_0::BYTES];
            for j in 0..16 {
                codes[j] = qs[j] & 0x0F;
                codes[j + 16] = qs[j] >> 4;
            }
        }
        BlockFormat::Q8_0 => {
            // int8 q to uint8b128's q + 128: flipping the sign bit.
            for (c, &q) in codes.iter_mut().zip(&block[q8_0::QS..q8_0::BYTES]) {
                *c = q ^ 0x80;
            }
        }
        _ => unreachable!("target() admits only Q4_0 and Q8_0"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weightstream_io::testing::random_bytes;

    /// An independent statement of the rule: the value of every element,
    /// from the block as ggml defines it and from the GPTQ tensors as vLLM
    /// reads them, in exact f64.
    fn ggml_value(format: BlockFormat, block: &[u8], j: usize) -> (u16, i32) {
        let d = u16::from_le_bytes([block[0], block[1]]);
        match format {
            BlockFormat::Q4_0 => {
                let b = block[2 + j % 16];
                (d, (if j < 16 { b & 15 } else { b >> 4 }) as i32 - 8)
            }
            BlockFormat::Q8_0 => (d, block[2 + j] as i8 as i32),
            _ => unreachable!(),
        }
    }

    #[test]
    fn every_element_keeps_its_code_and_scale() {
        for format in [BlockFormat::Q4_0, BlockFormat::Q8_0] {
            let t = target(format).unwrap();
            let l = format.layout();
            for (nrows, ncols, cols) in [(3usize, 96usize, 0..96), (5, 128, 32..96), (1, 32, 0..32), (4, 64, 64..64)] {
                let row_bytes = ncols / l.elems * l.bytes;
                let raw = random_bytes(nrows * row_bytes, (nrows * ncols) as u64);
                let mut q = vec![0xDEAD_BEEF; cols.len() / t.pack() * nrows];
                let mut s = vec![0xBEEF; cols.len() / t.group * nrows];
                repack(format, &raw, nrows, ncols, cols.clone(), &mut q, &mut s).unwrap();
                for r in 0..nrows {
                    for k in cols.clone() {
                        let block = &raw[r * row_bytes + k / 32 * l.bytes..][..l.bytes];
                        let (d, v) = ggml_value(format, block, k % 32);
                        let kk = k - cols.start;
                        let word = q[kk / t.pack() * nrows + r];
                        let code = (word >> (t.bits as usize * (kk % t.pack()))) & ((1 << t.bits) - 1);
                        assert_eq!(code as i32 - (1 << (t.bits - 1)), v, "{format:?} row {r} col {k}");
                        assert_eq!(s[kk / t.group * nrows + r], d);
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
    }
}
