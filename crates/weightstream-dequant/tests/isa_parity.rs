//! Every ISA, every chunking and every thread count give the scalar
//! kernels' bits. An ISA this CPU lacks is skipped, and said so on stderr
//! (`cargo test -- --nocapture` shows it).

mod common;

use common::{block_source, Rng, F16_EDGES, F32_EDGES};
use weightstream_blocks::block::{E8M0_EDGES, UE4M3_EDGES};
use weightstream_blocks::{BlockFormat, Fp8Format, ScaleKind, ScaleLayout};
use weightstream_dequant::{dequantize, dequantize_par, numerics, Isa, Kernel, ScaleGrid};

fn run(kernel: &Kernel, first: u64, src: &[u8], n: usize, isa: Isa) -> Vec<u16> {
    let mut out = vec![0xDEADu16; n];
    dequantize(kernel, first, src, &mut out, isa).unwrap();
    out
}

/// Every path this CPU supports (AVX-512 twice where it has AVX512_BF16:
/// `Avx512` with `vcvtne2ps2bf16`, `Avx512Int` without); the ISAs it lacks
/// are reported as skipped.
fn paths() -> Vec<Isa> {
    let mut paths = Vec::new();
    for isa in Isa::ALL {
        if !isa.supported() {
            eprintln!("skipped: this CPU cannot run {} (Isa::{isa:?})", isa.name());
            continue;
        }
        paths.push(isa);
    }
    paths
}

#[test]
fn every_isa_runs_or_is_reported_skipped() {
    let paths = paths();
    for isa in Isa::ALL {
        let ran = paths.contains(&isa);
        eprintln!("{}: {}", isa.name(), if ran { "tested" } else { "SKIPPED (not supported by this CPU)" });
    }
    #[cfg(target_arch = "x86_64")]
    if Isa::Avx512.supported() {
        let bf16 = std::arch::is_x86_feature_detected!("avx512bf16");
        eprintln!(
            "avx512: rounding by {}",
            if bf16 { "vcvtne2ps2bf16 and the integer formula, both tested" } else { "the integer formula (no AVX512_BF16)" }
        );
    }
    assert_eq!(paths[0], Isa::Scalar);
    // Every aarch64 CPU has NEON: its path is never the one skipped.
    #[cfg(target_arch = "aarch64")]
    assert!(Isa::Neon.supported() && Isa::detect() == Isa::Neon);
}

fn assert_isas_agree(what: &str, kernel: &Kernel, src: &[u8], n: usize) {
    let reference = run(kernel, 0, src, n, Isa::Scalar);
    for path in paths() {
        let got = run(kernel, 0, src, n, path);
        if let Some(i) = (0..n).find(|&i| got[i] != reference[i]) {
            panic!("{what}: {} differs from scalar at element {i}: {:#06x} vs {:#06x}", path.name(), got[i], reference[i]);
        }
    }
}

#[test]
fn block_formats_all_isas() {
    let mut rng = Rng::from_env("block_formats_all_isas");
    for &f in BlockFormat::ALL {
        let l = f.layout();
        for random in [0, 1, 3, 200] {
            let src = block_source(&mut rng, f, random);
            assert_isas_agree(l.name, &Kernel::Block(f), &src, src.len() / l.bytes * l.elems);
        }
    }
}

/// The scales that are not f16 fields, at their edges, in otherwise random
/// blocks: MXFP4's E8M0 byte (0x00, 0x01, 0xFF...), NVFP4's UE4M3 bytes
/// (0x00, 0x7F, 0x80, 0xFF...), IQ1_M's split f16 d (NaN, infinities,
/// subnormals). `block_formats_all_isas` puts edges only in f16 fields.
#[test]
fn scale_bytes_at_their_edges() {
    let mut rng = Rng::from_env("scale_bytes_at_their_edges");
    let mut formats = Vec::new();
    for &f in BlockFormat::ALL {
        let l = f.layout();
        let blocks = 3 * F16_EDGES.len().max(E8M0_EDGES.len()).max(UE4M3_EDGES.len()) + 1;
        let mut src = rng.bytes(blocks * l.bytes);
        if src.chunks_exact_mut(l.bytes).enumerate().all(|(i, b)| f.set_edge_scales(b, i, F16_EDGES)) {
            assert_isas_agree(&format!("{} scale edges", l.name), &Kernel::Block(f), &src, blocks * l.elems);
            formats.push(f);
        }
    }
    assert_eq!(formats, [BlockFormat::MXFP4, BlockFormat::NVFP4, BlockFormat::IQ1_M]);
}

/// Enough random blocks of every format that each IQ grid entry is looked
/// up: the largest grid (IQ1_S/IQ1_M, 2048 entries) at 32 draws per block
/// misses one in 1500 blocks with probability about 1e-6.
#[test]
fn every_grid_index_all_isas() {
    let mut rng = Rng::from_env("every_grid_index_all_isas");
    for &f in BlockFormat::ALL {
        let l = f.layout();
        let src = rng.bytes(1500 * l.bytes);
        assert_isas_agree(&format!("{} x1500", l.name), &Kernel::Block(f), &src, 1500 * l.elems);
    }
}

#[test]
fn every_q_value_matches_the_formula() {
    // Q4_0: element j is the low nibble of qs[j], element j + 16 the high nibble.
    let mut src = vec![0u8; 18];
    src[..2].copy_from_slice(&0x3C00u16.to_le_bytes()); // d = 1
    for j in 0..16 {
        src[2 + j] = (j as u8) | ((15 - j as u8) << 4);
    }
    for path in paths() {
        let out = run(&Kernel::Block(BlockFormat::Q4_0), 0, &src, 32, path);
        for j in 0..16 {
            assert_eq!(out[j], numerics::f32_to_bf16(j as f32 - 8.0));
            assert_eq!(out[j + 16], numerics::f32_to_bf16(7.0 - j as f32));
        }
    }
    let mut src = vec![0u8; 34 * 8];
    for b in 0..8 {
        src[b * 34..b * 34 + 2].copy_from_slice(&0x4000u16.to_le_bytes()); // d = 2
        for j in 0..32 {
            src[b * 34 + 2 + j] = (b * 32 + j) as u8;
        }
    }
    for path in paths() {
        let out = run(&Kernel::Block(BlockFormat::Q8_0), 0, &src, 256, path);
        for (v, o) in out.iter().enumerate() {
            assert_eq!(*o, numerics::f32_to_bf16(2.0 * (v as u8 as i8) as f32));
        }
    }
}

#[test]
fn floats_all_isas_with_odd_lengths() {
    let mut rng = Rng::from_env("floats_all_isas_with_odd_lengths");
    let mut f32src: Vec<u8> = F32_EDGES.iter().flat_map(|b| b.to_le_bytes()).collect();
    f32src.extend(rng.bytes(4 * 1001));
    let mut f16src: Vec<u8> = (0..=u16::MAX).flat_map(|h| h.to_le_bytes()).collect();
    f16src.extend(rng.bytes(2 * 37));
    for n in [0, 1, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, F32_EDGES.len() + 1001] {
        assert_isas_agree("F32", &Kernel::F32, &f32src[..4 * n], n);
    }
    for n in [0, 1, 15, 16, 17, 31, 32, 33, 65536 + 37] {
        assert_isas_agree("F16", &Kernel::F16, &f16src[..2 * n], n);
    }
    let bf: Vec<u8> = rng.bytes(2 * 99);
    let out = run(&Kernel::BF16, 0, &bf, 99, Isa::detect());
    assert!(out.iter().enumerate().all(|(i, &v)| v == u16::from_le_bytes([bf[2 * i], bf[2 * i + 1]])));
}

/// One f32 subnormal (or NaN) at every position of a 32-value vector among
/// ordinary values: `vcvtne2ps2bf16` flushes subnormals, which is why the
/// AVX-512 F32 kernel rounds with the integer formula; this holds it to that.
#[test]
fn f32_one_special_value_at_every_lane() {
    let ordinary = 0x3F80_1234u32;
    for special in [0x0000_0001u32, 0x8040_0000, 0x007F_FFFF, 0x0001_8000, 0x7FC0_0001, 0xFF80_0001] {
        for lane in 0..64 {
            let vals: Vec<u32> = (0..64 + 5).map(|i| if i == lane { special } else { ordinary + i as u32 }).collect();
            let src: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
            assert_isas_agree(&format!("F32 {special:#x} at {lane}"), &Kernel::F32, &src, vals.len());
        }
    }
}

/// FP8 scales around the magnitude below which the AVX-512 kernel leaves
/// `vcvtne2ps2bf16` for the integer rounding (products that may be f32
/// subnormals), every code under each.
#[test]
fn fp8_scales_near_the_subnormal_products() {
    let src: Vec<u8> = (0..=255u8).cycle().take(256 * 3 + 17).collect();
    let n = src.len();
    for e in [-90i32, -99, -100, -101, -110, -116, -117, -118, -126, -127, -140, -149] {
        for sign in [1.0f32, -1.0] {
            for m in [1.0f32, 1.75] {
                let scale = sign * m * 2f32.powi(e);
                let layout = ScaleLayout { kind: ScaleKind::PerTensor, block_rows: 1, block_cols: n as u64, grid_rows: 1, grid_cols: 1 };
                let values = [scale];
                let grid = ScaleGrid::new(&values, &layout, 1, n as u64).unwrap();
                for format in [Fp8Format::E4M3, Fp8Format::E5M2] {
                    let k = Kernel::Fp8 { format, rows: 1, cols: n as u64, scales: Some(grid) };
                    assert_isas_agree(&format!("{format:?} scale {scale:e}"), &k, &src, n);
                }
            }
        }
    }
}

fn layouts(rows: u64, cols: u64) -> Vec<(ScaleLayout, &'static str)> {
    let block = |br: u64, bc: u64| ScaleLayout {
        kind: ScaleKind::Block,
        block_rows: br,
        block_cols: bc,
        grid_rows: rows.div_ceil(br),
        grid_cols: cols.div_ceil(bc),
    };
    vec![
        (ScaleLayout { kind: ScaleKind::PerTensor, block_rows: rows, block_cols: cols, grid_rows: 1, grid_cols: 1 }, "per-tensor"),
        (ScaleLayout { kind: ScaleKind::PerChannel, block_rows: 1, block_cols: cols, grid_rows: rows, grid_cols: 1 }, "per-channel"),
        (block(128, 128), "128x128"),
        (block(1, 32), "1x32"),
        (block(3, 5), "3x5"),
    ]
}

/// Scale values worth testing: ordinary, zero, negative, subnormal, huge, inf, NaN.
fn scale_values(rng: &mut Rng, n: usize) -> Vec<f32> {
    let edges = [1.0f32, 0.0, -0.5, 1e-40, 3e38, f32::INFINITY, f32::NAN, 2f32.powi(-127), 448.0];
    (0..n).map(|i| if i < edges.len() { edges[i] } else { f32::from_bits(0x3A00_0000 + (rng.next_u64() as u32 & 0x00FF_FFFF)) }).collect()
}

#[test]
fn fp8_all_isas_layouts_and_chunkings() {
    let mut rng = Rng::from_env("fp8_all_isas_layouts_and_chunkings");
    for (rows, cols) in [(1u64, 1u64), (3, 17), (130, 260), (257, 129), (128, 256)] {
        let n = (rows * cols) as usize;
        let mut src: Vec<u8> = (0..=255u8).cycle().take(n.min(256)).collect();
        src.extend(rng.bytes(n - src.len()));
        for (layout, lname) in layouts(rows, cols) {
            let values = scale_values(&mut rng, (layout.grid_rows * layout.grid_cols) as usize);
            let grid = ScaleGrid::new(&values, &layout, rows, cols).unwrap();
            for format in [Fp8Format::E4M3, Fp8Format::E5M2] {
                let k = Kernel::Fp8 { format, rows, cols, scales: Some(grid) };
                let what = format!("{format:?} {rows}x{cols} {lname}");
                assert_isas_agree(&what, &k, &src, n);
                // The definition, element by element.
                let want: Vec<u16> = (0..n)
                    .map(|e| {
                        let (r, c) = (e as u64 / cols, e as u64 % cols);
                        let w = match format {
                            Fp8Format::E4M3 => numerics::e4m3_to_f32(src[e]),
                            Fp8Format::E5M2 => numerics::e5m2_to_f32(src[e]),
                        };
                        let s = values[((r / layout.block_rows) * layout.grid_cols + c / layout.block_cols) as usize];
                        numerics::f32_to_bf16(w * s)
                    })
                    .collect();
                assert_eq!(run(&k, 0, &src, n, Isa::Scalar), want, "{what}");
                // Any element range is a valid chunk.
                for _ in 0..20 {
                    let a = rng.below(n as u64 + 1) as usize;
                    let b = a + rng.below((n - a) as u64 + 1) as usize;
                    for path in paths() {
                        assert_eq!(run(&k, a as u64, &src[a..b], b - a, path), want[a..b], "{what} [{a},{b}) {}", path.name());
                    }
                }
            }
        }
    }
}

#[test]
fn parallel_equals_serial_for_any_piece_size() {
    let mut rng = Rng::from_env("parallel_equals_serial_for_any_piece_size");
    let src = rng.bytes(18 * 3001);
    let n = 3001 * 32;
    let want = run(&Kernel::Block(BlockFormat::Q4_0), 0, &src, n, Isa::Scalar);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
    for isa in Isa::all_supported() {
        for piece in [1, 32, 33, 1000, 4096, 1 << 20] {
            let mut out = vec![0u16; n];
            pool.install(|| dequantize_par(&Kernel::Block(BlockFormat::Q4_0), 0, &src, &mut out, isa, piece)).unwrap();
            assert_eq!(out, want, "piece {piece} {isa:?}");
        }
    }
}

#[test]
fn bad_chunks_are_errors() {
    let src = vec![0u8; 36];
    let mut out = vec![0u16; 64];
    assert!(dequantize(&Kernel::Block(BlockFormat::Q4_0), 0, &src[..35], &mut out, Isa::Scalar).is_err());
    assert!(dequantize(&Kernel::Block(BlockFormat::Q4_0), 16, &src, &mut out, Isa::Scalar).is_err());
    assert!(dequantize(&Kernel::Block(BlockFormat::Q4_0), 0, &src, &mut out[..63], Isa::Scalar).is_err());
    let k = Kernel::Fp8 { format: Fp8Format::E4M3, rows: 2, cols: 16, scales: None };
    assert!(dequantize(&k, 8, &src[..32], &mut out[..32], Isa::Scalar).is_err(), "past the end of the matrix");
    let layout = ScaleLayout { kind: ScaleKind::Block, block_rows: 1, block_cols: 8, grid_rows: 2, grid_cols: 1 };
    assert!(ScaleGrid::new(&[1.0, 1.0], &layout, 2, 16).is_err(), "grid does not cover the columns");
    assert!(ScaleGrid::new(&[1.0], &layout, 2, 8).is_err(), "too few values");
}

#[test]
fn an_empty_matrix_with_per_channel_scales_is_fine() {
    // [5, 0] weight with a [5, 1] scale: zero elements, five scales (a
    // division by zero before the dequant fuzzer found it).
    let layout = ScaleLayout { kind: ScaleKind::PerChannel, block_rows: 1, block_cols: 1, grid_rows: 5, grid_cols: 1 };
    let values = [1.0f32; 5];
    let grid = ScaleGrid::new(&values, &layout, 5, 0).unwrap();
    for path in paths() {
        let k = Kernel::Fp8 { format: Fp8Format::E4M3, rows: 5, cols: 0, scales: Some(grid) };
        assert!(run(&k, 0, &[], 0, path).is_empty());
    }
}

/// Group scales for the packed kernels: edge values first (zero, signed,
/// subnormal products, F16 overflow, infinities, NaN), then ordinary ones.
fn packed_scales(rng: &mut Rng, n: usize) -> Vec<f32> {
    let edges = [0.0f32, -0.0, -0.75, 1e-40, 2f32.powi(-127), 3e-8, 6.1e-5, 65504.0, 3e38, f32::INFINITY, f32::NEG_INFINITY, f32::NAN];
    (0..n).map(|i| edges.get(i).copied().unwrap_or_else(|| (rng.next_u64() % 40000) as f32 / 8192.0 - 2.0)).collect()
}

/// E2M1 pairs with group scales (the NVFP4 and MXFP4 safetensors packs):
/// every path, groups of 16 and 32, whole matrices and chunks on any pair
/// (runs shorter than a vector, and tails, included).
#[test]
fn e2m1_all_isas_groups_and_chunkings() {
    let mut rng = Rng::from_env("e2m1_all_isas_groups_and_chunkings");
    for (rows, cols) in [(1u64, 16u64), (3, 48), (7, 160), (33, 512)] {
        let total = (rows * cols) as usize;
        let mut w: Vec<u8> = (0..=255u8).cycle().take((total / 2).min(256)).collect();
        w.extend(rng.bytes(total / 2 - w.len()));
        for group in [16u64, 32] {
            if cols % group != 0 {
                continue;
            }
            let layout = ScaleLayout { kind: ScaleKind::Group, block_rows: 1, block_cols: group, grid_rows: rows, grid_cols: cols / group };
            let values = packed_scales(&mut rng, (rows * cols / group) as usize);
            let kernel = Kernel::E2m1 { rows, cols, scales: ScaleGrid::new(&values, &layout, rows, cols).unwrap() };
            let mut ranges = vec![(0usize, total)];
            for _ in 0..8 {
                let a = (rng.next_u64() % (total as u64 / 2)) as usize * 2;
                let b = a + (rng.next_u64() % ((total - a) as u64 / 2 + 1)) as usize * 2;
                ranges.push((a, b));
            }
            for (a, b) in ranges {
                let what = format!("E2M1 {rows}x{cols} groups of {group} [{a},{b})");
                assert_isas_agree_at(&what, &kernel, a as u64, &w[a / 2..b / 2], b - a);
            }
        }
    }
}

/// INT4 and INT8 packs: every path, group, channel and per-tensor scales,
/// with and without zero points and F16 rounding, chunks on any word.
#[test]
fn int_all_isas_layouts_and_chunkings() {
    let mut rng = Rng::from_env("int_all_isas_layouts_and_chunkings");
    for bits in [4u8, 8] {
        let per_word = 32 / bits as usize;
        for (rows, cols) in [(1u64, 32u64), (5, 64), (9, 384), (17, 1024)] {
            let total = (rows * cols) as usize;
            let nbytes = total * bits as usize / 8;
            let mut w: Vec<u8> = (0..=255u8).cycle().take(nbytes.min(256)).collect();
            w.extend(rng.bytes(nbytes - w.len()));
            let mut layouts = vec![
                ScaleLayout { kind: ScaleKind::PerChannel, block_rows: 1, block_cols: cols, grid_rows: rows, grid_cols: 1 },
                ScaleLayout { kind: ScaleKind::PerTensor, block_rows: rows, block_cols: cols, grid_rows: 1, grid_cols: 1 },
            ];
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
                let values = packed_scales(&mut rng, ns);
                let half = 1i64 << (bits - 1);
                let zeros: Vec<f32> = (0..ns).map(|_| ((rng.next_u64() % (2 * half as u64)) as i64 - half) as f32).collect();
                for (with_zeros, round_f16) in [(false, false), (true, false), (false, true), (true, true)] {
                    let scales = ScaleGrid::new(&values, &layout, rows, cols).unwrap();
                    let zgrid = with_zeros.then(|| ScaleGrid::new(&zeros, &layout, rows, cols).unwrap());
                    let kernel = Kernel::Int { bits, rows, cols, scales, zeros: zgrid, round_f16 };
                    let mut ranges = vec![(0usize, total)];
                    for _ in 0..6 {
                        let a = (rng.next_u64() % (total / per_word) as u64) as usize * per_word;
                        let b = a + (rng.next_u64() % ((total - a) / per_word + 1) as u64) as usize * per_word;
                        ranges.push((a, b));
                    }
                    for (a, b) in ranges {
                        let what = format!(
                            "INT{bits} {rows}x{cols} {:?}/{} zeros={with_zeros} f16={round_f16} [{a},{b})",
                            layout.kind, layout.block_cols
                        );
                        let (sa, sb) = (a * bits as usize / 8, b * bits as usize / 8);
                        assert_isas_agree_at(&what, &kernel, a as u64, &w[sa..sb], b - a);
                    }
                }
            }
        }
    }
}

/// `assert_isas_agree` for a chunk starting at element `first`.
fn assert_isas_agree_at(what: &str, kernel: &Kernel, first: u64, src: &[u8], n: usize) {
    let want = run(kernel, first, src, n, Isa::Scalar);
    for path in paths() {
        let got = run(kernel, first, src, n, path);
        if let Some(i) = (0..n).find(|&i| got[i] != want[i]) {
            panic!("{what}: {} element {i}: {:#06x}, scalar {:#06x}", path.name(), got[i], want[i]);
        }
    }
}
