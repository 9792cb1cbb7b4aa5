//! GPU loads through every source give the bits of a CPU load from mmap:
//! read and mmap through pinned staging, direct (4 KiB-aligned reads with
//! the skew skipped) and gds (cuFile into device scratch, or the noted
//! fallback where cuFile cannot run). Small staging slots make many chunks
//! with every kind of skew. Needs a CUDA GPU: scripts/gpu_round.sh runs it;
//! with WEIGHTSTREAM_REQUIRE_GDS=1 the gds source must really use cuFile.

mod common;

use common::{dir, write_checkpoint};
use weightstream::{Control, CpuExecutor, GpuExecutor, GpuOptions, HostTensor, Plan, PlanOptions, SourceKind, StagingConfig};

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu_round.sh runs it"]
fn gpu_loads_through_every_source_match_the_cpu() {
    let d = dir("gpu-sources");
    let path = write_checkpoint(&d);
    let reference: Vec<HostTensor> = {
        let cat = weightstream::open_with_source(&path, SourceKind::Mmap).unwrap();
        let plan = Plan::new(&cat, &PlanOptions::default()).unwrap();
        let mut v = vec![];
        CpuExecutor::new(&Default::default()).unwrap().stream(&cat, &plan, Control::default(), |t| {
            v.push(t);
            Ok(())
        }).unwrap();
        v
    };
    for kind in [SourceKind::Mmap, SourceKind::Read, SourceKind::Direct, SourceKind::Gds] {
        for staging in [StagingConfig { slots: 3, slot_bytes: 4096 + 18, readers: 2 }, StagingConfig::default()] {
            let cat = weightstream::open_with_source(&path, kind).unwrap();
            let plan = Plan::new(&cat, &PlanOptions::default()).unwrap();
            let gpu = GpuExecutor::new(&GpuOptions { device: 0, staging }).unwrap();
            let mut got = vec![];
            gpu.stream(&cat, &plan, Control::default(), |t| {
                got.push(t);
                Ok(())
            }).unwrap();
            let notes = gpu.notes();
            eprintln!("{kind:?} {staging:?}: source {}, notes {notes:?}", cat.files[0].source.name());
            assert_eq!(got.len(), reference.len());
            for (g, r) in got.iter().zip(&reference) {
                assert!(g.to_host().unwrap() == r.data, "{kind:?} {staging:?}: '{}' differs from the CPU", r.name);
            }
            if kind == SourceKind::Gds {
                let used = notes.iter().any(|n| n.contains("read with cuFile"));
                assert!(used || notes.iter().any(|n| n.contains("instead")), "gds neither used nor explained: {notes:?}");
                if std::env::var_os("WEIGHTSTREAM_REQUIRE_GDS").is_some() {
                    assert!(used, "cuFile was required: {notes:?}");
                }
            }
        }
    }
}
