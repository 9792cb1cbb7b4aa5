//! GPU tests: need a CUDA device. CI has none, so each is ignored there
//! with that reason; scripts/gpu_round.sh runs them with --include-ignored.
//!
//! Every kernel, for both outputs (BF16 and float16), is checked bitwise
//! against the scalar CPU kernels writing that output on the one parity
//! case list (`weightstream_dequant::cases`), into poisoned
//! outputs with a guard region; the pipeline end to end, including its failure paths (read
//! error, cancel, out of memory), with device memory checked for leaks.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use weightstream_cuda::{run, ChunkOp, ChunkWork, CudaError, Gpu, StagingConfig, StagingRing};
use weightstream_dequant::cases::{self, Draw, Size};
use weightstream_dequant::{dequantize, Isa, Kernel, OutDtype};
use weightstream_format::{BlockFormat, MemorySource, SharedSource};
use weightstream_kernels::{Launch, ScaledArgs};

const POISON: u8 = 0xA5;
const GUARD: usize = 64;

fn gpu() -> Gpu {
    Gpu::open(0).expect("a usable GPU (these tests are for the GPU round)")
}

use weightstream_io::testing::SeededRng as Rng;

fn cpu(kernel: &Kernel, out: OutDtype, first: u64, src: &[u8], n: usize) -> Vec<u16> {
    let mut dst = vec![0u16; n];
    dequantize(kernel, out, first, src, &mut dst, Isa::Scalar).unwrap();
    dst
}

/// Launch on the device into a poisoned buffer (scales and an integer
/// pack's zero points uploaded beside it); check every output and the guard.
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

/// The device runner of the one parity case list
/// (`weightstream_dequant::cases`, with the sizes only a GPU runs quickly):
/// every case launched as the executor launches it, for each output,
/// against the scalar CPU kernels writing that output. A source of the
/// output's own type has no kernel (the executor copies it; the host-grid
/// runner checks that the CPU's output is then the source's bits).
#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu_round.sh runs it"]
fn every_case_matches_cpu_bitwise() {
    let g = gpu();
    let mut rng = Rng::from_env("every_case_matches_cpu_bitwise");
    // The sanitizer step runs the host-sized list (memcheck slows every launch).
    let size = if std::env::var("WEIGHTSTREAM_PARITY_SIZE").as_deref() == Ok("host") { Size::Host } else { Size::Device };
    let all = cases::all(size, &mut Draw(&mut || rng.next_u64()));
    for out in [OutDtype::BF16, OutDtype::F16] {
        let mut launched = 0;
        for c in &all {
            let Some(launch) = Launch::for_encoding(c.encoding, (c.rows, c.cols), c.first, c.layout().as_ref(), c.round_f16, out) else {
                continue;
            };
            let name = format!("{} -> {}", c.name, out.name());
            check_launch_zeros(&g, &name, launch, &c.src, c.n, c.scale_values(), c.zeros.as_deref(), &c.scalar_as(out));
            launched += 1;
        }
        eprintln!("{}: {launched} cases launched on the GPU", out.name());
    }
}

use weightstream_io::testing::FailingSource;

/// Q4_0 work: `blocks` blocks split into chunks of `chunk_blocks`, one
/// tensor, written as BF16.
fn q4_work(src: SharedSource, blocks: usize, chunk_blocks: usize, dst: u64) -> Vec<ChunkWork> {
    q4_work_as(src, blocks, chunk_blocks, dst, OutDtype::BF16)
}

/// The same work written as `out`.
fn q4_work_as(src: SharedSource, blocks: usize, chunk_blocks: usize, dst: u64, out: OutDtype) -> Vec<ChunkWork> {
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
                op: ChunkOp::Kernel(Launch::Block(BlockFormat::Q4_0, out)),
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
    let want = cpu(&Kernel::Block(BlockFormat::Q4_0), OutDtype::BF16, 0, &bytes, blocks * 32);
    let src: SharedSource = Arc::new(MemorySource::new("mem.gguf", bytes));
    let cfg = StagingConfig { slots: 3, slot_bytes: 18 * 1000, readers: 2, write_combined: false };
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

/// The pipeline writing float16: the BF16 test's Q4_0 tensor (the same
/// chunks and ring) against the CPU's float16 bits.
#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu_round.sh runs it"]
fn pipeline_matches_cpu_writing_float16() {
    let g = gpu();
    let mut rng = Rng::from_env("pipeline_matches_cpu_writing_float16");
    let blocks = 50_001;
    let mut bytes = rng.bytes(blocks * 18);
    for b in bytes.chunks_exact_mut(18) {
        b[..2].copy_from_slice(&0x2E66u16.to_le_bytes());
    }
    let want = cpu(&Kernel::Block(BlockFormat::Q4_0), OutDtype::F16, 0, &bytes, blocks * 32);
    assert_ne!(want, cpu(&Kernel::Block(BlockFormat::Q4_0), OutDtype::BF16, 0, &bytes, blocks * 32), "the outputs differ");
    let src: SharedSource = Arc::new(MemorySource::new("mem.gguf", bytes));
    let cfg = StagingConfig { slots: 3, slot_bytes: 18 * 1000, readers: 2, write_combined: false };
    let ring = StagingRing::new(&g, cfg).unwrap();
    let dst = g.alloc(blocks * 64, "dst").unwrap();
    run(&g, &ring, &q4_work_as(src, blocks, 1000, dst.ptr(), OutDtype::F16), None, &|| false, |_| Ok(())).unwrap();
    let mut out = vec![0u8; blocks * 64];
    dst.to_host(&mut out).unwrap();
    let got: Vec<u16> = out.chunks_exact(2).map(|b| u16::from_le_bytes([b[0], b[1]])).collect();
    assert!(got == want, "float16 pipeline output differs from the CPU kernels");
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu_round.sh runs it"]
fn out_of_memory_is_an_error() {
    let g = gpu();
    let total = g.mem_info().unwrap().1;
    let impossible_tensor = || {
        let e = g.alloc(total * 2, "an impossible tensor").err().expect("allocation beyond the device must fail");
        assert!(e.is_out_of_memory(), "{e}");
        assert!(e.to_string().contains("an impossible tensor"));
    };
    // A staging ring that cannot fit: an out-of-memory error from the device
    // scratch, which is allocated before any host memory is pinned (else
    // this would pin 2x the GPU's memory of host RAM first).
    let impossible_ring = || {
        let cfg = StagingConfig { slots: 4, slot_bytes: total / 2, readers: 1, write_combined: false };
        let e = StagingRing::new(&g, cfg).err().expect("a ring of twice the device memory must fail");
        assert!(e.is_out_of_memory(), "{e}");
    };
    // The driver's free-memory figure moves by one 2 MiB granule of its own
    // around a failed ring (down after the first, back up after a later
    // one: an H200 with driver 580.159, 2026-11-27), so free memory is
    // compared after four more failures of each kind with one granule of
    // slack: a ring or tensor leaking device memory on each failure shows.
    impossible_tensor();
    impossible_ring();
    let free = g.mem_info().unwrap().0;
    for _ in 0..4 {
        impossible_tensor();
        impossible_ring();
    }
    let after = g.mem_info().unwrap().0;
    assert!(after + (2 << 20) >= free, "failed allocations leaked device memory: {free} bytes free before, {after} after");
}
