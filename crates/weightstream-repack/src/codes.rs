//! Each block format's integer codes in element order, as GPTQ codes
//! (`value = d * (code - 2^(bits-1))`), from ggml's layouts
//! (ggml-quants.c `dequantize_row_*`; the field offsets are
//! weightstream-blocks'). Only formats whose every value is `d` times a
//! small integer have one: the table in `gptq.rs`.

use weightstream_blocks::block::{iq4_nl, q1_0, q2_0, q4_0, q5_0, q8_0, tq1_0, tq2_0};
use weightstream_blocks::block_tables::IQ4NL_VALUES;
use weightstream_blocks::BlockFormat;

/// Nibble `j` of a 32-element block's 16 bytes: low nibbles are elements
/// 0..16, high nibbles 16..32 (Q4_0, Q5_0, IQ4_NL).
fn nibble(qs: &[u8], j: usize) -> u8 {
    if j < 16 {
        qs[j] & 0x0F
    } else {
        qs[j - 16] >> 4
    }
}

/// TQ1_0's base-3 digit `k` of `byte` (ggml: `(byte * 3^k mod 256) * 3 >> 8`).
fn trit(byte: u8, k: usize) -> u8 {
    const POW3: [u8; 5] = [1, 3, 9, 27, 81];
    ((byte.wrapping_mul(POW3[k]) as u16 * 3) >> 8) as u8
}

/// The GPTQ codes of every element of `block` into `codes` (the block's
/// element count), biased for `bits` = 4 (uint4b8: + 8) or 8 (uint8b128:
/// + 128) as the table in `gptq.rs` pairs them.
pub(crate) fn block_codes(format: BlockFormat, block: &[u8], codes: &mut [u8]) {
    match format {
        // d * (q - 8): the nibble is the uint4b8 code.
        BlockFormat::Q4_0 => codes.iter_mut().enumerate().for_each(|(j, c)| *c = nibble(&block[q4_0::QS..], j)),
        // d * q, q int8: + 128 is the sign bit flipped.
        BlockFormat::Q8_0 => codes.iter_mut().zip(&block[q8_0::QS..q8_0::BYTES]).for_each(|(c, &q)| *c = q ^ 0x80),
        // d * (q - 16), q five bits (bit 4 of element j: bit j of qh).
        BlockFormat::Q5_0 => {
            let qh = u32::from_le_bytes(block[q5_0::QH..q5_0::QH + 4].try_into().expect("4 bytes"));
            for (j, c) in codes.iter_mut().enumerate() {
                let q = nibble(&block[q5_0::QS..], j) | (((qh >> j) & 1) as u8) << 4;
                *c = q + 112;
            }
        }
        // d * IQ4NL_VALUES[q]: int8 levels, + 128.
        BlockFormat::IQ4_NL => {
            for (j, c) in codes.iter_mut().enumerate() {
                *c = (IQ4NL_VALUES[nibble(&block[iq4_nl::QS..], j) as usize] as i16 + 128) as u8;
            }
        }
        // d where bit j % 8 of qs[j / 8] is set, else -d: codes 9 and 7.
        BlockFormat::Q1_0 => {
            codes.iter_mut().enumerate().for_each(|(j, c)| *c = if (block[q1_0::QS + j / 8] >> (j % 8)) & 1 == 1 { 9 } else { 7 })
        }
        // d * (q - 1), q bits 2(j % 4) of qs[j / 4]: code q - 1 + 8.
        BlockFormat::Q2_0 => codes.iter_mut().enumerate().for_each(|(j, c)| *c = ((block[q2_0::QS + j / 4] >> (2 * (j % 4))) & 3) + 7),
        // d * (q - 1), laid out as Q2_K's 2-bit values: element e is crumb
        // (e % 128) / 32 of qs[32 * (e / 128) + e % 32].
        BlockFormat::TQ2_0 => codes
            .iter_mut()
            .enumerate()
            .for_each(|(e, c)| *c = ((block[tq2_0::QS + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3) + 7),
        // d * (t - 1), t base-3 digits: elements 0..160 digit e / 32 of
        // qs[e % 32]; 160..240 digit (e - 160) / 16 of qs[32 + (e - 160) %
        // 16]; 240..256 digit (e - 240) / 4 of qh[(e - 240) % 4].
        BlockFormat::TQ1_0 => codes.iter_mut().enumerate().for_each(|(e, c)| {
            let (byte, k) = match e {
                0..160 => (block[tq1_0::QS + e % 32], e / 32),
                160..240 => (block[tq1_0::QS + 32 + (e - 160) % 16], (e - 160) / 16),
                _ => (block[tq1_0::QH + (e - 240) % 4], (e - 240) / 4),
            };
            *c = trit(byte, k) + 7
        }),
        _ => unreachable!("gptq::target admits only the formats above"),
    }
}

/// The block's fp16 `d` (bits).
pub(crate) fn block_scale(format: BlockFormat, block: &[u8]) -> u16 {
    let at = format.layout().field("D").expect("every format with a GPTQ target has a d").0;
    u16::from_le_bytes([block[at], block[at + 1]])
}
