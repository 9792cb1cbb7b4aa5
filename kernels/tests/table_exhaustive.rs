//! Issue 56: the table and low-bit kernels (cuda/lut4.cu, ternary.cu,
//! lowbit.cu) read their levels from a table by byte offset and round
//! without the NaN test where no value can be a NaN. Both are exact, not
//! approximations; these tests check the kernel code (every unit of a
//! block: its lane, load and put, fast and slow paths) on the host build
//! against the reference formula, for both outputs:
//! - IQ4_NL: every f16 d (finite, infinite, NaN) x every code at every
//!   position;
//! - IQ4_XS: every f16 d x every 6-bit sub-scale (each at every sub-block
//!   position over the d's), every code in both nibble halves of every
//!   (d, sub-scale), every code at every position. The output of an element
//!   is a function of (dl, code) alone, the same operations at every
//!   position, so every d x sub-scale x code at one position each, plus
//!   every code at every position, covers every block;
//! - MXFP4: every E8M0 byte x every code at every position;
//! - NVFP4: every UE4M3 byte at every sub-block x every code at every
//!   position.
//!
//! The rounding without the NaN test is `from_f32` on every non-NaN f32
//! (legacy_exhaustive.rs). host_grid_parity.rs then holds the whole kernels
//! (both loops) to the CPU kernels over the shared cases.

use weightstream_blocks::{BlockFormat, OutDtype};
use weightstream_kernels::host_grid;

fn exhaustive(f: BlockFormat, per_out: u64) {
    for out in [OutDtype::BF16, OutDtype::F16] {
        let t = std::time::Instant::now();
        let (bad, compared) = host_grid::table_exhaustive(f.layout().ggml_id, out).expect("a table format");
        eprintln!("{} -> {}: {compared} outputs compared, {bad} differ ({:.1} s)", f.name(), out.name(), t.elapsed().as_secs_f64());
        assert_eq!(compared, per_out, "{}", f.name());
        assert_eq!(bad, 0, "{} -> {}", f.name(), out.name());
    }
}

#[test]
fn iq4_nl_every_d_and_code() {
    // 65536 d x 16 patterns x 32 outputs.
    exhaustive(BlockFormat::IQ4_NL, 65536 * 16 * 32);
}

#[test]
fn iq4_xs_every_d_sub_scale_and_code() {
    // 65536 d x 8 super-blocks (8 sub-scales each) x 256 outputs.
    exhaustive(BlockFormat::IQ4_XS, 65536 * 8 * 256);
}

#[test]
fn mxfp4_every_scale_and_code() {
    exhaustive(BlockFormat::MXFP4, 256 * 16 * 32);
}

#[test]
fn nvfp4_every_scale_and_code() {
    exhaustive(BlockFormat::NVFP4, 256 * 16 * 64);
}

// The low-bit formats: every f16 d x blocks of codes that put every code
// at every element (3 for TQ1_0's trits, 4 for 2-bit codes, 2 for bits),
// then every byte value at every code byte with 8 d values (1, -1/3, the
// smallest subnormal, -0, 65504, inf, -inf, NaN): 256 blocks each. An
// output is its table entry (a function of d alone: the reference's
// products, rounded) selected by its code (a function of the bytes alone),
// so together these cover every block.
fn lowbit(f: BlockFormat, patterns: u64) {
    let elems = f.layout().elems as u64;
    exhaustive(f, (65536 * patterns + 8 * 256) * elems);
}

#[test]
fn tq1_0_every_d_and_code() {
    lowbit(BlockFormat::TQ1_0, 3);
}

#[test]
fn tq2_0_every_d_and_code() {
    lowbit(BlockFormat::TQ2_0, 4);
}

#[test]
fn q1_0_every_d_and_code() {
    lowbit(BlockFormat::Q1_0, 2);
}

#[test]
fn q2_0_every_d_and_code() {
    lowbit(BlockFormat::Q2_0, 4);
}
