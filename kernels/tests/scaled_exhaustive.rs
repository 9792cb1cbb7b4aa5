//! Issue 56: the scaled safetensors kernels (cuda/fp8.cu, cuda/packed.cu)
//! and F16 -> BF16 (cuda/float.cu) take a specialised loop whose codes
//! become f32 by moving their bits and whose outputs round without the NaN
//! test where no NaN can arise. Exact, not approximate; checked here on the
//! host build of the same source, against the reference formula:
//! - FP8: a code's bits moved into f32 position, times 2^120 (E4M3) or
//!   2^112 (E5M2), is e4m3_to_f32 / e5m2_to_f32 of it, for every code at
//!   every position (NaN codes, and E5M2's infinities, excepted: the gate
//!   sends a unit holding one to the reference, checked for every code at
//!   every position beside every other byte value); whole units on every
//!   BF16 pattern of scale (every sign and exponent: zero, subnormal,
//!   overflowing, infinite and NaN scales) times every code at every
//!   position. Why the scales need not be all 2^32: the product is the
//!   reference's own multiply of the same two f32 (the decoded code is
//!   the same f32, checked exhaustively), and its rounding without the NaN
//!   test equals `from_f32` on every non-NaN f32 (legacy_exhaustive.rs,
//!   all of them); what remains is the gate (whether a NaN can arise),
//!   which depends on the scale only through its exponent field, and every
//!   exponent is swept.
//! - The walk: every unit's scale index equals the 64-bit formula over
//!   layouts of every kind and grids whose strides wrap rows and block rows.
//! - F16: every f16 (zeros, subnormals, infinities, NaNs) at every
//!   position of a group.
//! - E2M1: every code at every position, every BF16-pattern scale.
//! - INT4 and INT8: the code by the magic number, every code at every
//!   position, with and without F16 rounding, on every BF16-pattern scale
//!   times integer, fractional, huge, infinite and NaN zero points; the F16
//!   rounding on the bits equals `round_f16` on every f32 its gate admits.
//!
//! host_grid_parity.rs then holds the whole kernels (both loops) to the
//! CPU kernels over the shared cases.

use weightstream_blocks::OutDtype;
use weightstream_kernels::host_grid;

fn check(name: &str, run: impl Fn(OutDtype) -> (u64, u64), expected: u64) {
    for out in [OutDtype::BF16, OutDtype::F16] {
        let (bad, compared) = run(out);
        eprintln!("{name} -> {}: {compared} compared, {bad} differ", out.name());
        assert_eq!(compared, expected, "{name} -> {}", out.name());
        assert_eq!(bad, 0, "{name} -> {}", out.name());
    }
}

// FP8: 256 codes x 4 positions (decode, less the special codes) and x 256
// neighbours (gate), then 65536 scales x 256 units x 16 outputs.
#[test]
fn e4m3_every_code_and_scale_exponent() {
    check("E4M3", |o| host_grid::fp8_exhaustive(true, o), (256 - 2) * 4 + 256 * 4 * 256 + 65536 * 256 * 16);
}

#[test]
fn e5m2_every_code_and_scale_exponent() {
    check("E5M2", |o| host_grid::fp8_exhaustive(false, o), (256 - 8) * 4 + 256 * 4 * 256 + 65536 * 256 * 16);
}

/// The walk (cuda/scale_grid.cuh): every unit's scale index equals the
/// 64-bit formula, for layouts of every kind (per-tensor, per-channel,
/// block rows, 128 x 128 and 16 x 16 blocks, groups of 16 and 32, blocks
/// wider than the matrix), chunks from the start and from a row's middle,
/// over grids whose strides wrap rows and block rows by every amount; and
/// layouts it must refuse are refused.
#[test]
fn the_walk_finds_every_units_scale() {
    let mut units = 0u64;
    for (cols, br, bc) in [
        (16u64, 1u64, 16u64),
        (48, 1, 16),
        (96, 1, 32),
        (256, 128, 128),
        (4096, 128, 128),
        (160, 3, 32),
        (8192, 1, 8192),
        (80, 7, 80),
        (80, 5, 1 << 20),
        (64, 1, 64),
        (1024, 16, 16),
        (2048, 3, 1024),
    ] {
        let rows = 300;
        let gc = cols.div_ceil(bc);
        for (first, n) in [(0, rows * cols), (cols / 2 / 16 * 16, rows * cols - cols), (cols * 5 + 16, cols * 37 + 2)] {
            if first % 16 != 0 || first + n > rows * cols {
                continue;
            }
            for (g, b) in [(1u32, 32u32), (3, 64), (7, 33), (2, 256), (13, 96), (5, 1)] {
                let (bad, k) = host_grid::walk_mismatches(first, n, cols, br, bc, gc, g, b).expect("takes the walk");
                assert_eq!(bad, 0, "cols {cols} blocks {br}x{bc} chunk [{first}, +{n}) grid {g}x{b}");
                units += k;
            }
        }
    }
    eprintln!("{units} units' scale indices compared");
    for (first, cols, bc) in [(8u64, 64u64, 16u64), (0, 40, 8), (0, 96, 48), (0, 100, 16)] {
        assert!(host_grid::walk_mismatches(first, 64, cols, 1, bc, cols.div_ceil(bc), 1, 32).is_none(), "{first} {cols} {bc}");
    }
}

// 65536 groups x 8 outputs: every f16 at every position.
#[test]
fn f16_every_value_at_every_position() {
    check("F16", host_grid::f16_exhaustive, 65536 * 8);
}

// 65536 scales x 16 units x 16 outputs.
#[test]
fn e2m1_every_code_and_scale_exponent() {
    check("E2M1", host_grid::e2m1_exhaustive, 65536 * 16 * 16);
}

// 65536 scales x 14 zero points x 2 (F16 rounding or not) x 16 outputs;
// INT8 also the F16 rounding on both signs of 0x38800000..0x477FF000 and
// both zeros.
#[test]
fn int4_every_code_and_scale_exponent() {
    check("INT4", |o| host_grid::int_exhaustive(4, o), 65536 * 14 * 2 * 16);
}

#[test]
fn int8_every_code_and_scale_exponent() {
    check("INT8", |o| host_grid::int_exhaustive(8, o), 2 * (0x477F_F000 - 0x3880_0000 + 1) + 65536 * 14 * 2 * 16);
}
