//! The FP4 repack kernel (cuda/fp4.cu), compiled for the host and run
//! over whole launch grids, gives weightstream-repack's CPU kernel's
//! packed codes and scales bit for bit: MXFP4 and NVFP4, whole rows and
//! column ranges (a row-parallel rank's share, half an NVFP4 block), odd
//! row counts, every scale byte that has an image (0x7F and set sign bits
//! included), over several geometries, into poisoned outputs with a guard
//! after each so an unwritten word or a write past the end shows.

use weightstream_blocks::block::{mxfp4, nvfp4};
use weightstream_blocks::BlockFormat;
use weightstream_io::testing::random_bytes;
use weightstream_kernels::{geometry, host_grid, Fp4Args, Launch, BLOCK_DIM};
use weightstream_repack::fp4;

const GUARD: usize = 19;

/// Random blocks; scale bytes cycle through every byte with an image.
fn blocks(format: BlockFormat, n: usize, seed: u64) -> Vec<u8> {
    let l = format.layout();
    let mut raw = random_bytes(n * l.bytes, seed);
    let (at, k) = if format == BlockFormat::MXFP4 { (mxfp4::E, 1) } else { (nvfp4::D, 4) };
    let mut next = 0u8;
    for b in raw.chunks_exact_mut(l.bytes) {
        for x in &mut b[at..at + k] {
            *x = next;
            next = next.wrapping_add(37);
            if *x == 0xFF {
                *x = 0x7F;
            }
        }
    }
    raw
}

#[test]
fn device_repack_matches_the_cpu_kernel() {
    for (fi, format) in [BlockFormat::MXFP4, BlockFormat::NVFP4].into_iter().enumerate() {
        let t = fp4::target(format).unwrap();
        let l = format.layout();
        let width = 4 * l.elems;
        for (rows, cols) in [(1usize, 0..width), (5, 0..width), (3, t.group..width - t.group), (7, width - t.group..width), (2, 0..0)] {
            let raw = blocks(format, rows * width / l.elems, (fi * 100 + rows) as u64);
            let (bytes, groups) = (cols.len() / 2 * rows, cols.len() / t.group * rows);
            let (mut want_p, mut want_s) = (vec![0u8; bytes], vec![0u8; groups]);
            fp4::repack(format, &raw, rows, width, cols.clone(), &mut want_p, &mut want_s).unwrap();
            let a =
                Fp4Args { format, scales: 0, rows: rows as u64, width: width as u64, col_start: cols.start as u64, group: t.group as u32 };
            let n = (rows * cols.len()) as u64;
            for (g, b) in [geometry(Launch::Fp4(a).groups(n), 1 << 20), (1, 32), (3, 64), (2, BLOCK_DIM), (7, 33)] {
                let mut p = vec![0xDEAD_BEEFu32; bytes / 4 + GUARD];
                let mut s = vec![0xA5u8; groups + GUARD];
                host_grid::run_fp4(&a, &raw, &mut p, &mut s, n, g, b).unwrap();
                let what = format!("{format:?} rows {rows} cols {cols:?} grid {g}x{b}");
                let got: Vec<u8> = p[..bytes / 4].iter().flat_map(|w| w.to_le_bytes()).collect();
                assert_eq!(got, want_p, "{what}: packed");
                assert_eq!(&s[..groups], &want_s[..], "{what}: scales");
                assert!(
                    p[bytes / 4..].iter().all(|&v| v == 0xDEAD_BEEF) && s[groups..].iter().all(|&v| v == 0xA5),
                    "{what}: wrote past the end"
                );
            }
        }
    }
}

#[test]
fn bad_launches_are_refused_before_running() {
    let a = Fp4Args { format: BlockFormat::NVFP4, scales: 0, rows: 2, width: 64, col_start: 0, group: 16 };
    let raw = vec![0u8; 2 * 36];
    let (mut p, mut s) = (vec![0u32; 16], vec![0u8; 8]);
    assert!(host_grid::run_fp4(&a, &raw, &mut p, &mut s, 128, 1, 32).is_ok());
    // Source one byte short, outputs one short, columns off a group.
    assert!(host_grid::run_fp4(&a, &raw[1..], &mut p, &mut s, 128, 1, 32).is_err());
    assert!(host_grid::run_fp4(&a, &raw, &mut p[1..], &mut s, 128, 1, 32).is_err());
    assert!(host_grid::run_fp4(&a, &raw, &mut p, &mut s[1..], 128, 1, 32).is_err());
    assert!(host_grid::run_fp4(&Fp4Args { col_start: 8, ..a }, &raw, &mut p, &mut s, 64, 1, 32).is_err());
    let q4_0 = Fp4Args { format: BlockFormat::Q4_0, width: 32, group: 32, ..a };
    assert_eq!(host_grid::run_fp4(&q4_0, &[0u8; 36], &mut p, &mut s, 64, 1, 32), Err(host_grid::HostGridError::NoKernel("Q4_0")));
    assert!(host_grid::run(&Launch::Fp4(a), &raw, &mut [0u16; 128], 128, None, None, 1, 32).is_err());
}
