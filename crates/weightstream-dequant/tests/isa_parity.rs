//! Every ISA, every chunking and every thread count give the scalar
//! kernels' bits, for both outputs (BF16 and float16): the CPU runner of the one parity case list
//! (`weightstream_dequant::cases`, which the host-grid and GPU runners run
//! too), and the checks only the CPU has. An ISA this CPU lacks is
//! skipped, and said so on stderr (`cargo test -- --nocapture` shows it).

use weightstream_blocks::{BlockFormat, Encoding, Fp8Format, ScaleKind, ScaleLayout};
use weightstream_dequant::cases::{self, Draw, Size};
use weightstream_dequant::output::{f32_to_f16, CANONICAL_NAN_F16};
use weightstream_dequant::{dequantize, dequantize_par, numerics, runs_on, Isa, Kernel, OutDtype, ScaleGrid};
use weightstream_io::testing::SeededRng as Rng;

/// Both outputs: every vector kernel body is compiled for each.
const OUTS: [OutDtype; 2] = [OutDtype::BF16, OutDtype::F16];

fn run(kernel: &Kernel, first: u64, src: &[u8], n: usize, isa: Isa) -> Vec<u16> {
    run_as(kernel, OutDtype::BF16, first, src, n, isa)
}

fn run_as(kernel: &Kernel, out: OutDtype, first: u64, src: &[u8], n: usize, isa: Isa) -> Vec<u16> {
    let mut o = vec![0xDEADu16; n];
    dequantize(kernel, out, first, src, &mut o, isa).unwrap();
    o
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

/// What the caller says this CPU has (`WEIGHTSTREAM_REQUIRE_ISAS`): a comma
/// list of ISA names, or `cpuinfo` for every x86-64 ISA whose features
/// /proc/cpuinfo lists (read independently of `Isa::supported`, so a wrong
/// detection cannot hide a path). Unset: nothing is required. The test
/// command sets it, so a CPU path that silently stopped running fails CI.
fn required() -> Vec<Isa> {
    let Ok(spec) = std::env::var("WEIGHTSTREAM_REQUIRE_ISAS") else { return Vec::new() };
    if spec != "cpuinfo" {
        return spec
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|s| Isa::parse(s.trim()).unwrap_or_else(|| panic!("WEIGHTSTREAM_REQUIRE_ISAS: no ISA named {s:?}")))
            .collect();
    }
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").expect("WEIGHTSTREAM_REQUIRE_ISAS=cpuinfo: /proc/cpuinfo");
    let flags: Vec<&str> = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, f)| f.split_whitespace().collect())
        .unwrap_or_default();
    let has = |all: &[&str]| all.iter().all(|f| flags.contains(f));
    let mut isas = vec![Isa::Scalar];
    if cfg!(target_arch = "x86_64") && has(&["avx2", "f16c"]) {
        isas.push(Isa::Avx2);
    }
    if cfg!(target_arch = "x86_64") && has(&["avx2", "f16c", "avx512f", "avx512bw", "avx512vl"]) {
        isas.extend([Isa::Avx512Int, Isa::Avx512]);
    }
    isas
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
    let missing: Vec<_> = required().into_iter().filter(|isa| !paths.contains(isa)).map(Isa::name).collect();
    assert!(missing.is_empty(), "this CPU has {missing:?} (WEIGHTSTREAM_REQUIRE_ISAS) but the parity suite skipped them");
    // Every aarch64 CPU has NEON: its path is never the one skipped.
    #[cfg(target_arch = "aarch64")]
    assert!(Isa::Neon.supported() && Isa::detect() == Isa::Neon);
}

/// The runner: every case, every path this CPU has, both outputs, bit
/// for bit against the scalar kernels.
#[test]
fn every_case_on_every_isa() {
    let mut rng = Rng::from_env("every_case_on_every_isa");
    let all = cases::all(Size::Host, &mut Draw(&mut || rng.next_u64()));
    let paths = paths();
    let mut compared = [0usize; 2];
    for c in &all {
        for (o, &out) in OUTS.iter().enumerate() {
            let want = c.scalar_as(out);
            for &path in &paths {
                let got = run_as(&c.kernel(), out, c.first, &c.src, c.n, path);
                if let Some(i) = (0..c.n).find(|&i| got[i] != want[i]) {
                    panic!("{} to {out:?}: {} element {i}: {:#06x}, scalar {:#06x}", c.name, path.name(), got[i], want[i]);
                }
                compared[o] += c.n;
            }
        }
    }
    eprintln!("{} cases, {} paths: {} BF16 and {} float16 elements compared", all.len(), paths.len(), compared[0], compared[1]);
    // The list reaches what it says: every block format, the three formats
    // with scale bytes that are not f16 fields, every encoding with scales.
    let edge_formats: Vec<_> = all.iter().filter(|c| c.name.ends_with("scale bytes at their edges")).map(|c| c.encoding).collect();
    let want: Vec<_> = [BlockFormat::MXFP4, BlockFormat::NVFP4, BlockFormat::IQ1_M].map(Encoding::Block).to_vec();
    assert_eq!(edge_formats, want);
    for &f in BlockFormat::ALL {
        assert!(all.iter().any(|c| c.encoding == Encoding::Block(f)), "{f:?}");
    }
    for e in [
        Encoding::Fp8(Fp8Format::E4M3),
        Encoding::Fp8(Fp8Format::E5M2),
        Encoding::E2m1,
        Encoding::Int { bits: 4 },
        Encoding::Int { bits: 8 },
    ] {
        assert!(all.iter().any(|c| c.encoding == e && c.first > 0), "{e:?}: no chunk past the start");
    }
}

/// The scalar FP8 kernel is the definition, element by element:
/// `bf16(value(code) * scale)` with the scale its layout assigns.
#[test]
fn fp8_scalar_follows_the_definition() {
    let mut rng = Rng::from_env("fp8_scalar_follows_the_definition");
    for c in cases::all(Size::Host, &mut Draw(&mut || rng.next_u64())) {
        let Encoding::Fp8(format) = c.encoding else { continue };
        let want: Vec<u16> = (0..c.n)
            .map(|k| {
                let e = c.first + k as u64;
                let (r, col) = (e / c.cols, e % c.cols);
                let w = match format {
                    Fp8Format::E4M3 => numerics::e4m3_to_f32(c.src[k]),
                    Fp8Format::E5M2 => numerics::e5m2_to_f32(c.src[k]),
                };
                let s = c.scales.as_ref().map_or(1.0, |(v, l)| v[((r / l.block_rows) * l.grid_cols + col / l.block_cols) as usize]);
                numerics::f32_to_bf16(w * s)
            })
            .collect();
        assert_eq!(c.scalar(), want, "{}", c.name);
    }
}

#[test]
fn bf16_is_copied() {
    let mut rng = Rng::from_env("bf16_is_copied");
    let bf: Vec<u8> = rng.bytes(2 * 99);
    let out = run(&Kernel::BF16, 0, &bf, 99, Isa::detect());
    assert!(out.iter().enumerate().all(|(i, &v)| v == u16::from_le_bytes([bf[2 * i], bf[2 * i + 1]])));
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
        let half = run_as(&Kernel::Block(BlockFormat::Q4_0), OutDtype::F16, 0, &src, 32, path);
        for j in 0..16 {
            assert_eq!(out[j], numerics::f32_to_bf16(j as f32 - 8.0));
            assert_eq!(out[j + 16], numerics::f32_to_bf16(7.0 - j as f32));
            assert_eq!(half[j], f32_to_f16(j as f32 - 8.0));
            assert_eq!(half[j + 16], f32_to_f16(7.0 - j as f32));
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
fn parallel_equals_serial_for_any_piece_size() {
    let mut rng = Rng::from_env("parallel_equals_serial_for_any_piece_size");
    let src = rng.bytes(18 * 3001);
    let n = 3001 * 32;
    let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
    for dt in OUTS {
        let want = run_as(&Kernel::Block(BlockFormat::Q4_0), dt, 0, &src, n, Isa::Scalar);
        for isa in Isa::all_supported() {
            for piece in [1, 32, 33, 1000, 4096, 1 << 20] {
                let mut out = vec![0u16; n];
                pool.install(|| dequantize_par(&Kernel::Block(BlockFormat::Q4_0), dt, 0, &src, &mut out, isa, piece)).unwrap();
                assert_eq!(out, want, "piece {piece} {isa:?} {dt:?}");
            }
        }
    }
}

/// The float16 stores on their edges, through the F32 kernel (one
/// rounding of each input): every f16 value's neighbourhood (each value,
/// the midpoint to the next, one f32 ulp either side of it: ties to even,
/// subnormals, the overflow threshold 65520), NaNs with every kind of
/// payload and sign (all 0x7E00), infinities, zeros, f32 subnormals, in
/// an odd-length buffer (vector steps and the scalar tail) on every path.
#[test]
fn f16_store_edges_on_every_isa() {
    let f16 = |h: u16| numerics::f16_to_f32(h);
    let mut xs: Vec<f32> = Vec::new();
    for h in 0u16..0x7C00 {
        let (v, next) = (f16(h), if h == 0x7BFF { 65520.0 } else { f16(h + 1) });
        let mid = ((v as f64 + next as f64) / 2.0) as f32;
        for x in [v, mid, f32::from_bits(mid.to_bits().wrapping_sub(1)), f32::from_bits(mid.to_bits() + 1)] {
            xs.extend([x, -x]);
        }
    }
    for nan in [0x7F80_0001u32, 0x7FC0_0000, 0x7FFF_FFFF, 0xFF80_0001, 0xFFC0_1234, 0x7F80_2000, 0x7FA0_0000] {
        xs.push(f32::from_bits(nan));
    }
    xs.extend([f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0, f32::MAX, f32::MIN, 1e-40, -1e-45, 65519.996, 65520.0, 2.980_232_2e-8]);
    xs.push(1.0); // odd length: a scalar tail
    let src: Vec<u8> = xs.iter().flat_map(|x| x.to_le_bytes()).collect();
    let want: Vec<u16> = xs.iter().map(|&x| f32_to_f16(x)).collect();
    assert!(want.iter().filter(|&&h| h == CANONICAL_NAN_F16).count() >= 7);
    for path in paths() {
        assert_eq!(runs_on(&Kernel::F32, OutDtype::F16, path), path, "F32 to float16 has a vector kernel");
        let got = run_as(&Kernel::F32, OutDtype::F16, 0, &src, xs.len(), path);
        if let Some(i) = (0..xs.len()).find(|&i| got[i] != want[i]) {
            panic!("{}: {:e} ({:#010x}) -> {:#06x}, want {:#06x}", path.name(), xs[i], xs[i].to_bits(), got[i], want[i]);
        }
    }
}

/// BF16 to float16, exhaustively: every BF16 bit pattern (NaN payloads,
/// subnormals, values past 65504) plus a 7-element tail, on every path.
#[test]
fn every_bf16_to_f16_on_every_isa() {
    let src: Vec<u8> = (0..=0xFFFFu16).chain(0x3F80..0x3F87).flat_map(|b| b.to_le_bytes()).collect();
    let n = src.len() / 2;
    let want = run_as(&Kernel::BF16, OutDtype::F16, 0, &src, n, Isa::Scalar);
    for path in paths() {
        assert_eq!(run_as(&Kernel::BF16, OutDtype::F16, 0, &src, n, path), want, "{}", path.name());
    }
}

/// Float16 output runs where it says: every block format on the path
/// BF16 takes; F16 sources copied, BF16 sources converted by a vector
/// kernel (AVX2's under AVX-512).
#[test]
fn f16_output_runs_on_the_vector_paths() {
    for path in paths() {
        for &f in BlockFormat::ALL {
            let k = Kernel::Block(f);
            assert_eq!(runs_on(&k, OutDtype::F16, path), runs_on(&k, OutDtype::BF16, path), "{f:?}");
        }
        assert_eq!(runs_on(&Kernel::F16, OutDtype::F16, path), Isa::Scalar);
        assert_eq!(runs_on(&Kernel::BF16, OutDtype::BF16, path), Isa::Scalar);
        let bf16_to_f16 = if matches!(path, Isa::Avx512 | Isa::Avx512Int) { Isa::Avx2 } else { path };
        assert_eq!(runs_on(&Kernel::BF16, OutDtype::F16, path), bf16_to_f16);
    }
}

#[test]
fn bad_chunks_are_errors() {
    let src = vec![0u8; 36];
    let mut out = vec![0u16; 64];
    assert!(dequantize(&Kernel::Block(BlockFormat::Q4_0), OutDtype::BF16, 0, &src[..35], &mut out, Isa::Scalar).is_err());
    assert!(dequantize(&Kernel::Block(BlockFormat::Q4_0), OutDtype::BF16, 16, &src, &mut out, Isa::Scalar).is_err());
    assert!(dequantize(&Kernel::Block(BlockFormat::Q4_0), OutDtype::BF16, 0, &src, &mut out[..63], Isa::Scalar).is_err());
    let k = Kernel::Fp8 { format: Fp8Format::E4M3, rows: 2, cols: 16, scales: None };
    assert!(dequantize(&k, OutDtype::BF16, 8, &src[..32], &mut out[..32], Isa::Scalar).is_err(), "past the end of the matrix");
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
