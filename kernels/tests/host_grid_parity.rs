//! The CUDA kernel sources, compiled for the host and run over their
//! complete launch grids, produce the CPU kernels' bits: the host-grid
//! runner of the one parity case list (`weightstream_dequant::cases`),
//! for both outputs (BF16 and float16), over several launch geometries (a full grid and small ones that make
//! every thread stride), outputs poisoned first so an unwritten element
//! shows, and a guard region after the end so a write past it shows.

use weightstream_blocks::{BlockFormat, OutDtype};
use weightstream_dequant::cases::{self, Draw, Size};
use weightstream_kernels::{geometry, host_grid, Element, Launch, ScaledArgs, BLOCK_DIM};

const POISON: u16 = 0xBEEF;
const GUARD: usize = 37;

use weightstream_io::testing::SeededRng as Rng;

/// Geometries: the executor's own, and small grids that make threads stride.
fn geometries(groups: u64) -> Vec<(u32, u32)> {
    vec![geometry(groups, 1 << 20), (1, 32), (3, 64), (2, BLOCK_DIM), (7, 33)]
}

/// Run `launch` over every geometry into poisoned outputs with a guard;
/// every element must be `want`'s, nothing past the end written.
fn check_zeros(name: &str, launch: &Launch, src: &[u8], n: usize, scales: Option<&[f32]>, zeros: Option<&[f32]>, want: &[u16]) {
    for (g, b) in geometries(launch.groups(n as u64)) {
        let mut out = vec![POISON; n + GUARD];
        host_grid::run(launch, src, &mut out, n as u64, scales, zeros, g, b).unwrap();
        if let Some(i) = (0..n).find(|&i| out[i] != want[i]) {
            panic!("{name} grid {g}x{b}: element {i} is {:#06x}, CPU kernel gives {:#06x}", out[i], want[i]);
        }
        assert!(out[n..].iter().all(|&v| v == POISON), "{name} grid {g}x{b}: wrote past the end");
    }
}

/// The runner: every case of the one parity list (`weightstream_dequant::cases`),
/// for each output (BF16, float16), launched as the GPU executor would
/// (`Launch::for_encoding`), over every geometry, against the scalar CPU
/// kernels writing that output. A source of the output's own type has no
/// kernel (the executor copies it): there the CPU's output must be the
/// source's bits.
#[test]
fn every_case_over_every_geometry() {
    let mut rng = Rng::from_env("every_case_over_every_geometry");
    let all = cases::all(Size::Host, &mut Draw(&mut || rng.next_u64()));
    for out in [OutDtype::BF16, OutDtype::F16] {
        let (mut launched, mut copied) = (0, 0);
        for c in &all {
            let name = format!("{} -> {}", c.name, out.name());
            let want = c.scalar_as(out);
            match Launch::for_encoding(c.encoding, (c.rows, c.cols), c.first, c.layout().as_ref(), c.round_f16, out) {
                Some(launch) => {
                    assert_eq!(launch.out(), out, "{name}");
                    check_zeros(&name, &launch, &c.src, c.n, c.scale_values(), c.zeros.as_deref(), &want);
                    launched += 1;
                }
                None => {
                    let bits: Vec<u16> = c.src.chunks_exact(2).map(|b| u16::from_le_bytes([b[0], b[1]])).collect();
                    assert_eq!(bits, want, "{name}: a copy must be the CPU's output");
                    copied += 1;
                }
            }
        }
        eprintln!("{}: {launched} cases launched, {copied} copied", out.name());
        assert!(launched > 100 && copied > 0, "{}: {launched} launched, {copied} copied", out.name());
    }
}

/// Every kernel the executor can launch runs in the host grid for both
/// outputs: the list the cases reach (above) is checked against the one
/// list of launches, so a kernel the cases never launch shows here.
#[test]
fn the_cases_launch_every_elementwise_kernel() {
    let mut rng = Rng::from_env("the_cases_launch_every_elementwise_kernel");
    let mut reached = std::collections::BTreeSet::new();
    for c in cases::all(Size::Host, &mut Draw(&mut || rng.next_u64())) {
        for out in [OutDtype::BF16, OutDtype::F16] {
            if let Some(l) = Launch::for_encoding(c.encoding, (c.rows, c.cols), c.first, c.layout().as_ref(), c.round_f16, out) {
                reached.insert(l.function().1);
            }
        }
    }
    let missing: Vec<_> = Launch::every()
        .filter(|l| !matches!(l, Launch::Gptq(_) | Launch::Fp4(_)))
        .map(|l| l.function().1)
        .filter(|f| !reached.contains(f))
        .collect();
    assert!(missing.is_empty(), "no parity case launches {missing:?}");
}

/// Not a whole number of blocks: refused before any thread runs.
#[test]
fn partial_blocks_are_refused() {
    for (&f, dtype) in BlockFormat::ALL.iter().flat_map(|f| [(f, OutDtype::BF16), (f, OutDtype::F16)]) {
        let l = f.layout();
        let mut out = vec![0u16; l.elems];
        assert!(
            host_grid::run(&Launch::Block(f, dtype), &vec![0u8; l.bytes], &mut out, (l.elems - 8) as u64, None, None, 1, 32).is_err(),
            "{}",
            l.name
        );
    }
}

#[test]
fn lengths_are_checked_before_running() {
    let mut out = vec![0u16; 32];
    assert!(host_grid::run(&Launch::Block(BlockFormat::Q4_0, OutDtype::F16), &[0u8; 17], &mut out, 32, None, None, 1, 32).is_err());
    assert!(host_grid::run(&Launch::Block(BlockFormat::Q4_0, OutDtype::F16), &[0u8; 18], &mut out[..31], 32, None, None, 1, 32).is_err());
    assert!(host_grid::run(&Launch::Block(BlockFormat::Q4_0, OutDtype::F16), &[0u8; 18], &mut out, 31, None, None, 1, 32).is_err());
    let a = ScaledArgs {
        element: Element::E4m3,
        scales: 0,
        first: 0,
        cols: 16,
        block_rows: 1,
        block_cols: 16,
        grid_cols: 1,
        zeros: 0,
        round_f16: false,
        out: OutDtype::BF16,
    };
    assert!(host_grid::run(&Launch::Scaled(a), &[0u8; 32], &mut out, 32, Some(&[1.0]), None, 1, 32).is_err());
    let a = ScaledArgs { element: Element::E2m1, ..a };
    assert!(host_grid::run(&Launch::Scaled(a), &[0u8; 15], &mut out, 32, Some(&[1.0, 1.0]), None, 1, 32).is_err());
}

/// The scaled kernels' division by a launch constant (one multiply-high by
/// the divisor's magic number) is `n / d` exactly: edge divisors and
/// numerators (powers of two and their neighbours, the largest values),
/// then random pairs of every magnitude.
#[test]
fn scale_grid_division_is_exact() {
    let mut rng = Rng::from_env("scale_grid_division_is_exact");
    let mut edges: Vec<u64> = vec![0, 1, 2, 3, 5, 7, 17, 127, 128, 129, 255, 641, 6700417, u64::MAX - 1, u64::MAX];
    for k in 1..64 {
        edges.extend([(1u64 << k) - 1, 1u64 << k, (1u64 << k) + 1]);
    }
    for &d in edges.iter().filter(|&&d| d > 0) {
        for &n in &edges {
            assert_eq!(host_grid::quotient(n, d), n / d, "{n} / {d}");
        }
    }
    for _ in 0..200_000 {
        let (d_bits, n_bits) = (1 + rng.below(64) as u32, 1 + rng.below(64) as u32);
        let d = (rng.next_u64() >> (64 - d_bits)).max(1);
        let n = rng.next_u64() >> (64 - n_bits);
        assert_eq!(host_grid::quotient(n, d), n / d, "{n} / {d}");
    }
}
