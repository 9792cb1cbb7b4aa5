//! GPU loads through every source give the bits of a CPU load from mmap:
//! read and mmap through pinned staging, direct (4 KiB-aligned reads with
//! the skew skipped) and gds (cuFile into device scratch, or the noted
//! fallback where cuFile cannot run). Small staging slots make many chunks
//! with every kind of skew. Needs a CUDA GPU: scripts/gpu_round.sh runs it;
//! with WEIGHTSTREAM_REQUIRE_GDS=1 the gds source must really use cuFile.

mod common;

use common::{dir, write_checkpoint};
use weightstream::dequant::OutDtype;
use weightstream::{Control, CpuExecutor, GpuExecutor, HostTensor, Plan, PlanOptions, SourceKind, Staging};

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu_round.sh runs it"]
fn gpu_loads_through_every_source_match_the_cpu() {
    let d = dir("gpu-sources");
    let path = write_checkpoint(&d);
    let reference: Vec<HostTensor> = {
        let cat = weightstream::open_with_source(&path, SourceKind::Mmap).unwrap();
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
    };
    for kind in [SourceKind::Mmap, SourceKind::Read, SourceKind::Direct, SourceKind::Gds] {
        for staging in [Staging { slots: Some(3), slot_bytes: Some(4096 + 18), readers: Some(2), ..Default::default() }, Staging::default()]
        {
            let cat = weightstream::open_with_source(&path, kind).unwrap();
            let plan = Plan::new(&cat, &PlanOptions::default()).unwrap();
            let gpu = GpuExecutor::new(0, &staging).unwrap();
            let mut got = vec![];
            gpu.stream(&cat, &plan, Control::default(), |t| {
                got.push(t);
                Ok(())
            })
            .unwrap();
            let notes = gpu.notes();
            eprintln!("{kind:?} {staging:?}: source {}, notes {notes:?}", cat.files[0].source.name());
            assert_eq!(got.len(), reference.len());
            for (g, r) in got.iter().zip(&reference) {
                assert!(g.to_host().unwrap() == r.data, "{kind:?} {staging:?}: '{}' differs from the CPU", r.name);
            }
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
