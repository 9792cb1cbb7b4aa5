//! Every source gives the same BF16 bits. The read and direct sources (and
//! `auto` on a cold file) against mmap, through the CPU executor's
//! read-ahead ring with several reader counts and chunk sizes, over a
//! checkpoint whose tensors start at hundreds of different 4 KiB residues,
//! with one-byte tensors and a last tensor ending inside the file's partial
//! last block. Plus a file that shrinks under a direct load.

mod common;

use std::fs::File;

use common::{dir, write_checkpoint};
use weightstream::format::io::evict;
use weightstream::{Catalog, Control, CpuExecutor, Error, HostTensor, Plan, PlanOptions, SourceKind, Staging};

fn load(cat: &Catalog, opts: Staging) -> Vec<HostTensor> {
    let plan = Plan::new(cat, &PlanOptions::default()).unwrap();
    let cpu = CpuExecutor::new(&opts).unwrap();
    let mut out = vec![];
    cpu.stream(cat, &plan, Control::default(), |t| {
        out.push(t);
        Ok(())
    })
    .unwrap();
    // load_into must agree with stream.
    let mut bufs: Vec<Vec<u16>> = plan.jobs.iter().map(|j| vec![0xFFFF; j.n_elems as usize]).collect();
    let mut dsts: Vec<&mut [u16]> = bufs.iter_mut().map(|b| b.as_mut_slice()).collect();
    let mut done = vec![];
    cpu.load_into(cat, &plan, &mut dsts, Control::default(), |i| {
        done.push(i);
        Ok(())
    })
    .unwrap();
    assert_eq!(done, (0..plan.jobs.len()).collect::<Vec<_>>(), "every tensor reported once, in order");
    for (t, b) in out.iter().zip(&bufs) {
        assert!(&t.data == b, "{}: load_into differs from stream", t.name);
    }
    out
}

#[test]
fn every_source_gives_the_bits_of_mmap() {
    let d = dir("sources");
    let path = write_checkpoint(&d);
    let reference = load(&weightstream::open_with_source(&path, SourceKind::Mmap).unwrap(), Staging::default());
    let residues: std::collections::HashSet<u64> = {
        let cat = weightstream::open_with_source(&path, SourceKind::Mmap).unwrap();
        cat.tensors.iter().map(|t| t.offset % 4096).collect()
    };
    assert!(residues.len() > 400, "only {} distinct start residues", residues.len());

    let configs = [
        (SourceKind::Read, 1, 4096 + 13),
        (SourceKind::Read, 3, 1 << 20),
        (SourceKind::Direct, 1, 4096 + 13),
        (SourceKind::Direct, 4, 1000),
        (SourceKind::Direct, 2, 4 << 20),
        (SourceKind::Gds, 3, 64 << 10),
    ];
    for (kind, readers, chunk) in configs {
        let cat = weightstream::open_with_source(&path, kind).unwrap();
        let want = match kind {
            SourceKind::Read => "read",
            _ => "direct",
        };
        // gds on the CPU path reads with O_DIRECT (its name says gds).
        assert!(cat.files[0].source.name() == want || cat.files[0].source.name() == "gds", "{kind:?}: {}", cat.files[0].source.name());
        let got = load(&cat, Staging { readers: Some(readers), slot_bytes: Some(chunk), ..Default::default() });
        assert_eq!(got.len(), reference.len());
        for (g, r) in got.iter().zip(&reference) {
            assert!(g == r, "{kind:?} readers={readers} chunk={chunk}: '{}' differs from mmap", r.name);
        }
    }

    // auto on a cold file chooses direct, and says so.
    evict(&File::open(&path).unwrap()).unwrap();
    let cat = weightstream::open(&path).unwrap();
    assert_eq!(cat.files[0].source.name(), "direct", "{:?}", cat.files[0].source.note());
    assert!(cat.files[0].source.note().unwrap().starts_with("auto:"));
    assert!(load(&cat, Staging::default()) == reference, "auto (direct) differs from mmap");
}

#[test]
fn a_file_that_shrinks_under_a_direct_load_is_a_read_error() {
    let d = dir("shrink");
    let path = write_checkpoint(&d);
    let cat = weightstream::open_with_source(&path, SourceKind::Direct).unwrap();
    assert_eq!(cat.files[0].source.name(), "direct");
    let len = std::fs::metadata(&path).unwrap().len();
    File::options().write(true).open(&path).unwrap().set_len(len - 5000).unwrap();
    let plan = Plan::new(&cat, &PlanOptions::default()).unwrap();
    let cpu = CpuExecutor::new(&Staging { readers: Some(2), slot_bytes: Some(8192), ..Default::default() }).unwrap();
    match cpu.stream(&cat, &plan, Control::default(), |_| Ok(())) {
        Err(Error::Read { file, tensor, offset, .. }) => {
            assert_eq!(file, path);
            assert!(tensor == "matrix" || tensor == "z_last", "{tensor}");
            assert!(offset < len);
        }
        other => panic!("expected a read error, got {other:?}"),
    }
}
