//! The GPTQ repack kernel (cuda/gptq.cu), compiled for the host and run
//! over whole launch grids, gives weightstream-repack's CPU kernel's
//! qweight and scales bit for bit: every format with a target, whole rows
//! and column ranges (a row-parallel rank's share, a ternary half block),
//! odd row counts, over several geometries, into poisoned outputs with a
//! guard after each so an unwritten word or a write past the end shows.

use weightstream_blocks::BlockFormat;
use weightstream_io::testing::random_bytes;
use weightstream_kernels::{geometry, host_grid, GptqArgs, Launch, BLOCK_DIM};
use weightstream_repack::gptq;

const GUARD: usize = 19;

fn geometries(items: u64) -> Vec<(u32, u32)> {
    vec![geometry(items, 1 << 20), (1, 32), (3, 64), (2, BLOCK_DIM), (7, 33)]
}

/// Random blocks, every fp16 d among edge values (zero, subnormal, the
/// largest, infinity, NaN: the move copies bits, whatever they mean).
fn blocks(format: BlockFormat, n: usize, seed: u64) -> Vec<u8> {
    let l = format.layout();
    let mut raw = random_bytes(n * l.bytes, seed);
    let at = l.field("D").unwrap().0;
    for (k, b) in raw.chunks_exact_mut(l.bytes).enumerate() {
        let d = [0x0000u16, 0x8000, 0x0001, 0x7BFF, 0x7C00, 0x7E01, 0x3C00][k % 7] ^ (k as u16 & 0x3F);
        b[at..at + 2].copy_from_slice(&d.to_le_bytes());
    }
    raw
}

#[test]
fn device_repack_matches_the_cpu_kernel() {
    let formats: Vec<_> = BlockFormat::ALL.iter().copied().filter(|&f| gptq::target(f).is_some()).collect();
    assert_eq!(formats.len(), 8, "every format of weightstream-repack's table");
    for (fi, &format) in formats.iter().enumerate() {
        let t = gptq::target(format).unwrap();
        let l = format.layout();
        let width = 3 * l.elems.max(2 * t.group);
        for (rows, cols) in [(1usize, 0..width), (5, 0..width), (3, t.group..width - t.group), (7, width - t.group..width), (2, 0..0)] {
            let raw = blocks(format, rows * width / l.elems, (fi * 100 + rows) as u64);
            let (words, groups) = (cols.len() / t.pack() * rows, cols.len() / t.group * rows);
            let (mut want_q, mut want_s) = (vec![0u32; words], vec![0u16; groups]);
            gptq::repack(format, &raw, rows, width, cols.clone(), &mut want_q, &mut want_s).unwrap();
            let a = GptqArgs {
                format,
                scales: 0,
                rows: rows as u64,
                width: width as u64,
                col_start: cols.start as u64,
                bits: t.bits,
                group: t.group as u32,
            };
            let n = (rows * cols.len()) as u64;
            for (g, b) in geometries(Launch::Gptq(a).groups(n)) {
                let mut q = vec![0xDEAD_BEEFu32; words + GUARD];
                let mut s = vec![0xBEEFu16; groups + GUARD];
                host_grid::run_gptq(&a, &raw, &mut q, &mut s, n, g, b).unwrap();
                let what = format!("{format:?} rows {rows} cols {cols:?} grid {g}x{b}");
                assert_eq!(&q[..words], &want_q[..], "{what}: qweight");
                assert_eq!(&s[..groups], &want_s[..], "{what}: scales");
                assert!(
                    q[words..].iter().all(|&v| v == 0xDEAD_BEEF) && s[groups..].iter().all(|&v| v == 0xBEEF),
                    "{what}: wrote past the end"
                );
            }
        }
    }
}

#[test]
fn bad_launches_are_refused_before_running() {
    let a = GptqArgs { format: BlockFormat::Q4_0, scales: 0, rows: 2, width: 64, col_start: 0, bits: 4, group: 32 };
    let raw = vec![0u8; 2 * 2 * 18];
    let (mut q, mut s) = (vec![0u32; 16], vec![0u16; 4]);
    assert!(host_grid::run_gptq(&a, &raw, &mut q, &mut s, 128, 1, 32).is_ok());
    // Source one byte short, outputs one short, columns off a group, a
    // format without a target.
    assert!(host_grid::run_gptq(&a, &raw[1..], &mut q, &mut s, 128, 1, 32).is_err());
    assert!(host_grid::run_gptq(&a, &raw, &mut q[1..], &mut s, 128, 1, 32).is_err());
    assert!(host_grid::run_gptq(&a, &raw, &mut q, &mut s[1..], 128, 1, 32).is_err());
    assert!(host_grid::run_gptq(&GptqArgs { col_start: 16, ..a }, &raw, &mut q, &mut s, 64, 1, 32).is_err());
    assert!(host_grid::run_gptq(&a, &raw, &mut q, &mut s, 96, 1, 32).is_err());
    let q4_1 = GptqArgs { format: BlockFormat::Q4_1, ..a };
    assert_eq!(host_grid::run_gptq(&q4_1, &[0u8; 80], &mut q, &mut s, 128, 1, 32), Err(host_grid::HostGridError::NoKernel("Q4_1")));
    // The elementwise runner does not take it.
    assert!(host_grid::run(&Launch::Gptq(a), &raw, &mut [0u16; 128], 128, None, None, 1, 32).is_err());
}
