//! Slices of any range through the planner and the CPU executor (issue 27:
//! a column range `[C, C)` once underflowed into a worker panic; issue 28:
//! column edges inside a block are read from the covering blocks).

use std::path::Path;
use std::sync::Arc;

use weightstream::{Plan, PlanOptions};
use weightstream_format::catalog::{CatalogFile, Dtype, Metadata, TensorInfo};
use weightstream_format::gguf::GgmlType;
use weightstream_format::{Catalog, Format, MemorySource, SharedSource};

/// One tensor of any ggml type (the id from the first byte, among those
/// weightstream loads), a shape of a few blocks, random contents, and a
/// slice `rows x cols` from arbitrary bounds. Either `bad_slice` for a
/// range outside the matrix or backwards (never for where a column edge
/// falls, nor for rows splitting a 3-D tensor's outer slices, which give
/// the 2-D rectangle), or the slice's values are exactly that rectangle of
/// the whole tensor's.
pub fn slices(data: &[u8]) {
    if data.len() < 12 {
        return;
    }
    let loadable: Vec<GgmlType> =
        GgmlType::all().filter(|t| t.block_format().is_some() || matches!(t.name(), "F32" | "F16" | "BF16")).collect();
    let ty = loadable[data[0] as usize % loadable.len()];
    let dims = 1 + data[1] as usize % 3;
    let blocks_per_row = 1 + data[2] as u64 % 4;
    let cols = blocks_per_row * ty.block();
    let shape: Vec<u64> = match dims {
        1 => vec![cols],
        2 => vec![1 + data[3] as u64 % 5, cols],
        _ => vec![1 + data[3] as u64 % 3, 2, cols],
    };
    let n: u64 = shape.iter().product();
    let nbytes = ty.nbytes(n).expect("small shapes fit");
    let bound = |i: usize| u16::from_le_bytes([data[i], data[i + 1]]) as u64 % (cols + 3);
    let (r0, r1, c0, c1) = (data[4] as u64 % 8, data[5] as u64 % 8, bound(6), bound(8));
    let body = &data[10..];
    let bytes: Vec<u8> = (0..nbytes as usize).map(|i| body[i % body.len()] ^ (i as u8).wrapping_mul(31)).collect();
    let src: SharedSource = Arc::new(MemorySource::new("fuzz.gguf", bytes));
    let cat = Catalog {
        format: Format::Gguf,
        root: Path::new("fuzz.gguf").to_path_buf(),
        files: vec![CatalogFile { path: "fuzz.gguf".into(), source: src }],
        metadata: Metadata::Gguf { version: 3, alignment: 32, kv: vec![] },
        tensors: vec![TensorInfo { nbytes, shape: shape.clone(), ..TensorInfo::test("t", Dtype::Ggml(ty), &shape) }],
        config: None,
    };
    let plan = Plan::new(&cat, &PlanOptions::default()).expect("one loadable tensor");
    let whole = &plan.jobs[0];
    let full = crate::load_job(&cat, whole).expect("a whole tensor loads");
    let job = match whole.slice(r0..r1, c0..c1) {
        Ok(j) => j,
        Err(e) => {
            assert!(matches!(e, weightstream::Error::BadSlice { .. }), "{e}");
            let (nrows, _) = whole.matrix;
            let outside = r0 > r1 || r1 > nrows || c0 > c1 || c1 > cols;
            assert!(outside, "{e}: [{r0}, {r1}) x [{c0}, {c1}) of {shape:?} refused");
            return;
        }
    };
    // Only the blocks covering the columns are read.
    let (block, size) = whole.encoding.block();
    let covering = if r0 >= r1 || c0 >= c1 { 0 } else { (r1 - r0) * (c1.div_ceil(block) - c0 / block) * size };
    assert_eq!(job.src_bytes(), covering, "{} [{r0}, {r1}) x [{c0}, {c1}) reads its covering blocks", ty.name());
    assert_eq!(job.shape.iter().product::<u64>(), job.n_elems, "shape {:?} for {} values", job.shape, job.n_elems);
    let got = crate::load_job(&cat, &job).expect("an accepted slice loads");
    let (_, ncols) = whole.matrix;
    let want: Vec<u16> = (r0..r1).flat_map(|r| (c0..c1).map(move |c| (r, c))).map(|(r, c)| full[(r * ncols + c) as usize]).collect();
    assert_eq!(got, want, "{} [{r0}, {r1}) x [{c0}, {c1}) of {shape:?}", ty.name());
}
