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
// scales times 2 delta signs) times, at least, every value at every
// position (IQ2: 3 levels at 8, IQ3: 8 levels at 4 positions of each half
// of a group, IQ1: 3 values at 8), with either sign (IQ1: no signs).
// Codes: one d (negative, every mantissa bit set) times 256 outputs a
// super-block times the codes per group.
const SCALES: u64 = 65536 * 16 * 48;
const IQ3_SCALES: u64 = 65536 * 16 * 128;
const IQ1_SCALES: u64 = 65536 * 16 * 24;

/// Both parts' tests of a format: (scales test, codes test, name, ggml
/// id, outputs the scales part compares at least, the codes part's).
macro_rules! grid_tests {
    ($($scales:ident, $codes:ident, $name:literal, $id:literal, $s:expr, $c:expr;)*) => {$(
        #[test]
        fn $scales() {
            check($name, $id, IqGridPart::Scales, $s);
        }

        #[test]
        fn $codes() {
            check($name, $id, IqGridPart::Codes, $c);
        }
    )*};
}

// Codes per group: IQ2_XXS 256 grid indices x 128 sign indices; IQ2_XS
// every u16 (512 x 128); IQ2_S 1024 x 256 sign bytes; IQ3 the first
// index x the sign index or byte (the second index a bijection of the
// first for each); IQ1 2048 indices x 8 scales x 2 delta signs.
grid_tests! {
    iq2_xxs_every_d_and_scale, iq2_xxs_every_code, "iq2_xxs", 16, SCALES, 256 * 128 * 256;
    iq2_xs_every_d_and_scale, iq2_xs_every_code, "iq2_xs", 17, SCALES, 65536 * 256;
    iq2_s_every_d_and_scale, iq2_s_every_code, "iq2_s", 22, SCALES, 1024 * 256 * 256;
    iq3_xxs_every_d_and_scale, iq3_xxs_every_code, "iq3_xxs", 18, IQ3_SCALES, 256 * 128 * 256;
    iq3_s_every_d_and_scale, iq3_s_every_code, "iq3_s", 21, IQ3_SCALES, 512 * 256 * 256;
    iq1_s_every_d_and_scale, iq1_s_every_code, "iq1_s", 19, IQ1_SCALES, 2048 * 16 * 256;
    iq1_m_every_d_and_scale, iq1_m_every_code, "iq1_m", 29, IQ1_SCALES, 2048 * 16 * 256;
}
