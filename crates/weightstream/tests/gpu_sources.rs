//! GPU loads through every source give the bits of a CPU load from mmap:
//! read and mmap through pinned staging, direct (4 KiB-aligned reads with
//! the skew skipped) and gds (cuFile into device scratch, or the noted
//! fallback where cuFile cannot run). Small staging slots make many chunks
//! with every kind of skew. Needs a CUDA GPU: scripts/gpu_round.sh runs it;
//! with WEIGHTSTREAM_REQUIRE_GDS=1 the gds source must really use cuFile.

mod common;

use common::{dir, write_checkpoint};
use weightstream::dequant::OutDtype;
use weightstream::{Control, CpuExecutor, GpuExecutor, HostTensor, LoadStats, Plan, PlanOptions, SourceKind, Staging};

/// The CPU's tensors from a mapped load of `path`.
fn cpu_reference(path: &std::path::Path) -> Vec<HostTensor> {
    let cat = weightstream::open_with_source(path, SourceKind::Mmap).unwrap();
    let plan = Plan::new(&cat, &PlanOptions::default()).unwrap();
    let mut v = vec![];
    CpuExecutor::new(&Default::default())
        .unwrap()
        .stream(&cat, &plan, Control::default(), |t| {
            v.push(t);
            Ok(())
        })
        .unwrap();
    v
}

/// Load `path` through `kind` with `gpu`, check the CPU's bits, return the stats.
fn gpu_load_matches(gpu: &GpuExecutor, path: &std::path::Path, kind: SourceKind, reference: &[HostTensor], what: &str) -> LoadStats {
    let cat = weightstream::open_with_source(path, kind).unwrap();
    let plan = Plan::new(&cat, &PlanOptions::default()).unwrap();
    let mut got = vec![];
    let stats = gpu
        .stream(&cat, &plan, Control::default(), |t| {
            got.push(t);
            Ok(())
        })
        .unwrap();
    assert_eq!(got.len(), reference.len());
    for (g, r) in got.iter().zip(reference) {
        assert!(g.to_host().unwrap() == r.data, "{what}: '{}' differs from the CPU", r.name);
    }
    stats
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu_round.sh runs it"]
fn gpu_loads_through_every_source_match_the_cpu() {
    let d = dir("gpu-sources");
    let path = write_checkpoint(&d);
    let reference = cpu_reference(&path);
    for kind in [SourceKind::Mmap, SourceKind::Read, SourceKind::Direct, SourceKind::Gds] {
        for staging in [Staging { slots: Some(3), slot_bytes: Some(4096 + 18), readers: Some(2), ..Default::default() }, Staging::default()]
        {
            let gpu = GpuExecutor::new(0, &staging).unwrap();
            gpu_load_matches(&gpu, &path, kind, &reference, &format!("{kind:?} {staging:?}"));
            let notes = gpu.notes();
            eprintln!("{kind:?} {staging:?}: notes {notes:?}");
            if kind == SourceKind::Gds {
                let used = notes.iter().any(|n| n.text.contains("read with cuFile") && !n.fallback);
                assert!(
                    used || notes.iter().any(|n| n.fallback && n.text.contains("instead")),
                    "gds neither used nor explained: {notes:?}"
                );
                if std::env::var_os("WEIGHTSTREAM_REQUIRE_GDS").is_some() {
                    assert!(used, "cuFile was required: {notes:?}");
                }
            }
        }
    }
}

/// A dropped executor's pinned ring serves the next executor of the same
/// device and geometry in the process (issue 56 item 3: no pinning per
/// Loader), plain and write-combined, with the CPU's bits each time, and
/// the load's phases name the readers that ran.
#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu_round.sh runs it"]
fn a_dropped_executors_ring_serves_the_next() {
    let d = dir("gpu-ring-pool");
    let path = write_checkpoint(&d);
    let reference = cpu_reference(&path);
    for wc in [false, true] {
        // A geometry no other test uses: the pool's count is this test's alone.
        let (slots, slot_bytes, readers) = (5, 3 * 4096 + 18, 3);
        let staging = Staging {
            slots: Some(slots),
            slot_bytes: Some(slot_bytes),
            readers: Some(readers),
            write_combined: Some(wc),
            ..Default::default()
        };
        let cfg = weightstream_cuda::StagingConfig { slots, slot_bytes, readers, write_combined: wc };
        let idle = || weightstream_cuda::idle_rings(0, cfg);
        assert_eq!(idle(), 0);
        let first = GpuExecutor::new(0, &staging).unwrap();
        let stats = gpu_load_matches(&first, &path, SourceKind::Read, &reference, &format!("first, write-combined {wc}"));
        assert!((1..=readers).contains(&stats.phases.readers_busy.len()), "{:?}", stats.phases);
        drop(first);
        assert_eq!(idle(), 1, "the first executor's ring was kept");
        let second = GpuExecutor::new(0, &staging).unwrap();
        gpu_load_matches(&second, &path, SourceKind::Read, &reference, &format!("second, write-combined {wc}"));
        assert_eq!(idle(), 0, "the second executor took it");
        drop(second);
        assert_eq!(idle(), 1);
    }
}

/// Row, column and rectangle slices of every block format, floats and FP8,
/// with column edges on and inside blocks, on the GPU give the CPU's sliced
/// bits, as BF16 and as float16 (every source; small slots so rows split
/// into several chunks).
#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu_round.sh runs it"]
fn gpu_slices_match_the_cpu() {
    let d = dir("gpu-slices");
    let paths = [common::write_block_gguf(&d), common::write_fp8_checkpoint(&d)];
    let cpu = CpuExecutor::new(&Default::default()).unwrap();
    for path in &paths {
        for kind in [SourceKind::Mmap, SourceKind::Read, SourceKind::Direct, SourceKind::Gds] {
            let cat = weightstream::open_with_source(path, kind).unwrap();
            let full = Plan::new(&cat, &PlanOptions::default()).unwrap();
            let mut jobs = vec![];
            for job in &full.jobs {
                let (rows, cols) = job.matrix;
                let block = job.encoding.block().0;
                let nb = cols / block;
                // The last three: edges inside blocks (issue 28), trimmed on the device.
                for (r, c) in [
                    (1..rows, 0..cols),
                    (0..rows, block..nb * block),
                    (rows / 3..rows - rows / 3, (nb / 2) * block..(nb / 2 + 1) * block),
                    (0..rows, 1..cols - 1),
                    (1..rows, block / 2..block / 2 + 1),
                    (0..rows, 3..cols.min(block + 5)),
                ] {
                    jobs.push(job.slice(r, c).unwrap());
                }
            }
            // Both outputs: the kernels' BF16 and float16 instantiations.
            for out in [OutDtype::BF16, OutDtype::F16] {
                let plan = Plan { jobs: jobs.clone(), skipped: vec![] }.with_out(out);
                let mut want = vec![];
                cpu.stream(&cat, &plan, Control::default(), |t| {
                    want.push(t);
                    Ok(())
                })
                .unwrap();
                let gpu =
                    GpuExecutor::new(0, &Staging { slots: Some(3), slot_bytes: Some(4096 + 18), readers: Some(2), ..Default::default() })
                        .unwrap();
                let mut got = vec![];
                gpu.stream(&cat, &plan, Control::default(), |t| {
                    got.push(t);
                    Ok(())
                })
                .unwrap();
                for (g, w) in got.iter().zip(&want) {
                    assert!(g.to_host().unwrap() == w.data, "{kind:?} {out:?}: slice of '{}' differs from the CPU", w.name);
                }
            }
        }
    }
}
