//! The CUDA kernel sources, compiled for the host and run over their
//! complete launch grids, produce the CPU kernels' bits: random and
//! edge-case inputs, odd sizes and tails, several launch geometries (a full
//! grid and small ones that make every thread stride), outputs poisoned
//! first so an unwritten element shows, and a guard region after the end
//! so a write past it shows.

use weightstream_blocks::block::UE4M3_EDGES;
use weightstream_blocks::{BlockFormat, Fp8Format, ScaleKind, ScaleLayout};
use weightstream_dequant::{dequantize, Isa, Kernel, ScaleGrid};
use weightstream_kernels::{geometry, host_grid, Element, Launch, ScaledArgs, BLOCK_DIM};

const POISON: u16 = 0xBEEF;
const GUARD: usize = 37;

use weightstream_io::testing::SeededRng as Rng;

/// Geometries: the executor's own, and small grids that make threads stride.
fn geometries(groups: u64) -> Vec<(u32, u32)> {
    vec![geometry(groups, 1 << 20), (1, 32), (3, 64), (2, BLOCK_DIM), (7, 33)]
}

fn check(name: &str, launch: &Launch, src: &[u8], n: usize, scales: Option<&[f32]>, want: &[u16]) {
    check_zeros(name, launch, src, n, scales, None, want)
}

/// `check` with an integer pack's zero points.
fn check_zeros(name: &str, launch: &Launch, src: &[u8], n: usize, scales: Option<&[f32]>, zeros: Option<&[f32]>, want: &[u16]) {
    for (g, b) in geometries(launch.groups(n as u64)) {
        let mut out = vec![POISON; n + GUARD];
        host_grid::run(launch, src, &mut out, n as u64, scales, zeros, g, b).unwrap();
        if let Some(i) = (0..n).find(|&i| out[i] != want[i]) {
            panic!("{name} grid {g}x{b}: element {i} is {:#06x}, CPU kernel gives {:#06x}", out[i], want[i]);
        }
        assert!(out[n..].iter().all(|&v| v == POISON), "{name} grid {g}x{b}: wrote past the end");
    }
}

fn cpu(kernel: &Kernel, first: u64, src: &[u8], n: usize) -> Vec<u16> {
    let mut out = vec![0u16; n];
    dequantize(kernel, first, src, &mut out, Isa::Scalar).unwrap();
    out
}

const F16_EDGES: &[u16] = &[0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0xFE01, 0x3C00, 0x2E66];

/// Blocks of format `f`: every f16 edge value in each of its f16 fields
/// (`BlockLayout::edge_blocks`), then `random_blocks` random blocks.
fn block_source(rng: &mut Rng, f: BlockFormat, random_blocks: usize) -> Vec<u8> {
    let l = f.layout();
    let mut src = l.edge_blocks(F16_EDGES);
    src.extend(rng.bytes(random_blocks * l.bytes));
    src
}

#[test]
fn every_block_format() {
    let mut rng = Rng::from_env("every_block_format");
    for &f in BlockFormat::ALL {
        let l = f.layout();
        let (launch, kernel) = (Launch::Block(f), Kernel::Block(f));
        for random in [0usize, 1, 5, 131] {
            let src = block_source(&mut rng, f, random);
            let n = src.len() / l.bytes * l.elems;
            check(&format!("{launch:?} +{random}"), &launch, &src, n, None, &cpu(&kernel, 0, &src, n));
        }
        // A single block, and three.
        for blocks in [1usize, 3] {
            let src = rng.bytes(blocks * l.bytes);
            let n = blocks * l.elems;
            check(&format!("{launch:?} {blocks} block(s)"), &launch, &src, n, None, &cpu(&kernel, 0, &src, n));
        }
        // Not a whole number of blocks: refused before any thread runs.
        let mut out = vec![0u16; l.elems];
        assert!(host_grid::run(&launch, &vec![0u8; l.bytes], &mut out, (l.elems - 8) as u64, None, None, 1, 32).is_err(), "{}", l.name);
    }
}

#[test]
fn f32_and_f16_with_tails() {
    let mut rng = Rng::from_env("f32_and_f16_with_tails");
    let edges: Vec<u8> = [
        0u32,
        0x8000_0000,
        1,
        0x007F_FFFF,
        0x0080_0000,
        0x7F7F_FFFF,
        0x7F80_0000,
        0xFF80_0000,
        0x7FC0_0000,
        0xFFC0_0001,
        0x7F80_0001,
        0x3F80_8000,
        0x3F81_8000,
    ]
    .iter()
    .flat_map(|b| b.to_le_bytes())
    .collect();
    for n in [0usize, 1, 7, 8, 9, 13, 64, 1001] {
        let mut src = edges.clone();
        src.extend(rng.bytes(n * 4));
        src.truncate(n * 4);
        check(&format!("F32 n={n}"), &Launch::F32, &src, n, None, &cpu(&Kernel::F32, 0, &src, n));
    }
    let all: Vec<u8> = (0..=u16::MAX).flat_map(|h| h.to_le_bytes()).collect();
    check("F16 every value", &Launch::F16, &all, 65536, None, &cpu(&Kernel::F16, 0, &all, 65536));
    for n in [1usize, 5, 15, 17] {
        let src = rng.bytes(n * 2);
        check(&format!("F16 n={n}"), &Launch::F16, &src, n, None, &cpu(&Kernel::F16, 0, &src, n));
    }
}

#[test]
fn fp8_every_layout_chunk_and_code() {
    let mut rng = Rng::from_env("fp8_every_layout_chunk_and_code");
    let scale_edges = [1.0f32, 0.0, -0.5, 1e-40, 2f32.powi(-127), 3e38, f32::INFINITY, f32::NAN, 448.0];
    for (rows, cols) in [(1u64, 1u64), (3, 17), (130, 260), (257, 129), (128, 256)] {
        let total = (rows * cols) as usize;
        let mut w: Vec<u8> = (0..=255u8).cycle().take(total.min(256)).collect();
        w.extend(rng.bytes(total - w.len()));
        let layouts = [
            ScaleLayout { kind: ScaleKind::PerTensor, block_rows: rows, block_cols: cols, grid_rows: 1, grid_cols: 1 },
            ScaleLayout { kind: ScaleKind::PerChannel, block_rows: 1, block_cols: cols, grid_rows: rows, grid_cols: 1 },
            ScaleLayout {
                kind: ScaleKind::Block,
                block_rows: 128,
                block_cols: 128,
                grid_rows: rows.div_ceil(128),
                grid_cols: cols.div_ceil(128),
            },
            ScaleLayout { kind: ScaleKind::Block, block_rows: 3, block_cols: 5, grid_rows: rows.div_ceil(3), grid_cols: cols.div_ceil(5) },
        ];
        for layout in layouts {
            let nscales = (layout.grid_rows * layout.grid_cols) as usize;
            let values: Vec<f32> = (0..nscales)
                .map(|i| scale_edges.get(i).copied().unwrap_or_else(|| 0.25 + (rng.next_u64() % 1000) as f32 / 256.0))
                .collect();
            let grid = ScaleGrid::new(&values, &layout, rows, cols).unwrap();
            for (format, element) in [(Fp8Format::E4M3, Element::E4m3), (Fp8Format::E5M2, Element::E5m2)] {
                for scaled in [true, false] {
                    let kernel = Kernel::Fp8 { format, rows, cols, scales: scaled.then_some(grid) };
                    // The whole matrix, then chunks starting anywhere.
                    let mut ranges = vec![(0usize, total)];
                    for _ in 0..6 {
                        let a = (rng.next_u64() % (total as u64 + 1)) as usize;
                        let b = a + (rng.next_u64() % ((total - a) as u64 + 1)) as usize;
                        ranges.push((a, b));
                    }
                    for (a, b) in ranges {
                        let args = ScaledArgs {
                            element,
                            scales: 0,
                            first: a as u64,
                            cols,
                            block_rows: layout.block_rows,
                            block_cols: layout.block_cols,
                            grid_cols: layout.grid_cols,
                            zeros: 0,
                            round_f16: false,
                        };
                        let want = cpu(&kernel, a as u64, &w[a..b], b - a);
                        let name = format!("{format:?} {rows}x{cols} {:?} scaled={scaled} [{a},{b})", layout.kind);
                        check(&name, &Launch::Scaled(args), &w[a..b], b - a, scaled.then_some(&values[..]), &want);
                    }
                }
            }
        }
    }
}

/// E2M1 pairs with group scales (the 4-bit safetensors schemes): every
/// code in every group, edge scales (zero, negative, subnormal, infinite,
/// NaN, and the E8M0 extremes), groups of 16 and 32, odd row counts, and
/// chunks starting on any pair.
#[test]
fn e2m1_every_code_group_and_chunk() {
    let mut rng = Rng::from_env("e2m1_every_code_group_and_chunk");
    let scale_edges = [1.0f32, 0.0, -0.5, 1e-40, 2f32.powi(-127), 3e38, f32::INFINITY, f32::NAN, 448.0 * 6.0, 2f32.powi(127)];
    for (rows, cols) in [(1u64, 32u64), (3, 64), (5, 96), (17, 160), (64, 512)] {
        let total = (rows * cols) as usize;
        let mut w: Vec<u8> = (0..=255u8).cycle().take((total / 2).min(256)).collect();
        w.extend(rng.bytes(total / 2 - w.len()));
        for group in [16u64, 32] {
            let layout = ScaleLayout { kind: ScaleKind::Group, block_rows: 1, block_cols: group, grid_rows: rows, grid_cols: cols / group };
            let values: Vec<f32> = (0..(rows * cols / group) as usize)
                .map(|i| scale_edges.get(i).copied().unwrap_or_else(|| f32::from_bits(rng.next_u64() as u32 & 0x7FFF_FFFF)))
                .collect();
            let grid = ScaleGrid::new(&values, &layout, rows, cols).unwrap();
            let kernel = Kernel::E2m1 { rows, cols, scales: grid };
            let mut ranges = vec![(0usize, total)];
            for _ in 0..6 {
                let a = (rng.next_u64() % (total as u64 / 2 + 1)) as usize * 2;
                let b = a + (rng.next_u64() % ((total - a) as u64 / 2 + 1)) as usize * 2;
                ranges.push((a, b));
            }
            for (a, b) in ranges {
                let args = ScaledArgs {
                    element: Element::E2m1,
                    scales: 0,
                    first: a as u64,
                    cols,
                    block_rows: 1,
                    block_cols: group,
                    grid_cols: layout.grid_cols,
                    zeros: 0,
                    round_f16: false,
                };
                let want = cpu(&kernel, a as u64, &w[a / 2..b / 2], b - a);
                let name = format!("E2M1 {rows}x{cols} groups of {group} [{a},{b})");
                check(&name, &Launch::Scaled(args), &w[a / 2..b / 2], b - a, Some(&values[..]), &want);
            }
        }
    }
}

/// Packed integers (compressed-tensors pack-quantized): INT4 and INT8,
/// symmetric and with zero points, group, channel and per-tensor scales,
/// F16 rounding on and off, edge scales (F16 overflow and subnormals
/// included), chunks starting on any word.
#[test]
fn int_every_value_layout_and_chunk() {
    let mut rng = Rng::from_env("int_every_value_layout_and_chunk");
    let scale_edges = [1.0f32, 0.0, -0.5, 1e-40, 6.1e-5, 3e-8, 65504.0, 300.0, 3e38, f32::INFINITY, f32::NAN];
    for (bits, element) in [(4u8, Element::Int4), (8, Element::Int8)] {
        for (rows, cols) in [(1u64, 32u64), (3, 64), (17, 256), (65, 512)] {
            let total = (rows * cols) as usize;
            let nbytes = total * bits as usize / 8;
            let mut w: Vec<u8> = (0..=255u8).cycle().take(nbytes.min(256)).collect();
            w.extend(rng.bytes(nbytes - w.len()));
            let layouts = [
                ScaleLayout { kind: ScaleKind::Group, block_rows: 1, block_cols: 32, grid_rows: rows, grid_cols: cols / 32 },
                ScaleLayout { kind: ScaleKind::PerChannel, block_rows: 1, block_cols: cols, grid_rows: rows, grid_cols: 1 },
                ScaleLayout { kind: ScaleKind::PerTensor, block_rows: rows, block_cols: cols, grid_rows: 1, grid_cols: 1 },
            ];
            for layout in layouts {
                let ns = (layout.grid_rows * layout.grid_cols) as usize;
                let values: Vec<f32> = (0..ns)
                    .map(|i| scale_edges.get(i).copied().unwrap_or_else(|| (rng.next_u64() % 20000) as f32 / 4096.0 - 2.0))
                    .collect();
                let half = 1i64 << (bits - 1);
                let zeros: Vec<f32> = (0..ns).map(|_| ((rng.next_u64() % (2 * half as u64)) as i64 - half) as f32).collect();
                for (with_zeros, round_f16) in [(false, false), (true, false), (false, true), (true, true)] {
                    let grid = ScaleGrid::new(&values, &layout, rows, cols).unwrap();
                    let zgrid = with_zeros.then(|| ScaleGrid::new(&zeros, &layout, rows, cols).unwrap());
                    let kernel = Kernel::Int { bits, rows, cols, scales: grid, zeros: zgrid, round_f16 };
                    let per_word = 32 / bits as usize;
                    let mut ranges = vec![(0usize, total)];
                    for _ in 0..4 {
                        let a = (rng.next_u64() % (total / per_word) as u64) as usize * per_word;
                        let b = a + (rng.next_u64() % ((total - a) / per_word + 1) as u64) as usize * per_word;
                        ranges.push((a, b));
                    }
                    for (a, b) in ranges {
                        let (sa, sb) = (a * bits as usize / 8, b * bits as usize / 8);
                        let args = ScaledArgs {
                            element,
                            scales: 0,
                            first: a as u64,
                            cols,
                            block_rows: layout.block_rows,
                            block_cols: layout.block_cols,
                            grid_cols: layout.grid_cols,
                            zeros: 0,
                            round_f16,
                        };
                        let want = cpu(&kernel, a as u64, &w[sa..sb], b - a);
                        let name = format!("INT{bits} {rows}x{cols} {:?} zeros={with_zeros} f16={round_f16} [{a},{b})", layout.kind);
                        let z = with_zeros.then_some(&zeros[..]);
                        check_zeros(&name, &Launch::Scaled(args), &w[sa..sb], b - a, Some(&values[..]), z, &want);
                    }
                }
            }
        }
    }
}

#[test]
fn lengths_are_checked_before_running() {
    let mut out = vec![0u16; 32];
    assert!(host_grid::run(&Launch::Block(BlockFormat::Q4_0), &[0u8; 17], &mut out, 32, None, None, 1, 32).is_err());
    assert!(host_grid::run(&Launch::Block(BlockFormat::Q4_0), &[0u8; 18], &mut out[..31], 32, None, None, 1, 32).is_err());
    assert!(host_grid::run(&Launch::Block(BlockFormat::Q4_0), &[0u8; 18], &mut out, 31, None, None, 1, 32).is_err());
    let a = ScaledArgs {
        element: Element::E4m3,
        scales: 0,
        first: 0,
        cols: 16,
        block_rows: 1,
        block_cols: 16,
        grid_cols: 1,
        zeros: 0,
        round_f16: false,
    };
    assert!(host_grid::run(&Launch::Scaled(a), &[0u8; 32], &mut out, 32, Some(&[1.0]), None, 1, 32).is_err());
    let a = ScaledArgs { element: Element::E2m1, ..a };
    assert!(host_grid::run(&Launch::Scaled(a), &[0u8; 15], &mut out, 32, Some(&[1.0, 1.0]), None, 1, 32).is_err());
}

/// Scales that are not an f16 field, at their edges
/// (`BlockFormat::set_edge_scales`): MXFP4's E8M0 byte (subnormal halves for
/// 0 and 1, the largest at 0xFF), NVFP4's four UE4M3 bytes (0x00 and 0x7F
/// are zero, bit 7 ignored, exponent 0 subnormal), and IQ1_M's f16 d spread
/// over the top nibbles of its four scales (NaN, infinities, subnormals);
/// each in blocks of otherwise random bytes.
#[test]
fn scale_bytes_at_their_edges() {
    let mut rng = Rng::from_env("scale_bytes_at_their_edges");
    for f in [BlockFormat::MXFP4, BlockFormat::NVFP4, BlockFormat::IQ1_M] {
        let l = f.layout();
        let blocks = 3 * F16_EDGES.len().max(UE4M3_EDGES.len());
        let mut src = rng.bytes(blocks * l.bytes);
        for (i, b) in src.chunks_exact_mut(l.bytes).enumerate() {
            assert!(f.set_edge_scales(b, i, F16_EDGES));
        }
        let n = blocks * l.elems;
        let (launch, kernel) = (Launch::Block(f), Kernel::Block(f));
        check(&format!("{launch:?} scale edges"), &launch, &src, n, None, &cpu(&kernel, 0, &src, n));
    }
}

/// Enough random blocks of each IQ grid format that every grid entry is
/// looked up (the largest grid, IQ1_S/IQ1_M's, has 2048 entries and a
/// block draws 32: 1500 blocks miss one with probability about 1e-6).
#[test]
fn grid_formats_over_every_index() {
    let mut rng = Rng::from_env("grid_formats_over_every_index");
    for f in [
        BlockFormat::IQ2_XXS,
        BlockFormat::IQ2_XS,
        BlockFormat::IQ2_S,
        BlockFormat::IQ3_XXS,
        BlockFormat::IQ3_S,
        BlockFormat::IQ1_S,
        BlockFormat::IQ1_M,
    ] {
        let l = f.layout();
        let src = rng.bytes(1500 * l.bytes);
        let n = 1500 * l.elems;
        let (launch, kernel) = (Launch::Block(f), Kernel::Block(f));
        check(&format!("{launch:?} x1500"), &launch, &src, n, None, &cpu(&kernel, 0, &src, n));
    }
}

/// The scaled kernels' division by a launch constant (one multiply-high by
/// the divisor's magic number) is `n / d` exactly: edge divisors and
/// numerators (powers of two and their neighbours, the largest values),
/// then random pairs of every magnitude.
#[test]
fn scale_grid_division_is_exact() {
    let mut rng = Rng::from_env("scale_grid_division_is_exact");
    let mut edges: Vec<u64> = vec![0, 1, 2, 3, 5, 7, 17, 127, 128, 129, 255, 641, 6700417, u64::MAX - 1, u64::MAX];
    for k in 1..64 {
        edges.extend([(1u64 << k) - 1, 1u64 << k, (1u64 << k) + 1]);
    }
    for &d in edges.iter().filter(|&&d| d > 0) {
        for &n in &edges {
            assert_eq!(host_grid::quotient(n, d), n / d, "{n} / {d}");
        }
    }
    for _ in 0..200_000 {
        let (d_bits, n_bits) = (1 + rng.below(64) as u32, 1 + rng.below(64) as u32);
        let d = (rng.next_u64() >> (64 - d_bits)).max(1);
        let n = rng.next_u64() >> (64 - n_bits);
        assert_eq!(host_grid::quotient(n, d), n / d, "{n} / {d}");
    }
}
