//! Inputs for the criterion benchmarks: valid, deterministic, realistic.

use weightstream_format::{BlockFormat, ScaleKind, ScaleLayout};

/// Deterministic pseudo-random bytes (xorshift64), shared with the tests.
pub use weightstream_io::testing::random_bytes as bytes;

/// Blocks of format `f` for `n_elems` elements: random quants, every f16
/// field (d, dmin, m) 0.1.
pub fn quant_blocks(n_elems: usize, f: BlockFormat) -> Vec<u8> {
    let l = f.layout();
    let mut v = bytes(n_elems / l.elems * l.bytes, 7);
    for b in v.chunks_exact_mut(l.bytes) {
        for o in l.f16_fields() {
            b[o..o + 2].copy_from_slice(&0x2E66u16.to_le_bytes());
        }
    }
    v
}

/// FP8 codes without NaNs.
pub fn fp8_codes(n: usize) -> Vec<u8> {
    bytes(n, 11).into_iter().map(|b| if b & 0x7F == 0x7F { b ^ 1 } else { b }).collect()
}

/// A 128x128 block-scale layout for a `[rows, cols]` matrix, and its scales.
pub fn block_scales(rows: u64, cols: u64) -> (ScaleLayout, Vec<f32>) {
    let l = ScaleLayout {
        kind: ScaleKind::Block,
        block_rows: 128,
        block_cols: 128,
        grid_rows: rows.div_ceil(128),
        grid_cols: cols.div_ceil(128),
    };
    let v = (0..l.grid_rows * l.grid_cols).map(|i| 1.0 + i as f32 / 1024.0).collect();
    (l, v)
}
