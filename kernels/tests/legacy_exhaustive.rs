//! Issue 56: the legacy kernels (cuda/legacy.cu) turn codes into f32 by the
//! magic number and round without the NaN test where the block's f16
//! fields are finite. Both are exact, not approximations, and these tests
//! check it exhaustively on the host build of the same source:
//! - the rounding without the NaN test is `from_f32` on every non-NaN f32,
//!   for both outputs;
//! - each format's kernel code gives the reference formula's bits on every
//!   f16 d (finite, infinite or NaN) times every code value at every one of
//!   the 32 positions, for both outputs.
//!
//! host_grid_parity.rs then holds the whole kernels (the loops, both of
//! them) to the CPU kernels over the shared cases.

use weightstream_blocks::OutDtype;
use weightstream_kernels::host_grid;

#[test]
fn rounding_without_the_nan_test_is_exact_on_every_non_nan_f32() {
    for out in [OutDtype::BF16, OutDtype::F16] {
        let (bad, compared) = host_grid::nonan_rounding_mismatches(out);
        eprintln!("{}: {compared} non-NaN f32 compared, {bad} differ", out.name());
        assert_eq!(compared, (1 << 32) - (1 << 24) + 2, "{}", out.name());
        assert_eq!(bad, 0, "{}", out.name());
    }
}

fn every_d_and_code(name: &str, ggml_id: u32, per_d: u64) {
    for out in [OutDtype::BF16, OutDtype::F16] {
        let (bad, compared) = host_grid::legacy_exhaustive(ggml_id, out).expect("a legacy format");
        eprintln!("{name} -> {}: {compared} outputs compared, {bad} differ", out.name());
        assert_eq!(compared, 65536 * per_d, "{name}");
        assert_eq!(bad, 0, "{name} -> {}", out.name());
    }
}

// Outputs per d: 32 per block; blocks per d: every code value at every
// position (16 nibble patterns, 256 byte patterns), times the m values (3)
// and qh words (3) where the format has them.
#[test]
fn q4_0_every_d_and_code() {
    every_d_and_code("q4_0", 2, 32 * 16);
}

#[test]
fn q4_1_every_d_and_code() {
    every_d_and_code("q4_1", 3, 32 * 16 * 3);
}

#[test]
fn q5_0_every_d_and_code() {
    every_d_and_code("q5_0", 6, 32 * 16 * 3);
}

#[test]
fn q5_1_every_d_and_code() {
    every_d_and_code("q5_1", 7, 32 * 16 * 3 * 3);
}

#[test]
fn q8_0_every_d_and_code() {
    every_d_and_code("q8_0", 8, 32 * 256);
}
