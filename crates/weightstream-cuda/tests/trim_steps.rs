//! The device path's trimmed chunks, run on the CPU: the very steps the
//! pipeline issues for a chunk that keeps part of its blocks (a slice edge
//! inside a block, issue 28), with the kernels compiled for the host
//! (`host_grid`) standing for the launches and slice copies for the device
//! copies. The kept values must equal the whole chunk's, cut, bit for bit,
//! for every block format and the scaled kernels (whose `first` moves with
//! each piece).

use weightstream_cuda::trim::{steps, Out, Step, Trim, MAX_TRIM_BLOCK};
use weightstream_io::testing::random_bytes;
use weightstream_kernels::host_grid::run;
use weightstream_kernels::{BlockFormat, Element, Launch, OutDtype, ScaledArgs};

/// Run `launch` over `n` elements of `src` into `dst` (a small grid: the
/// kernels stride, so several blocks per thread are covered too).
fn host(launch: &Launch, src: &[u8], dst: &mut [u16], n: u64, scales: Option<&[f32]>) {
    run(launch, src, dst, n, scales, None, 3, 64).unwrap_or_else(|e| panic!("{launch:?}: {e:?}"));
}

/// The kept values of a chunk through its trimmed steps, as the pipeline
/// runs them: kernels into the destination or the one-block scratch,
/// copies out of the scratch.
fn trimmed(launch: &Launch, src: &[u8], n: u64, trim: &Trim, scales: Option<&[f32]>) -> Vec<u16> {
    let mut dst = vec![0xDEADu16; (trim.keep.end - trim.keep.start) as usize];
    let mut scratch = vec![0xBEEFu16; MAX_TRIM_BLOCK as usize];
    for step in steps(launch, n, trim).unwrap() {
        match step {
            Step::Kernel { launch, src_off, n, out } => {
                let src = &src[src_off as usize..];
                match out {
                    Out::Dst(off) => host(&launch, src, &mut dst[off as usize..], n, scales),
                    Out::Scratch => host(&launch, src, &mut scratch, n, scales),
                }
            }
            Step::Copy { from, dst_off } => {
                let len = (from.end - from.start) as usize;
                dst[dst_off as usize..dst_off as usize + len].copy_from_slice(&scratch[from.start as usize..from.end as usize]);
            }
        }
    }
    dst
}

/// Keep ranges of a chunk of `blocks` blocks of `block` elements.
fn keeps(block: u64, blocks: u64) -> Vec<std::ops::Range<u64>> {
    let n = block * blocks;
    let mut v = vec![1..n, 0..n - 1, 1..2.min(n), block / 2..block / 2 + 1, 3..n - 3, block - 1..(block + 1).min(n), 0..1, n - 1..n];
    v.retain(|r| r.start < r.end && r.end <= n);
    v
}

#[test]
fn trimmed_block_chunks_keep_exactly_the_whole_chunks_values() {
    for (k, f) in BlockFormat::ALL.iter().enumerate() {
        let l = f.layout();
        let (block, size) = (l.elems as u64, l.bytes as u64);
        let blocks = 4;
        let n = block * blocks;
        let src = random_bytes((blocks * size) as usize, 0x7819 + k as u64);
        for out in [OutDtype::BF16, OutDtype::F16] {
            let launch = Launch::Block(*f, out);
            let mut whole = vec![0u16; n as usize];
            host(&launch, &src, &mut whole, n, None);
            for keep in keeps(block, blocks) {
                let got = trimmed(&launch, &src, n, &Trim { keep: keep.clone(), block, block_bytes: size }, None);
                assert!(got == whole[keep.start as usize..keep.end as usize], "{} {out:?}: keep {keep:?}", f.name());
            }
        }
    }
}

#[test]
fn trimmed_scaled_chunks_move_first_with_each_piece() {
    // INT4 (8 values per 32-bit word) and E2M1 (2 per byte) with a scale per
    // group of 16 columns: a piece that started at the chunk's first would
    // take the wrong group's scale.
    let (rows, cols) = (3u64, 64u64);
    let scales: Vec<f32> = (0..rows * cols / 16).map(|i| 0.5 + i as f32 * 0.25).collect();
    for (element, block, size) in [(Element::Int4, 8u64, 4u64), (Element::E2m1, 2, 1), (Element::Int8, 4, 4)] {
        // A chunk of row 1's 64 columns, starting at element 64.
        let first = cols;
        let n = cols;
        let src = random_bytes((n / block * size) as usize, 99 + block);
        let launch = Launch::Scaled(ScaledArgs {
            element,
            scales: 1,
            first,
            cols,
            block_rows: 1,
            block_cols: 16,
            grid_cols: cols / 16,
            ..Default::default()
        });
        let mut whole = vec![0u16; n as usize];
        host(&launch, &src, &mut whole, n, Some(&scales));
        for keep in keeps(block, n / block) {
            let got = trimmed(&launch, &src, n, &Trim { keep: keep.clone(), block, block_bytes: size }, Some(&scales));
            assert!(got == whole[keep.start as usize..keep.end as usize], "{element:?}: keep {keep:?}");
        }
    }
}

#[test]
fn a_trim_beyond_the_scratch_or_the_chunk_is_an_error() {
    let launch = Launch::Block(BlockFormat::Q4_K, OutDtype::BF16);
    assert!(steps(&launch, 512, &Trim { keep: 1..600, block: 256, block_bytes: 144 }).is_err());
    assert!(steps(&launch, 1024, &Trim { keep: 1..2, block: 512, block_bytes: 288 }).is_err());
    assert!(steps(&launch, 500, &Trim { keep: 1..2, block: 256, block_bytes: 144 }).is_err());
}
