//! Issue 56: the grid i-quant kernels (cuda/grid.cu) build, per group of 8
//! outputs, the table of the values its outputs can take (with the
//! reference's own operations, rounded without the NaN test where d is
//! finite), pick each output from it by the generated selector grids, and
//! flip the sign bit of negated ones. These tests hold that to the
//! reference formula written out element by element, on the host build of
//! the same source, for both outputs, in two parts that together cover
//! every input a group's outputs depend on:
//! - scales: every f16 d (finite, infinite, NaN) times every sub-block
//!   scale (IQ1: and the delta's sign) times every grid value at every
//!   position of a super-block, with either sign. The table and the sign
//!   flip depend on nothing else.
//! - codes: for a few d, every code each of the 32 groups of a super-block
//!   reads (grid index with its high bits, sign index or byte), the scales
//!   varied. Which table entry and which sign an output gets depends on
//!   nothing else (the selection is bit movement, independent of the
//!   table's contents), and the d chosen make every entry of the table and
//!   its negation distinct, so a wrong pick shows.
//!
//! host_grid_parity.rs then holds the whole kernels (both loops) to the
//! CPU kernels over the shared cases.

use weightstream_blocks::OutDtype;
use weightstream_kernels::host_grid::{self, IqGridPart};

/// `per_out`: the outputs compared per output type; for the scales, at
/// least (the groups run per block are the grid's cover, twice).
fn check(name: &str, ggml_id: u32, part: IqGridPart, per_out: u64) {
    for out in [OutDtype::BF16, OutDtype::F16] {
        let (bad, compared) = host_grid::iq_grid_exhaustive(ggml_id, out, part).expect("a grid i-quant");
        eprintln!("{name} {part:?} -> {}: {compared} outputs compared, {bad} differ", out.name());
        match part {
            IqGridPart::Scales => assert!(compared >= per_out, "{name}: {compared}"),
            IqGridPart::Codes => assert_eq!(compared, per_out, "{name} {part:?}"),
        }
        assert_eq!(bad, 0, "{name} {part:?} -> {}", out.name());
    }
}

// Outputs compared. Scales: 65536 d times 16 sub-block scales (IQ1: 8
// scales times 2 delta signs) times (levels x 8 positions x 2 signs) at
// least (IQ2: 3 levels; IQ3: 8 levels, at 4 positions, twice a group;
// IQ1: 3 values, no signs). Codes: one d (negative, every mantissa bit set) times 256
// outputs a super-block times the codes per group.
const SCALES: u64 = 65536 * 16 * 48;
const IQ1_SCALES: u64 = 65536 * 16 * 24;

#[test]
fn iq2_xxs_every_d_and_scale() {
    check("iq2_xxs", 16, IqGridPart::Scales, SCALES);
}

#[test]
fn iq2_xxs_every_code() {
    // 256 grid indices x 128 sign indices.
    check("iq2_xxs", 16, IqGridPart::Codes, 256 * 128 * 256);
}

#[test]
fn iq2_xs_every_d_and_scale() {
    check("iq2_xs", 17, IqGridPart::Scales, SCALES);
}

#[test]
fn iq2_xs_every_code() {
    // Every u16: 512 grid indices x 128 sign indices.
    check("iq2_xs", 17, IqGridPart::Codes, 65536 * 256);
}

#[test]
fn iq2_s_every_d_and_scale() {
    check("iq2_s", 22, IqGridPart::Scales, SCALES);
}

#[test]
fn iq2_s_every_code() {
    // 1024 grid indices x 256 sign bytes.
    check("iq2_s", 22, IqGridPart::Codes, 1024 * 256 * 256);
}

#[test]
fn iq3_xxs_every_d_and_scale() {
    check("iq3_xxs", 18, IqGridPart::Scales, SCALES);
}

#[test]
fn iq3_xxs_every_code() {
    // 256 first indices x 128 sign indices, the second index a bijection.
    check("iq3_xxs", 18, IqGridPart::Codes, 256 * 128 * 256);
}

#[test]
fn iq3_s_every_d_and_scale() {
    check("iq3_s", 21, IqGridPart::Scales, SCALES);
}

#[test]
fn iq3_s_every_code() {
    // 512 first indices x 256 sign bytes, the second index a bijection.
    check("iq3_s", 21, IqGridPart::Codes, 512 * 256 * 256);
}

#[test]
fn iq1_s_every_d_and_scale() {
    check("iq1_s", 19, IqGridPart::Scales, IQ1_SCALES);
}

#[test]
fn iq1_s_every_code() {
    // 2048 grid indices x 8 scales x 2 delta signs.
    check("iq1_s", 19, IqGridPart::Codes, 2048 * 16 * 256);
}

#[test]
fn iq1_m_every_d_and_scale() {
    check("iq1_m", 29, IqGridPart::Scales, IQ1_SCALES);
}

#[test]
fn iq1_m_every_code() {
    // 2048 grid indices x 8 scales x 2 delta signs.
    check("iq1_m", 29, IqGridPart::Codes, 2048 * 16 * 256);
}
