//! The FP4 layouts of compressed-tensors' `nvfp4-pack-quantized` and
//! `mxfp4-pack-quantized` checkpoints (vLLM's `CompressedTensorsW4A4Fp4`
//! with weight-only activations and `CompressedTensorsW4A4Mxfp4`, Marlin
//! on GPUs without native FP4): `weight_packed` uint8 `[out, in / 2]`,
//! input features `2i` and `2i + 1` of a row in the low and high nibble of
//! byte `i` (compressed-tensors' `pack_fp4_to_uint8`); `weight_scale`
//! uint8 `[out, in / group]` (E4M3FN bits for NVFP4, group 16, with a
//! `weight_global_scale` of 1; E8M0 exponents for MXFP4, group 32).
//!
//! ggml's MXFP4 and NVFP4 blocks hold the same E2M1 codes (its table is
//! the E2M1 values doubled, `E2M1_DOUBLED`, and its scales halved: the
//! products are the same). So every nibble moves unchanged but one, only
//! its position within the group changes: code 8 is 0 in ggml's integer
//! table and -0.0 in E2M1, so it moves as code 0 (+0.0). The scale byte
//! moves as is
//! (MXFP4: `2^(e - 128) * 2v = 2^(e - 127) * v`) or with its ignored sign
//! bit cleared (NVFP4's unsigned E4M3). Two scale bytes have no exact
//! image, and are refused rather than moved wrong: MXFP4's exponent 255
//! (ggml: 2^127; E8M0: NaN) and NVFP4's 0xFF (ggml: 480, past E4M3FN's
//! 448). NVFP4's 0x7F is 0 to ggml and NaN in E4M3FN: it moves as 0x00.

use std::ops::Range;

use rayon::prelude::*;
use weightstream_blocks::block::{mxfp4, nvfp4};
use weightstream_blocks::BlockFormat;

/// The FP4 layout a block format maps onto exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fp4Target {
    /// Input features per scale: 32 (MXFP4, E8M0) or 16 (NVFP4, E4M3FN).
    pub group: usize,
}

/// The exact FP4 target of `format`, if it has one.
pub fn target(format: BlockFormat) -> Option<Fp4Target> {
    match format {
        BlockFormat::MXFP4 => Some(Fp4Target { group: 32 }),
        BlockFormat::NVFP4 => Some(Fp4Target { group: 16 }),
        _ => None,
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Fp4Error {
    #[error("{0:?} has no exact FP4 layout (MXFP4 and NVFP4 have)")]
    NoTarget(BlockFormat),
    #[error("columns {cols:?} of {ncols}: an FP4 slice starts and ends on a group of {group}")]
    Columns { cols: Range<usize>, ncols: usize, group: usize },
    #[error("buffer sizes: {what} holds {got} bytes, {want} needed")]
    Size { what: &'static str, got: usize, want: usize },
    /// A scale byte without an exact image (see the module notes), at
    /// byte `at` of the rows given.
    #[error("scale byte 0x{byte:02X} at byte {at} of the rows has no exact {layout} image ({why})")]
    Scale { byte: u8, at: usize, layout: &'static str, why: &'static str },
}

/// The layout's scale byte for ggml's `byte`, or why there is none.
pub fn scale_byte(format: BlockFormat, byte: u8) -> Result<u8, &'static str> {
    match (format, byte) {
        (BlockFormat::MXFP4, 0xFF) => Err("ggml reads 2^127, E8M0 reads NaN"),
        (BlockFormat::MXFP4, e) => Ok(e),
        (BlockFormat::NVFP4, 0xFF) => Err("ggml reads 480, past E4M3FN's largest"),
        (BlockFormat::NVFP4, 0x7F) => Ok(0),
        (_, x) => Ok(x & 0x7F),
    }
}

/// Check every scale byte of `raw` (blocks of `format` back to back) has
/// an exact image, before anything moves: the first that does not, with
/// its byte offset in `raw`.
pub fn check_scales(format: BlockFormat, raw: &[u8]) -> Result<(), Fp4Error> {
    let l = format.layout();
    let (at, n, layout) = match format {
        BlockFormat::MXFP4 => (mxfp4::E, 1, "E8M0"),
        BlockFormat::NVFP4 => (nvfp4::D, 4, "E4M3FN"),
        other => return Err(Fp4Error::NoTarget(other)),
    };
    for (b, block) in raw.chunks_exact(l.bytes).enumerate() {
        for (k, &byte) in block[at..at + n].iter().enumerate() {
            if let Err(why) = scale_byte(format, byte) {
                return Err(Fp4Error::Scale { byte, at: b * l.bytes + at + k, layout, why });
            }
        }
    }
    Ok(())
}

/// The E2M1 code of element `e` of a block, and the block's scale byte
/// for it (ggml's layouts: MXFP4's 32 elements are the low then the high
/// nibbles of 16 bytes; NVFP4's four sub-blocks of 16 each a scale and 8
/// bytes, low then high nibbles).
fn code(format: BlockFormat, block: &[u8], e: usize) -> u8 {
    let (qs, j) = match format {
        BlockFormat::MXFP4 => (&block[mxfp4::QS..mxfp4::QS + 16], e),
        _ => (&block[nvfp4::QS + 8 * (e / 16)..nvfp4::QS + 8 * (e / 16) + 8], e % 16),
    };
    let half = qs.len();
    match (qs[j % half] >> (4 * (j / half))) & 0x0F {
        8 => 0, // ggml's +0, not E2M1's -0
        c => c,
    }
}

fn raw_scale(format: BlockFormat, block: &[u8], e: usize) -> u8 {
    match format {
        BlockFormat::MXFP4 => block[mxfp4::E],
        _ => block[nvfp4::D + e / 16],
    }
}

/// Repack `nrows` stored rows (`raw`: rows of `ncols` elements back to
/// back) cut to input features `cols` (whole groups) into `packed`
/// (`[nrows, cols.len() / 2]`) and `scales` (`[nrows, cols.len() /
/// group]`). Scale bytes are checked first ([`check_scales`]). Rows are
/// independent: split across threads by row.
pub fn repack(
    format: BlockFormat,
    raw: &[u8],
    nrows: usize,
    ncols: usize,
    cols: Range<usize>,
    packed: &mut [u8],
    scales: &mut [u8],
) -> Result<(), Fp4Error> {
    let t = target(format).ok_or(Fp4Error::NoTarget(format))?;
    let l = format.layout();
    if !crate::whole_groups(&cols, ncols, t.group, l.elems) {
        return Err(Fp4Error::Columns { cols, ncols, group: t.group });
    }
    let row_bytes = ncols / l.elems * l.bytes;
    let (width, groups) = (cols.len() / 2, cols.len() / t.group);
    if let Some((what, got, want)) = crate::wrong_size([
        ("raw", raw.len(), nrows * row_bytes),
        ("packed", packed.len(), nrows * width),
        ("scales", scales.len(), nrows * groups),
    ]) {
        return Err(Fp4Error::Size { what, got, want });
    }
    check_scales(format, raw)?;
    if width == 0 {
        return Ok(());
    }
    packed.par_chunks_mut(width).zip(scales.par_chunks_mut(groups.max(1))).enumerate().for_each(|(r, (out, sc))| {
        let row = &raw[r * row_bytes..][..row_bytes];
        let block = |k: usize| &row[k / l.elems * l.bytes..][..l.bytes];
        for (i, byte) in out.iter_mut().enumerate() {
            let k = cols.start + 2 * i;
            *byte = code(format, block(k), k % l.elems) | code(format, block(k + 1), (k + 1) % l.elems) << 4;
        }
        for (g, s) in sc.iter_mut().enumerate() {
            let k = cols.start + g * t.group;
            *s = scale_byte(format, raw_scale(format, block(k), k % l.elems)).expect("checked above");
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use weightstream_blocks::block_tables::E2M1_DOUBLED;
    use weightstream_dequant::numerics::f32_to_bf16;
    use weightstream_dequant::scalar::block_kernel;
    use weightstream_io::testing::random_bytes;

    /// Random blocks, their scale bytes every one with an image (the 0xFF
    /// refusals are tested on their own).
    fn blocks(format: BlockFormat, n: usize, seed: u64) -> Vec<u8> {
        let l = format.layout();
        let mut raw = random_bytes(n * l.bytes, seed);
        let (at, k) = if format == BlockFormat::MXFP4 { (mxfp4::E, 1) } else { (nvfp4::D, 4) };
        for b in raw.chunks_exact_mut(l.bytes) {
            b[at..at + k].iter_mut().filter(|x| **x == 0xFF).for_each(|x| *x = 0x7F);
        }
        raw
    }

    /// The value of an E2M1 code (code 8: -0.0) times a layout scale byte,
    /// as vLLM reads them (E8M0: 2^(e - 127); E4M3FN, never NaN here),
    /// rounded to BF16.
    fn value(format: BlockFormat, code: u8, scale: u8) -> u16 {
        let s = if format == BlockFormat::MXFP4 {
            f32::from_bits(if scale == 0 { 0x0040_0000 } else { (scale as u32) << 23 })
        } else {
            let (e, m) = ((scale >> 3) as i32, (scale & 7) as f32);
            if e == 0 {
                m * 2f32.powi(-9)
            } else {
                (1.0 + m / 8.0) * 2f32.powi(e - 7)
            }
        };
        let v = if code == 8 { -0.0 } else { E2M1_DOUBLED[code as usize] as f32 / 2.0 };
        f32_to_bf16(s * v)
    }

    /// Every element's value from the packed code and its scale, as vLLM
    /// reads them, is the dequant crate's scalar kernel's BF16 for that
    /// element (those are checked against gguf-py elsewhere).
    #[test]
    fn every_element_keeps_its_value() {
        for format in [BlockFormat::MXFP4, BlockFormat::NVFP4] {
            let (t, l) = (target(format).unwrap(), format.layout());
            let ncols = 3 * l.elems;
            for (nrows, cols) in [(3usize, 0..ncols), (5, t.group..ncols - t.group), (1, 0..t.group), (4, ncols..ncols)] {
                let raw = blocks(format, nrows * ncols / l.elems, (nrows * 7 + cols.start) as u64);
                let mut want = vec![0u16; nrows * ncols];
                block_kernel::<weightstream_dequant::Bf16Out>(format)(&raw, &mut want);
                let (w, g) = (cols.len() / 2, cols.len() / t.group);
                let (mut p, mut s) = (vec![0xA5; nrows * w], vec![0xA5; nrows * g]);
                repack(format, &raw, nrows, ncols, cols.clone(), &mut p, &mut s).unwrap();
                for r in 0..nrows {
                    for k in cols.clone() {
                        let kk = k - cols.start;
                        let code = (p[r * w + kk / 2] >> (4 * (kk % 2))) & 0x0F;
                        let got = value(format, code, s[r * g + kk / t.group]);
                        assert_eq!(got, want[r * ncols + k], "{format:?} row {r} col {k}: code {code}");
                    }
                }
            }
        }
    }

    #[test]
    fn scales_without_an_image_and_bad_sizes_are_refused() {
        let mut raw = vec![0u8; 2 * 17];
        raw[17 + mxfp4::E] = 0xFF;
        let (mut p, mut s) = (vec![0; 32], vec![0; 2]);
        let e = repack(BlockFormat::MXFP4, &raw, 2, 32, 0..32, &mut p, &mut s).unwrap_err();
        assert_eq!(e, Fp4Error::Scale { byte: 0xFF, at: 17, layout: "E8M0", why: "ggml reads 2^127, E8M0 reads NaN" });
        let mut raw = vec![0x38u8; 36];
        raw[nvfp4::D + 2] = 0xFF;
        let (mut p, mut s) = (vec![0; 32], vec![0; 4]);
        assert!(matches!(repack(BlockFormat::NVFP4, &raw, 1, 64, 0..64, &mut p, &mut s), Err(Fp4Error::Scale { at: 2, .. })));
        // 0x7F (0 to ggml) moves as 0; a set sign bit is cleared.
        raw[nvfp4::D + 2] = 0x7F;
        raw[nvfp4::D + 3] = 0xB8;
        repack(BlockFormat::NVFP4, &raw, 1, 64, 0..64, &mut p, &mut s).unwrap();
        assert_eq!(s, [0x38, 0x38, 0x00, 0x38]);
        assert_eq!(repack(BlockFormat::Q4_0, &raw, 1, 32, 0..32, &mut p, &mut s), Err(Fp4Error::NoTarget(BlockFormat::Q4_0)));
        assert!(matches!(repack(BlockFormat::NVFP4, &raw, 1, 64, 0..8, &mut p, &mut s), Err(Fp4Error::Columns { .. })));
        assert!(matches!(repack(BlockFormat::NVFP4, &raw, 1, 64, 0..64, &mut p[1..], &mut s), Err(Fp4Error::Size { what: "packed", .. })));
    }
}
