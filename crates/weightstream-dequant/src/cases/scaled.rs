//! FP8, E2M1 and integer cases: matrices, scale layouts, chunks.

use weightstream_blocks::{Encoding, Fp8Format, ScaleKind, ScaleLayout};

use super::{Case, Draw, Size};

fn per_tensor(rows: u64, cols: u64) -> ScaleLayout {
    ScaleLayout { kind: ScaleKind::PerTensor, block_rows: rows, block_cols: cols, grid_rows: 1, grid_cols: 1 }
}

fn per_channel(rows: u64, cols: u64) -> ScaleLayout {
    ScaleLayout { kind: ScaleKind::PerChannel, block_rows: 1, block_cols: cols, grid_rows: rows, grid_cols: 1 }
}

fn blocks_of(rows: u64, cols: u64, br: u64, bc: u64, kind: ScaleKind) -> ScaleLayout {
    ScaleLayout { kind, block_rows: br, block_cols: bc, grid_rows: rows.div_ceil(br), grid_cols: cols.div_ceil(bc) }
}

/// `n` scale values: `edges` first, then from `ordinary`.
fn values(n: usize, edges: &[f32], mut ordinary: impl FnMut() -> f32) -> Vec<f32> {
    (0..n).map(|i| edges.get(i).copied().unwrap_or_else(&mut ordinary)).collect()
}

/// A matrix's bytes: every byte value first (so every code occurs), then random.
fn weights(draw: &mut Draw, nbytes: usize) -> Vec<u8> {
    let mut w: Vec<u8> = (0..=255u8).cycle().take(nbytes.min(256)).collect();
    w.extend(draw.bytes(nbytes - w.len()));
    w
}

/// FP8 (E4M3, E5M2) under per-tensor, per-channel and block scales (128 x
/// 128, 1 x 32, 3 x 5), scaled and unscaled, whole matrices and chunks
/// starting anywhere; and scales around the magnitude below which products
/// may be f32 subnormals (where AVX-512 leaves `vcvtne2ps2bf16`).
pub(super) fn fp8_cases(size: Size, draw: &mut Draw) -> Vec<Case> {
    let edges = [1.0f32, 0.0, -0.5, 1e-40, 3e38, f32::INFINITY, f32::NAN, 2f32.powi(-127), 448.0];
    let mut shapes = vec![(1u64, 1u64), (3, 17), (130, 260), (257, 129), (128, 256)];
    if size == Size::Device {
        shapes.push((1024, 4096));
    }
    let mut cases = Vec::new();
    for (rows, cols) in shapes {
        let total = (rows * cols) as usize;
        let w = weights(draw, total);
        let layouts = [
            per_tensor(rows, cols),
            per_channel(rows, cols),
            blocks_of(rows, cols, 128, 128, ScaleKind::Block),
            blocks_of(rows, cols, 1, 32, ScaleKind::Block),
            blocks_of(rows, cols, 3, 5, ScaleKind::Block),
        ];
        for layout in layouts {
            let n = (layout.grid_rows * layout.grid_cols) as usize;
            let v = values(n, &edges, || f32::from_bits(0x3A00_0000 + (draw.u64() as u32 & 0x00FF_FFFF)));
            for format in [Fp8Format::E4M3, Fp8Format::E5M2] {
                for scaled in [true, false] {
                    if !scaled && layout.kind != ScaleKind::PerTensor {
                        continue; // unscaled once per matrix
                    }
                    for (a, b) in draw.ranges(total, 1, 6) {
                        cases.push(Case {
                            name: format!("{format:?} {rows}x{cols} {} scaled={scaled} [{a},{b})", layout.describe()),
                            encoding: Encoding::Fp8(format),
                            rows,
                            cols,
                            first: a as u64,
                            n: b - a,
                            src: w[a..b].to_vec(),
                            scales: scaled.then(|| (v.clone(), layout)),
                            zeros: None,
                            round_f16: false,
                        });
                    }
                }
            }
        }
    }
    let src: Vec<u8> = (0..=255u8).cycle().take(256 * 3 + 17).collect();
    let n = src.len() as u64;
    for e in [-90i32, -99, -100, -101, -110, -116, -117, -118, -126, -127, -140, -149] {
        for scale in [1.0f32, -1.0, 1.75, -1.75].map(|m| m * 2f32.powi(e)) {
            for format in [Fp8Format::E4M3, Fp8Format::E5M2] {
                cases.push(Case {
                    name: format!("{format:?} scale {scale:e}"),
                    encoding: Encoding::Fp8(format),
                    rows: 1,
                    cols: n,
                    first: 0,
                    n: n as usize,
                    src: src.clone(),
                    scales: Some((vec![scale], per_tensor(1, n))),
                    zeros: None,
                    round_f16: false,
                });
            }
        }
    }
    cases
}

/// Group scales for the packed formats: zero, signed, subnormal products,
/// F16 overflow, infinities, NaN, the E8M0 extremes, then alternately any
/// positive f32 bit pattern and ordinary values.
const PACKED_EDGES: [f32; 17] = [
    0.0,
    -0.0,
    -0.75,
    1e-40,
    2.938_736e-39, // 2^-127
    3e-8,
    6.1e-5,
    65504.0,
    300.0,
    3e38,
    f32::INFINITY,
    f32::NEG_INFINITY,
    f32::NAN,
    1.0,
    -0.5,
    2688.0,
    1.701_411_8e38, // 2^127
];

fn packed_value(draw: &mut Draw, i: usize) -> f32 {
    if i % 2 == 0 {
        f32::from_bits(draw.u64() as u32 & 0x7FFF_FFFF)
    } else {
        (draw.below(40000)) as f32 / 8192.0 - 2.0
    }
}

/// E2M1 pairs in groups of 16 and 32: every code, edge scales, odd row
/// counts, chunks starting on any pair.
pub(super) fn e2m1_cases(size: Size, draw: &mut Draw) -> Vec<Case> {
    let mut shapes = vec![(1u64, 16u64), (1, 32), (3, 48), (5, 96), (17, 160), (33, 512)];
    if size == Size::Device {
        shapes.push((1024, 4096));
    }
    let mut cases = Vec::new();
    for (rows, cols) in shapes {
        let total = (rows * cols) as usize;
        let w = weights(draw, total / 2);
        for group in [16u64, 32].into_iter().filter(|g| cols % g == 0) {
            let layout = ScaleLayout { kind: ScaleKind::Group, block_rows: 1, block_cols: group, grid_rows: rows, grid_cols: cols / group };
            let mut i = 0;
            let v = values((rows * cols / group) as usize, &PACKED_EDGES, || {
                i += 1;
                packed_value(draw, i)
            });
            for (a, b) in draw.ranges(total, 2, 6) {
                cases.push(Case {
                    name: format!("E2M1 {rows}x{cols} groups of {group} [{a},{b})"),
                    encoding: Encoding::E2m1,
                    rows,
                    cols,
                    first: a as u64,
                    n: b - a,
                    src: w[a / 2..b / 2].to_vec(),
                    scales: Some((v.clone(), layout)),
                    zeros: None,
                    round_f16: false,
                });
            }
        }
    }
    cases
}

/// INT4 and INT8 packs: group (8, 32, 128 where they fit whole words),
/// channel and per-tensor scales, with and without zero points and F16
/// rounding, chunks starting on any word.
pub(super) fn int_cases(size: Size, draw: &mut Draw) -> Vec<Case> {
    let mut cases = Vec::new();
    for bits in [4u8, 8] {
        let per_word = 32 / bits as usize;
        let mut shapes = vec![(1u64, 32u64), (3, 64), (5, 64), (9, 384), (17, 256)];
        if size == Size::Device {
            shapes.extend([(65, 512), (1024, 4096)]);
        }
        for (rows, cols) in shapes {
            let total = (rows * cols) as usize;
            let nbytes = total * bits as usize / 8;
            let w = weights(draw, nbytes);
            let mut layouts = vec![per_channel(rows, cols), per_tensor(rows, cols)];
            for group in [8u64, 32, 128] {
                if cols % group == 0 && group as usize % per_word == 0 {
                    layouts.push(ScaleLayout {
                        kind: ScaleKind::Group,
                        block_rows: 1,
                        block_cols: group,
                        grid_rows: rows,
                        grid_cols: cols / group,
                    });
                }
            }
            for layout in layouts {
                let ns = (layout.grid_rows * layout.grid_cols) as usize;
                let v = values(ns, &PACKED_EDGES, || draw.below(40000) as f32 / 8192.0 - 2.0);
                let half = 1i64 << (bits - 1);
                let zeros: Vec<f32> = (0..ns).map(|_| (draw.below(2 * half as u64) as i64 - half) as f32).collect();
                for (with_zeros, round_f16) in [(false, false), (true, false), (false, true), (true, true)] {
                    for (a, b) in draw.ranges(total, per_word, 4) {
                        let (sa, sb) = (a * bits as usize / 8, b * bits as usize / 8);
                        cases.push(Case {
                            name: format!("INT{bits} {rows}x{cols} {} zeros={with_zeros} f16={round_f16} [{a},{b})", layout.describe()),
                            encoding: Encoding::Int { bits },
                            rows,
                            cols,
                            first: a as u64,
                            n: b - a,
                            src: w[sa..sb].to_vec(),
                            scales: Some((v.clone(), layout)),
                            zeros: with_zeros.then(|| zeros.clone()),
                            round_f16,
                        });
                    }
                }
            }
        }
    }
    cases
}
