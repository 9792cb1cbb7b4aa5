//! GPU tests: need a CUDA device. CI has none, so each is ignored there
//! with that reason; scripts/gpu_round.sh runs them with --include-ignored.
//!
//! Every kernel is checked bitwise against the scalar CPU kernels on random
//! and edge-case inputs, odd sizes and tails, into poisoned outputs with a
//! guard region; the pipeline end to end, including its failure paths (read
//! error, cancel, out of memory), with device memory checked for leaks.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use weightstream_cuda::{run, ChunkOp, ChunkWork, CudaError, Gpu, StagingConfig, StagingRing};
use weightstream_dequant::{dequantize, Isa, Kernel, ScaleGrid};
use weightstream_format::{BlockFormat, Fp8Format, MemorySource, ScaleKind, ScaleLayout, SharedSource};
use weightstream_kernels::{Element, Launch, ScaledArgs};

const POISON: u8 = 0xA5;
const GUARD: usize = 64;

fn gpu() -> Gpu {
    Gpu::open(0).expect("a usable GPU (these tests are for the GPU round)")
}

use weightstream_io::testing::SeededRng as Rng;

fn cpu(kernel: &Kernel, first: u64, src: &[u8], n: usize) -> Vec<u16> {
    let mut out = vec![0u16; n];
    dequantize(kernel, first, src, &mut out, Isa::Scalar).unwrap();
    out
}

/// Launch on the device into a poisoned buffer; check every output and the guard.
fn check_launch(g: &Gpu, name: &str, launch: Launch, src: &[u8], n: usize, scales: Option<&[f32]>, want: &[u16]) {
    check_launch_zeros(g, name, launch, src, n, scales, None, want)
}

/// `check_launch` with an integer pack's zero points.
#[allow(clippy::too_many_arguments)]
fn check_launch_zeros(
    g: &Gpu,
    name: &str,
    launch: Launch,
    src: &[u8],
    n: usize,
    scales: Option<&[f32]>,
    zeros: Option<&[f32]>,
    want: &[u16],
) {
    let s = g.alloc(src.len().max(1), "src").unwrap();
    s.from_host(src).unwrap();
    let dst = g.alloc(n * 2 + GUARD, "dst").unwrap();
    dst.from_host(&vec![POISON; n * 2 + GUARD]).unwrap();
    let upload = |v: &[f32]| {
        let b = g.alloc(v.len() * 4, "grid").unwrap();
        b.from_host(&v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>()).unwrap();
        b
    };
    let sc = scales.map(upload);
    let zs = zeros.map(upload);
    let launch = match launch {
        Launch::Scaled(a) => {
            Launch::Scaled(ScaledArgs { scales: sc.as_ref().map_or(0, |b| b.ptr()), zeros: zs.as_ref().map_or(0, |b| b.ptr()), ..a })
        }
        l => l,
    };
    let stream = g.new_stream().unwrap();
    // SAFETY: s holds the input, dst room for n values and the guard, sc the scales.
    unsafe { g.launch(&launch, s.ptr(), dst.ptr(), n as u64, &stream).unwrap() };
    stream.synchronize().unwrap();
    let mut out = vec![0u8; n * 2 + GUARD];
    dst.to_host(&mut out).unwrap();
    for i in 0..n {
        let v = u16::from_le_bytes([out[2 * i], out[2 * i + 1]]);
        assert_eq!(v, want[i], "{name}: element {i}: GPU {v:#06x}, CPU {:#06x}", want[i]);
    }
    assert!(out[n * 2..].iter().all(|&b| b == POISON), "{name}: wrote past the end");
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu_round.sh runs it"]
fn kernels_match_cpu_bitwise() {
    let g = gpu();
    let mut rng = Rng::from_env("kernels_match_cpu_bitwise");
    let f16_edges: [u16; 13] = [0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0xFE01, 0x3C00, 0x2E66];
    for &f in BlockFormat::ALL {
        let (launch, kernel, l) = (Launch::Block(f), Kernel::Block(f), f.layout());
        // Every f16 field (d, dmin, m) gets edge values in about half the blocks.
        let f16_fields: Vec<usize> = l.f16_fields().collect();
        for blocks in [1usize, 3, 1000, 100_003] {
            let mut src = rng.bytes(blocks * l.bytes);
            for (b, d) in src.chunks_exact_mut(l.bytes).zip(f16_edges.iter().cycle()) {
                for &o in &f16_fields {
                    if rng.next_u64() % 2 == 0 {
                        b[o..o + 2].copy_from_slice(&d.to_le_bytes());
                    }
                }
            }
            let n = blocks * l.elems;
            check_launch(&g, &format!("{launch:?} {blocks} blocks"), launch, &src, n, None, &cpu(&kernel, 0, &src, n));
        }
    }
    let all_f16: Vec<u8> = (0..=u16::MAX).flat_map(|h| h.to_le_bytes()).collect();
    check_launch(&g, "F16 all", Launch::F16, &all_f16, 65536, None, &cpu(&Kernel::F16, 0, &all_f16, 65536));
    for n in [1usize, 7, 9, 1001, 1 << 20] {
        let src = rng.bytes(n * 4);
        check_launch(&g, &format!("F32 {n}"), Launch::F32, &src, n, None, &cpu(&Kernel::F32, 0, &src, n));
        let src = rng.bytes(n * 2);
        check_launch(&g, &format!("F16 {n}"), Launch::F16, &src, n, None, &cpu(&Kernel::F16, 0, &src, n));
    }
    let scale_edges = [1.0f32, 0.0, -0.5, 1e-40, 2f32.powi(-127), 3e38, f32::INFINITY, f32::NAN, 448.0];
    for (rows, cols) in [(1u64, 1u64), (3, 17), (130, 260), (257, 129), (1024, 4096)] {
        let total = (rows * cols) as usize;
        let mut w: Vec<u8> = (0..=255u8).cycle().take(total.min(256)).collect();
        w.extend(rng.bytes(total - w.len()));
        for layout in [
            ScaleLayout { kind: ScaleKind::PerTensor, block_rows: rows, block_cols: cols, grid_rows: 1, grid_cols: 1 },
            ScaleLayout { kind: ScaleKind::PerChannel, block_rows: 1, block_cols: cols, grid_rows: rows, grid_cols: 1 },
            ScaleLayout {
                kind: ScaleKind::Block,
                block_rows: 128,
                block_cols: 128,
                grid_rows: rows.div_ceil(128),
                grid_cols: cols.div_ceil(128),
            },
        ] {
            let values: Vec<f32> = (0..(layout.grid_rows * layout.grid_cols) as usize)
                .map(|i| scale_edges.get(i).copied().unwrap_or(0.5 + (rng.next_u64() % 100) as f32 / 64.0))
                .collect();
            let grid = ScaleGrid::new(&values, &layout, rows, cols).unwrap();
            for (format, element) in [(Fp8Format::E4M3, Element::E4m3), (Fp8Format::E5M2, Element::E5m2)] {
                let kernel = Kernel::Fp8 { format, rows, cols, scales: Some(grid) };
                for (a, b) in [(0usize, total), (total / 3, total), (total / 7, total / 2 + 1)] {
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
                    check_launch(
                        &g,
                        &format!("{format:?} {rows}x{cols} {:?} [{a},{b})", layout.kind),
                        Launch::Scaled(args),
                        &w[a..b],
                        b - a,
                        Some(&values),
                        &want,
                    );
                }
            }
        }
    }
}

use weightstream_io::testing::FailingSource;

/// E2M1 pairs with group scales (the 4-bit safetensors schemes), on the
/// device against the CPU kernel: every code, edge scales, both group
/// sizes, odd row counts, chunks from any pair.
#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu_round.sh runs it"]
fn e2m1_matches_cpu_bitwise() {
    let g = gpu();
    let mut rng = Rng::from_env("e2m1_matches_cpu_bitwise");
    let scale_edges = [1.0f32, 0.0, -0.5, 1e-40, 2f32.powi(-127), 3e38, f32::INFINITY, f32::NAN, 2688.0, 2f32.powi(127)];
    for (rows, cols) in [(1u64, 32u64), (5, 96), (17, 160), (1024, 4096)] {
        let total = (rows * cols) as usize;
        let mut w: Vec<u8> = (0..=255u8).cycle().take((total / 2).min(256)).collect();
        w.extend(rng.bytes(total / 2 - w.len()));
        for group in [16u64, 32] {
            let layout = ScaleLayout { kind: ScaleKind::Group, block_rows: 1, block_cols: group, grid_rows: rows, grid_cols: cols / group };
            let values: Vec<f32> = (0..(rows * cols / group) as usize)
                .map(|i| scale_edges.get(i).copied().unwrap_or_else(|| f32::from_bits(rng.next_u64() as u32 & 0x7FFF_FFFF)))
                .collect();
            let kernel = Kernel::E2m1 { rows, cols, scales: ScaleGrid::new(&values, &layout, rows, cols).unwrap() };
            for (a, b) in [(0usize, total), (total / 3 / 2 * 2, total), (total / 7 / 2 * 2, total / 2 / 2 * 2 + 2)] {
                let args = ScaledArgs {
                    element: Element::E2m1,
                    scales: 0,
                    first: a as u64,
                    cols,
                    block_rows: 1,
                    block_cols: group,
                    grid_cols: cols / group,
                    zeros: 0,
                    round_f16: false,
                };
                let want = cpu(&kernel, a as u64, &w[a / 2..b / 2], b - a);
                let name = format!("E2M1 {rows}x{cols} groups of {group} [{a},{b})");
                check_launch(&g, &name, Launch::Scaled(args), &w[a / 2..b / 2], b - a, Some(&values), &want);
            }
        }
    }
}

/// Packed integers on the device against the CPU kernel: INT4 and INT8,
/// with and without zero points and F16 rounding, group and channel
/// scales, edge scales, chunks from any word.
#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu_round.sh runs it"]
fn int_matches_cpu_bitwise() {
    let g = gpu();
    let mut rng = Rng::from_env("int_matches_cpu_bitwise");
    let scale_edges = [1.0f32, 0.0, -0.5, 1e-40, 6.1e-5, 3e-8, 65504.0, 300.0, 3e38, f32::INFINITY, f32::NAN];
    for (bits, element) in [(4u8, Element::Int4), (8, Element::Int8)] {
        for (rows, cols) in [(3u64, 64u64), (17, 256), (1024, 4096)] {
            let total = (rows * cols) as usize;
            let w = rng.bytes(total * bits as usize / 8);
            for block_cols in [128u64, cols] {
                let layout =
                    ScaleLayout { kind: ScaleKind::Group, block_rows: 1, block_cols, grid_rows: rows, grid_cols: cols / block_cols };
                let ns = (rows * cols / block_cols) as usize;
                let values: Vec<f32> = (0..ns)
                    .map(|i| scale_edges.get(i).copied().unwrap_or_else(|| (rng.next_u64() % 20000) as f32 / 4096.0 - 2.0))
                    .collect();
                let half = 1i64 << (bits - 1);
                let zeros: Vec<f32> = (0..ns).map(|_| ((rng.next_u64() % (2 * half as u64)) as i64 - half) as f32).collect();
                for (with_zeros, round_f16) in [(false, false), (true, true)] {
                    let zgrid = with_zeros.then(|| ScaleGrid::new(&zeros, &layout, rows, cols).unwrap());
                    let scales = ScaleGrid::new(&values, &layout, rows, cols).unwrap();
                    let kernel = Kernel::Int { bits, rows, cols, scales, zeros: zgrid, round_f16 };
                    let per_word = 32 / bits as usize;
                    for (a, b) in [(0usize, total), (total / 3 / per_word * per_word, total)] {
                        let (sa, sb) = (a * bits as usize / 8, b * bits as usize / 8);
                        let args = ScaledArgs {
                            element,
                            scales: 0,
                            first: a as u64,
                            cols,
                            block_rows: 1,
                            block_cols,
                            grid_cols: cols / block_cols,
                            zeros: 0,
                            round_f16,
                        };
                        let want = cpu(&kernel, a as u64, &w[sa..sb], b - a);
                        let name = format!("INT{bits} {rows}x{cols} groups of {block_cols} zeros={with_zeros} [{a},{b})");
                        let z = with_zeros.then_some(&zeros[..]);
                        check_launch_zeros(&g, &name, Launch::Scaled(args), &w[sa..sb], b - a, Some(&values), z, &want);
                    }
                }
            }
        }
    }
}

/// Q4_0 work: `blocks` blocks split into chunks of `chunk_blocks`, one tensor.
fn q4_work(src: SharedSource, blocks: usize, chunk_blocks: usize, dst: u64) -> Vec<ChunkWork> {
    let chunks: Vec<usize> = (0..blocks).step_by(chunk_blocks).collect();
    chunks
        .iter()
        .enumerate()
        .map(|(k, &b)| {
            let nb = chunk_blocks.min(blocks - b);
            ChunkWork {
                gds: None,
                tensor: 0,
                source: src.clone(),
                offset: (b * 18) as u64,
                len: nb * 18,
                op: ChunkOp::Kernel(Launch::Block(BlockFormat::Q4_0)),
                n: (nb * 32) as u64,
                dst: dst + (b * 64) as u64,
                trim: None,
                last_of_tensor: k + 1 == chunks.len(),
            }
        })
        .collect()
}

fn free_mem(g: &Gpu) -> usize {
    g.mem_info().unwrap().0
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu_round.sh runs it"]
fn pipeline_matches_cpu_and_frees_everything() {
    let g = gpu();
    let mut rng = Rng::from_env("pipeline_matches_cpu_and_frees_everything");
    let blocks = 50_001;
    let mut bytes = rng.bytes(blocks * 18);
    for b in bytes.chunks_exact_mut(18) {
        b[..2].copy_from_slice(&0x2E66u16.to_le_bytes());
    }
    let want = cpu(&Kernel::Block(BlockFormat::Q4_0), 0, &bytes, blocks * 32);
    let src: SharedSource = Arc::new(MemorySource::new("mem.gguf", bytes));
    let cfg = StagingConfig { slots: 3, slot_bytes: 18 * 1000, readers: 2 };
    let ring = StagingRing::new(&g, cfg).unwrap();
    // Warm up (module loads, context allocations) before measuring leaks.
    let dst = g.alloc(blocks * 64, "dst").unwrap();
    run(&g, &ring, &q4_work(src.clone(), blocks, 1000, dst.ptr()), None, &|| false, |_| Ok(())).unwrap();
    let before = free_mem(&g);
    let mut done = vec![];
    run(&g, &ring, &q4_work(src.clone(), blocks, 1000, dst.ptr()), None, &|| false, |t| {
        done.push(t);
        Ok(())
    })
    .unwrap();
    assert_eq!(done, vec![0]);
    let mut out = vec![0u8; blocks * 64];
    dst.to_host(&mut out).unwrap();
    let got: Vec<u16> = out.chunks_exact(2).map(|b| u16::from_le_bytes([b[0], b[1]])).collect();
    assert!(got == want, "pipeline output differs from the CPU kernels");
    assert_eq!(free_mem(&g), before, "device memory leaked by a successful run");

    // A read failure mid-tensor: an error naming the offset, nothing leaked.
    let failing: SharedSource =
        Arc::new(FailingSource { inner: MemorySource::new("bad.gguf", vec![0; blocks * 18]), bad: 18 * 30_000..18 * 30_001 });
    let e = run(&g, &ring, &q4_work(failing, blocks, 1000, dst.ptr()), None, &|| false, |_| Ok(())).unwrap_err();
    assert!(matches!(e, CudaError::Read { .. }), "{e}");
    assert_eq!(free_mem(&g), before, "device memory leaked after a read error");

    // Cancelled after a few chunks.
    let calls = AtomicUsize::new(0);
    let e = run(&g, &ring, &q4_work(src.clone(), blocks, 1000, dst.ptr()), None, &|| calls.fetch_add(1, Ordering::Relaxed) > 5, |_| Ok(()))
        .unwrap_err();
    assert!(matches!(e, CudaError::Cancelled), "{e}");
    assert_eq!(free_mem(&g), before, "device memory leaked after cancel");
    // The ring is reusable after a failure and after a cancel.
    run(&g, &ring, &q4_work(src.clone(), blocks, 1000, dst.ptr()), None, &|| false, |_| Ok(())).unwrap();
    let mut again = vec![0u8; blocks * 64];
    dst.to_host(&mut again).unwrap();
    assert!(again == out, "a reused ring gives the same bytes");
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu_round.sh runs it"]
fn out_of_memory_is_an_error() {
    let g = gpu();
    let (free, total) = g.mem_info().unwrap();
    let e = g.alloc(total * 2, "an impossible tensor").err().expect("allocation beyond the device must fail");
    assert!(e.is_out_of_memory(), "{e}");
    assert!(e.to_string().contains("an impossible tensor"));
    assert_eq!(g.mem_info().unwrap().0, free);
    // A staging ring that cannot fit: an out-of-memory error from the device
    // scratch, which is allocated before any host memory is pinned (else
    // this would pin 2x the GPU's memory of host RAM first), nothing left
    // allocated.
    let cfg = StagingConfig { slots: 4, slot_bytes: total / 2, readers: 1 };
    let e = StagingRing::new(&g, cfg).err().expect("a ring of twice the device memory must fail");
    assert!(e.is_out_of_memory(), "{e}");
    assert_eq!(g.mem_info().unwrap().0, free);
}
