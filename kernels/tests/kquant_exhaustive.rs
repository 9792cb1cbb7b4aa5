//! Issue 56: the K-quant kernels (cuda/kquant.cu) turn codes into f32 by
//! the magic number, scale them by the sub-block's d * sc (exact, so the
//! rounded products are the reference's: the same real numbers) and round
//! without the NaN test where the block's f16 fields are finite. Checked on
//! the host build of the same source, against the reference formula of
//! docs/numerics.md written out element by element:
//! - part 0: the f32 values, bit for bit, on every f16 d (non-finite ones
//!   through the whole kernel code, both outputs) x every sub-block scale x
//!   every code at both positions of a pair (with dmin = +0: the value is
//!   the product dl * q itself); each round's groups turn through the
//!   sub-blocks, so every scale meets every sub-block's extraction and
//!   every code every element's;
//! - part 1 (Q2_K, Q4_K, Q5_K): d = -0, every f16 dmin x every min: the
//!   value is -0 - dmin * m, so each dmin * m (its sign of zero too) shows;
//!   the reference's subtraction of the two exact parts is then the same
//!   operation on the same operands;
//! - part 2: whole blocks through the kernel code for both outputs, each
//!   f16 value once as d (and as dmin).
//!
//! The lemma that makes parts 0 and 1 cover every block: a value depends on
//! (d, sc, code, pair position) and (dmin, m) only, the extraction is bit
//! movement covered at every position, and the rounding without the NaN
//! test is `from_f32` on every non-NaN f32 (legacy_exhaustive.rs, which
//! checks `pack2_nonan` on all of them). Q6_K's scale is 8 bits (256
//! values), so each (d, sc, code) is compared at one pair position, the
//! position turning with the round; the positions differ only by the exact
//! factor 2^8 moved from the code to dl (DESK-CHECK L1: the same real
//! product, so the same rounding), and every (d, code) meets both.
//! host_grid_parity.rs then holds the whole kernels (both loops) to the CPU
//! kernels over the shared cases.

use weightstream_kernels::host_grid;

/// Each part of `parts` (part, values it compares) of format `ggml_id`.
fn check(name: &str, ggml_id: u32, parts: &[(u32, u64)]) {
    for &(part, want) in parts {
        let (bad, compared) = host_grid::kquant_exhaustive(ggml_id, part).expect("a K-quant part");
        eprintln!("{name} part {part}: {compared} values compared, {bad} differ");
        assert_eq!(compared, want, "{name} part {part}");
        assert_eq!(bad, 0, "{name} part {part}");
    }
}

// Values per part: 65536 f16 values x the rounds (scales or mins) x the
// values of the groups compared a round (part 0: those holding every code
// at both pair positions; part 1: one group; part 2: 256 per block, two
// outputs), plus, in parts 0 and 1, one more value per output for each
// value of a non-finite round (2048 f16 values).
const WHOLE: (u32, u64) = (2, 65536 * 256 * 2);

#[test]
fn q2_k_every_d_scale_and_code() {
    check("q2_k", 10, &[(0, 65536 * 16 * 8 + 2048 * 16 * 8), (1, 65536 * 16 * 8 + 2048 * 16 * 8), WHOLE]);
}

#[test]
fn q3_k_every_d_scale_and_code() {
    check("q3_k", 11, &[(0, 65536 * 64 * 16 + 2048 * 64 * 16), WHOLE]);
    assert_eq!(host_grid::kquant_exhaustive(11, 1), None, "q3_k has no dmin");
}

#[test]
fn q4_k_every_d_scale_and_code() {
    check("q4_k", 12, &[(0, 65536 * 64 * 32 + 2048 * 64 * 32), (1, 65536 * 64 * 8 + 2048 * 64 * 8), WHOLE]);
}

#[test]
fn q5_k_every_d_scale_and_code() {
    check("q5_k", 13, &[(0, 65536 * 64 * 64 + 2048 * 64 * 64), (1, 65536 * 64 * 8 + 2048 * 64 * 8), WHOLE]);
}

#[test]
fn q6_k_every_d_scale_and_code() {
    check("q6_k", 14, &[(0, 65536 * 64 * 256 + 2048 * 64 * 256), WHOLE]);
}
