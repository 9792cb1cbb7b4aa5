//! Sliced plans: a row range, a column range or both of any tensor give
//! exactly the bits of slicing the whole tensor's BF16 result, for every
//! block format, floats and FP8 (block and per-channel scales), through
//! every source and with chunks small enough that rows split; only the
//! slice's bytes are read (the blocks covering it, where a column edge
//! falls inside a block: issue 28); a slice outside is an error. Any of
//! them with its rows un-permuted in whole heads (GGUF q/k, issue 45)
//! gives the same values in Hugging Face row order.

mod common;

use std::ops::Range;

use common::{dir, write_block_gguf, write_fp8_checkpoint};
use weightstream::{Catalog, Control, CpuExecutor, Error, HostTensor, Job, Plan, PlanOptions, SourceKind, Staging};

fn whole(cat: &Catalog) -> Vec<HostTensor> {
    common::stream_all(cat, &Staging::default())
}

/// The rectangle of a whole result, row-major.
fn cut(t: &HostTensor, cols: u64, r: &Range<u64>, c: &Range<u64>) -> Vec<u16> {
    let mut v = vec![];
    for row in r.clone() {
        v.extend_from_slice(&t.data[(row * cols + c.start) as usize..(row * cols + c.end) as usize]);
    }
    v
}

/// Row and column ranges to try on a `[rows, cols]` matrix with `block`-element blocks.
fn rectangles(rows: u64, cols: u64, block: u64) -> Vec<(Range<u64>, Range<u64>)> {
    let nb = cols / block;
    let mut v = vec![(0..rows, 0..cols), (1..rows, 0..cols), (0..1, 0..cols), (rows / 2..rows / 2, 0..cols)];
    for (b0, b1) in [(0, 1), (1, nb), (nb / 2, nb / 2 + 1), (0, nb), (nb - 1, nb), (1, 1)] {
        let c = b0 * block..b1 * block;
        v.push((0..rows, c.clone()));
        v.push((rows / 3..rows - rows / 3, c));
    }
    // Edges inside blocks (issue 28): odd offsets and widths, inside one
    // block, across one edge, the whole row but its ends, empty.
    let half = block / 2;
    for c in [1..cols - 1, 3..(block + 5).min(cols), half..half + 1, cols - 7..cols, 0..cols - 1, 5..5, block - 1..(block + 1).min(cols)] {
        if c.start <= c.end && c.end <= cols {
            v.push((0..rows, c.clone()));
            v.push((rows / 3..rows - rows / 3, c));
        }
    }
    if nb > 2 {
        v.push((1..rows, block + 3..cols - block - 1));
    }
    v
}

/// File bytes a rectangle reads: the blocks covering its columns, per row.
fn covering_bytes(r: &Range<u64>, c: &Range<u64>, (block, size): (u64, u64)) -> u64 {
    if r.is_empty() || c.is_empty() {
        return 0;
    }
    (r.end - r.start) * (c.end.div_ceil(block) - c.start / block) * size
}

fn check(cat: &Catalog, opts: Staging, what: &str) {
    let reference = whole(cat);
    let full = Plan::new(cat, &PlanOptions::default()).unwrap();
    let cpu = CpuExecutor::new(&opts).unwrap();
    for (job, want) in full.jobs.iter().zip(&reference) {
        let (rows, cols) = job.matrix;
        for (r, c) in rectangles(rows, cols, job.encoding.block().0) {
            let sliced = job.slice(r.clone(), c.clone()).unwrap();
            assert_eq!(sliced.n_elems, (r.end - r.start) * (c.end - c.start));
            assert_eq!(sliced.shape.last().copied(), Some(c.end - c.start), "{}: shape {:?}", job.name, sliced.shape);
            assert_eq!(sliced.src_bytes(), covering_bytes(&r, &c, job.encoding.block()), "{}: only the slice's blocks", job.name);
            let plan = Plan { jobs: vec![sliced], skipped: vec![] };
            // stream and load_into both.
            let mut got = vec![];
            cpu.stream(cat, &plan, Control::default(), |t| {
                got.push(t);
                Ok(())
            })
            .unwrap();
            let mut buf = vec![0xFFFFu16; plan.jobs[0].n_elems as usize];
            cpu.load_into(cat, &plan, &mut [buf.as_mut_slice()], Control::default(), |_| Ok(())).unwrap();
            let expect = cut(want, cols, &r, &c);
            assert!(got[0].data == expect, "{what}: {} rows {r:?} cols {c:?} differs from the sliced whole", job.name);
            assert!(buf == expect, "{what}: {} rows {r:?} cols {c:?}: load_into differs", job.name);
            check_unpermuted(cat, &cpu, &plan.jobs[0], &expect, r.end - r.start, &format!("{what}: {} rows {r:?} cols {c:?}", job.name));
        }
    }
}

/// The slice with its rows un-permuted in heads of 2 rows and of all its
/// rows (where whole heads of an even size): `expect` (the slice in stored
/// order) with stored row `h*p + 2j + s` at output row `h*p + s*p/2 + j`
/// (transformers' reverse_permute_weights), through stream and load_into.
fn check_unpermuted(cat: &Catalog, cpu: &CpuExecutor, sliced: &Job, expect: &[u16], rows: u64, what: &str) {
    let r0 = sliced.first / sliced.matrix.1.max(1);
    for p in [2, rows] {
        if rows == 0 || p % 2 != 0 || rows % p != 0 || r0 % p != 0 {
            continue;
        }
        let width = (expect.len() as u64 / rows) as usize;
        let mut want = vec![0u16; expect.len()];
        for (k, row) in expect.chunks(width.max(1)).enumerate().take(rows as usize) {
            let (h, i) = (k as u64 / p, k as u64 % p);
            let dest = (h * p + (i % 2) * (p / 2) + i / 2) as usize;
            want[dest * width..(dest + 1) * width].copy_from_slice(row);
        }
        let plan = Plan { jobs: vec![sliced.unpermuted(p).unwrap()], skipped: vec![] };
        let mut got = vec![];
        cpu.stream(cat, &plan, Control::default(), |t| {
            got.push(t);
            Ok(())
        })
        .unwrap();
        let mut buf = vec![0xFFFFu16; expect.len()];
        cpu.load_into(cat, &plan, &mut [buf.as_mut_slice()], Control::default(), |_| Ok(())).unwrap();
        assert!(got[0].data == want, "{what}: un-permuted in heads of {p} rows differs");
        assert!(buf == want, "{what}: un-permuted in heads of {p} rows: load_into differs");
    }
}

#[test]
fn slices_of_every_format_through_every_source_match_the_sliced_whole() {
    let d = dir("slices");
    let gguf = write_block_gguf(&d);
    let fp8 = write_fp8_checkpoint(&d);
    for path in [&gguf, &fp8] {
        // Gds on the CPU path reads with O_DIRECT under its own name.
        for kind in [SourceKind::Mmap, SourceKind::Read, SourceKind::Direct, SourceKind::Gds] {
            let cat = weightstream::open_with_source(path, kind).unwrap();
            // 100 bytes: rows split into many chunks (one block for
            // K-quants); through the cached sources only, where it is cheap
            // (O_DIRECT reads a whole 4 KiB block per 100-byte chunk).
            let tiny = matches!(kind, SourceKind::Mmap | SourceKind::Read);
            for (readers, chunk) in [(1, 4096 + 18), (3, 1 << 20), (2, if tiny { 100 } else { 8192 + 36 })] {
                check(
                    &cat,
                    Staging { readers: Some(readers), slot_bytes: Some(chunk), ..Default::default() },
                    &format!("{kind:?} chunk {chunk}"),
                );
            }
        }
    }
}

#[test]
fn slices_outside_are_errors() {
    let d = dir("bad-slices");
    let cat = weightstream::open_with_source(write_block_gguf(&d), SourceKind::Mmap).unwrap();
    let plan = Plan::new(&cat, &PlanOptions::default()).unwrap();
    let job: &Job = plan.job("q4_k.m").unwrap();
    let bad = |r: Range<u64>, c: Range<u64>| match job.slice(r.clone(), c.clone()) {
        Err(e @ Error::BadSlice { .. }) => e.to_string(),
        other => panic!("rows {r:?} cols {c:?}: expected BadSlice, got {other:?}"),
    };
    // Inside a block: no longer an error (issue 28).
    assert_eq!(job.slice(0..7, 0..128).unwrap().src_bytes(), covering_bytes(&(0..7), &(0..128), job.encoding.block()));
    assert!(bad(0..7, 256..1000).contains("outside"));
    assert!(bad(3..8, 0..256).contains("outside"));
    #[allow(clippy::reversed_empty_ranges)]
    let backwards = 5..3;
    assert!(bad(backwards, 0..256).contains("outside"));
    let sliced = job.slice(0..2, 0..256).unwrap();
    assert!(sliced.slice(0..1, 0..256).unwrap_err().to_string().contains("only a whole tensor"));
    // Un-permuting takes whole heads of an even number of rows, once, and
    // is not sliced further.
    let q = plan.job("q4_k.m").unwrap();
    assert!(q.unpermuted(3).unwrap_err().to_string().contains("heads of 3 rows"));
    assert!(q.slice(1..3, 0..256).unwrap().unpermuted(2).is_err());
    assert!(q.unpermuted(2).is_err(), "7 rows are not whole heads of 2");
    let two = q.slice(2..4, 0..256).unwrap().unpermuted(2).unwrap();
    assert!(two.unpermuted(2).is_err());
    assert!(two.slice(0..2, 0..256).unwrap_err().to_string().contains("only a whole tensor"));
    assert_eq!(Error::BadSlice { tensor: "t".into(), rows: 0..1, cols: 0..1, shape: (1, 1), why: "x".into() }.code(), "bad_slice");
}
