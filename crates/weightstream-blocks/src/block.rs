//! Block quantization formats: the one definition of each.
//!
//! A block format stores `ELEMS` values in `BYTES` bytes, as named fields at
//! fixed offsets. Everything that needs a block's geometry or byte layout
//! reads it from here: the GGUF reader's size checks (through the ggml type
//! table), the planner's chunk boundaries, the CPU kernels' field offsets.
//! The CUDA sources' mirror (`kernels/cuda/formats.cuh`) is generated from
//! this table by `scripts/gen_block_tables.py`, and a test
//! (kernels/tests/formats.rs) checks the compiled mirror against it.
//!
//! Adding a format: one line in `block_formats!` below, one kernel per
//! device (crates/weightstream-dequant, kernels/), its formula in
//! docs/numerics.md.

use serde::Serialize;

/// A named field of a block (ggml's field name, upper-cased): it starts at
/// byte `offset` and ends where the next field starts (the last one at the
/// block's end).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pub name: &'static str,
    pub offset: usize,
}

/// The geometry and byte layout of one block format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockLayout {
    /// The format's name as ggml and gguf-py spell it.
    pub name: &'static str,
    /// Lower-case name: the CUDA kernel `ws_<module>` (in its family's `kernels/cuda/*.cu`) and the CPU
    /// kernel `scalar::<module>`.
    pub module: &'static str,
    /// The CUDA kernel's function name: `ws_<module>`.
    pub cuda_function: &'static str,
    /// Its ggml type id (GGUF tensor info).
    pub ggml_id: u32,
    /// Elements per block.
    pub elems: usize,
    /// Bytes per block.
    pub bytes: usize,
    /// Fields in byte order, contiguous, covering the block.
    pub fields: &'static [Field],
}

impl BlockLayout {
    /// The rules every row of the table obeys, checked at compile time
    /// (`const _: () = LAYOUT.check()` in each format's module): fields
    /// start at 0, in increasing order, inside the block; a block that
    /// holds an f16 field has an even size so the field stays 2-byte
    /// aligned in any run of blocks.
    pub const fn check(&self) {
        assert!(self.elems > 0 && self.bytes > 0, "empty block");
        assert!(self.fields[0].offset == 0, "the first field must start at byte 0");
        let mut i = 1;
        let mut has_f16 = false;
        while i <= self.fields.len() {
            let end = if i < self.fields.len() { self.fields[i].offset } else { self.bytes };
            let start = self.fields[i - 1].offset;
            assert!(start < end, "fields must be in increasing byte order inside the block");
            let n = self.fields[i - 1].name.as_bytes();
            let named_f16 = (n.len() == 1 && (n[0] == b'D' || n[0] == b'M')) || (n.len() == 4 && n[0] == b'D' && n[1] == b'M');
            if named_f16 && end - start == 2 {
                assert!(start % 2 == 0, "an f16 field must sit at an even offset");
                has_f16 = true;
            }
            i += 1;
        }
        assert!(!has_f16 || self.bytes % 2 == 0, "a block holding an f16 field must have an even size");
    }

    /// Offsets of the block's f16 fields (d, and dmin or m where present):
    /// the scales, where tests put edge values and benchmarks sane ones.
    /// A `D` of another width (NVFP4's four E4M3 scales) is not one.
    pub fn f16_fields(&self) -> impl Iterator<Item = usize> + '_ {
        self.fields
            .iter()
            .filter(|f| matches!(f.name, "D" | "DMIN" | "M") && self.field(f.name).is_some_and(|(a, b)| b - a == 2))
            .map(|f| f.offset)
    }

    /// Test data: for each of `f16_values`, blocks whose f16 fields all hold
    /// it and whose other bytes cycle through every byte value (so every
    /// quant and sub-block scale occurs), three per value.
    pub fn edge_blocks(&self, f16_values: &[u16]) -> Vec<u8> {
        let mut src = Vec::with_capacity(f16_values.len() * 3 * self.bytes);
        for &d in f16_values {
            for start in [0usize, 97, 181] {
                let mut b: Vec<u8> = (0..self.bytes).map(|j| ((start + j * 7) % 256) as u8).collect();
                for o in self.f16_fields() {
                    b[o..o + 2].copy_from_slice(&d.to_le_bytes());
                }
                src.extend(b);
            }
        }
        src
    }

    /// Byte range `[offset, end)` of field `name`.
    pub fn field(&self, name: &str) -> Option<(usize, usize)> {
        let i = self.fields.iter().position(|f| f.name == name)?;
        let end = self.fields.get(i + 1).map_or(self.bytes, |f| f.offset);
        Some((self.fields[i].offset, end))
    }
}

macro_rules! block_formats {
    ($(
        $(#[$doc:meta])*
        $variant:ident / $module:ident = ggml $id:expr, $elems:expr, $bytes:expr, { $($field:ident @ $offset:expr),+ $(,)? };
    )*) => {
        /// A block quantization format (see the module docs).
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
        pub enum BlockFormat { $($(#[$doc])* $variant,)* }

        impl BlockFormat {
            pub const ALL: &'static [BlockFormat] = &[$(BlockFormat::$variant,)*];

            pub const fn layout(self) -> &'static BlockLayout {
                match self { $(BlockFormat::$variant => &$module::LAYOUT,)* }
            }
        }

        $(
            #[doc = concat!("Byte layout of ", stringify!($variant), ": field offsets, `ELEMS`, `BYTES`.")]
            #[allow(dead_code)]
            pub mod $module {
                use super::{BlockLayout, Field};
                pub const ELEMS: usize = $elems;
                pub const BYTES: usize = $bytes;
                $(pub const $field: usize = $offset;)+
                pub const LAYOUT: BlockLayout = BlockLayout {
                    name: stringify!($variant),
                    module: stringify!($module),
                    cuda_function: concat!("ws_", stringify!($module)),
                    ggml_id: $id,
                    elems: ELEMS,
                    bytes: BYTES,
                    fields: &[$(Field { name: stringify!($field), offset: $offset },)+],
                };
                // A row that breaks the layout rules does not compile.
                const _: () = LAYOUT.check();
            }
        )*
    };
}

/// Super-block size of the K-quants.
pub const QK_K: usize = 256;

// Layouts as in ggml-common.h (block_q4_0 ...) and gguf-py 0.19's
// quants.py; the fields keep ggml's names (where ggml packs two fields in
// one array, gguf-py's names for its parts: IQ2_S's and IQ3_XXS's). f16
// fields (d, dmin, m) sit at even offsets and every block holding one has
// an even size, so they are 2-byte aligned wherever a block starts on an
// even address. The lookup tables the IQ, FP4 and ternary formats index
// are in `block_tables` (generated from gguf-py).
block_formats! {
    /// f16 d; 16 bytes of nibbles. x = d * (q - 8).
    Q4_0 / q4_0 = ggml 2, 32, 18, { D @ 0, QS @ 2 };
    /// f16 d, f16 m; 16 bytes of nibbles. x = d * q + m.
    Q4_1 / q4_1 = ggml 3, 32, 20, { D @ 0, M @ 2, QS @ 4 };
    /// f16 d; 32 high bits (u32 LE); 16 bytes of low nibbles. x = d * (q - 16).
    Q5_0 / q5_0 = ggml 6, 32, 22, { D @ 0, QH @ 2, QS @ 6 };
    /// f16 d, f16 m; 32 high bits; 16 bytes of low nibbles. x = d * q + m.
    Q5_1 / q5_1 = ggml 7, 32, 24, { D @ 0, M @ 2, QH @ 4, QS @ 8 };
    /// f16 d; 32 x i8. x = d * q.
    Q8_0 / q8_0 = ggml 8, 32, 34, { D @ 0, QS @ 2 };
    /// 16 x (4-bit scale | 4-bit min); 64 bytes of 2-bit quants; f16 d, dmin.
    Q2_K / q2_k = ggml 10, 256, 84, { SCALES @ 0, QS @ 16, D @ 80, DMIN @ 82 };
    /// 32 bytes of high bits; 64 bytes of 2-bit quants; 12 bytes of 6-bit scales; f16 d.
    Q3_K / q3_k = ggml 11, 256, 110, { HMASK @ 0, QS @ 32, SCALES @ 96, D @ 108 };
    /// f16 d, dmin; 12 bytes of 6-bit scales and mins; 128 bytes of nibbles.
    Q4_K / q4_k = ggml 12, 256, 144, { D @ 0, DMIN @ 2, SCALES @ 4, QS @ 16 };
    /// f16 d, dmin; 12 bytes of scales and mins; 32 bytes of high bits; 128 bytes of nibbles.
    Q5_K / q5_k = ggml 13, 256, 176, { D @ 0, DMIN @ 2, SCALES @ 4, QH @ 16, QS @ 48 };
    /// 128 bytes of low nibbles; 64 bytes of 2-bit highs; 16 x i8 scales; f16 d.
    Q6_K / q6_k = ggml 14, 256, 210, { QL @ 0, QH @ 128, SCALES @ 192, D @ 208 };
    /// f16 d; 16 bytes of nibbles. x = d * IQ4NL_VALUES[q].
    IQ4_NL / iq4_nl = ggml 20, 32, 18, { D @ 0, QS @ 2 };
    /// f16 d; u16 high scale bits; 4 bytes of low scale nibbles; 128 bytes of
    /// nibbles. x = (d * (sc - 32)) * IQ4NL_VALUES[q], sc 6 bits per 32.
    IQ4_XS / iq4_xs = ggml 23, 256, 136, { D @ 0, SCALES_H @ 2, SCALES_L @ 4, QS @ 8 };
    /// E8M0 exponent e; 16 bytes of E2M1 nibbles. x = 2^(e-128) * E2M1_DOUBLED[q].
    MXFP4 / mxfp4 = ggml 39, 32, 17, { E @ 0, QS @ 1 };
    /// 4 UE4M3 scales (one per 16); 32 bytes of E2M1 nibbles. x = (s / 2) * E2M1_DOUBLED[q].
    NVFP4 / nvfp4 = ggml 40, 64, 36, { D @ 0, QS @ 4 };
    /// f16 d; 32 u32 pairs: 4 grid indices (bytes), 4 x 7 sign bits, 4-bit scale.
    IQ2_XXS / iq2_xxs = ggml 16, 256, 66, { D @ 0, QS @ 2 };
    /// f16 d; 32 u16 (9-bit grid index, 7-bit sign index); 16 x 4-bit scales.
    IQ2_XS / iq2_xs = ggml 17, 256, 74, { D @ 0, QS @ 2, SCALES @ 66 };
    /// f16 d; 32 grid index bytes; 32 sign bytes; 2 high index bits each; 16 x 4-bit scales.
    IQ2_S / iq2_s = ggml 22, 256, 82, { D @ 0, QS @ 2, SIGNS @ 34, QH @ 66, SCALES @ 74 };
    /// f16 d; 64 grid index bytes; 8 u32 of 4 x 7 sign bits and a 4-bit scale.
    IQ3_XXS / iq3_xxs = ggml 18, 256, 98, { D @ 0, QS @ 2, SCALES @ 66 };
    /// f16 d; 64 grid index bytes; 8 bytes of ninth index bits; 32 sign bytes; 8 x 4-bit scales.
    IQ3_S / iq3_s = ggml 21, 256, 110, { D @ 0, QS @ 2, QH @ 66, SIGNS @ 74, SCALES @ 106 };
    /// f16 d; 32 grid index bytes; 8 u16 of 4 x 3 high index bits, a 3-bit scale, the delta's sign.
    IQ1_S / iq1_s = ggml 19, 256, 50, { D @ 0, QS @ 2, QH @ 34 };
    /// 32 grid index bytes; 16 bytes of 3 high index bits and the delta's sign per
    /// nibble; 4 u16 of 3-bit scales whose top nibbles make the f16 d.
    IQ1_M / iq1_m = ggml 29, 256, 56, { QS @ 0, QH @ 32, SCALES @ 48 };
    /// 48 bytes of 5 base-3 digits; 4 bytes of 4; f16 d. x = d * (t - 1).
    TQ1_0 / tq1_0 = ggml 34, 256, 54, { QS @ 0, QH @ 48, D @ 52 };
    /// 64 bytes of 2-bit values; f16 d. x = d * (q - 1).
    TQ2_0 / tq2_0 = ggml 35, 256, 66, { QS @ 0, D @ 64 };
    /// f16 d; 16 bytes of sign bits, element j bit j % 8 of qs[j / 8].
    /// x = d where the bit is set, else -d.
    Q1_0 / q1_0 = ggml 41, 128, 18, { D @ 0, QS @ 2 };
    /// f16 d; 16 bytes of 2-bit codes, element j bits 2(j % 4) of qs[j / 4].
    /// x = (q - 1) * d.
    Q2_0 / q2_0 = ggml 42, 64, 18, { D @ 0, QS @ 2 };
}

impl BlockFormat {
    pub fn name(self) -> &'static str {
        self.layout().name
    }

    pub fn from_name(name: &str) -> Option<BlockFormat> {
        BlockFormat::ALL.iter().copied().find(|f| f.name().eq_ignore_ascii_case(name))
    }

    pub fn from_ggml_id(id: u32) -> Option<BlockFormat> {
        BlockFormat::ALL.iter().copied().find(|f| f.layout().ggml_id == id)
    }

    /// Give a block (`layout().bytes` bytes) ordinary scales, for benchmark
    /// inputs: random scale bytes would make NaN, infinities and subnormal
    /// products, which are slow on some CPUs and measure nothing useful.
    /// f16 fields become 0.1; MXFP4's exponent 2^-1 (0x7F); NVFP4's four
    /// UE4M3 scales 1.0 (0x38); IQ1_M's f16 d, spread over the top nibbles
    /// of its four scale words, 0.1.
    pub fn set_ordinary_scales(self, b: &mut [u8]) {
        const D: u16 = 0x2E66; // f16 0.1
        let l = self.layout();
        for o in l.f16_fields() {
            b[o..o + 2].copy_from_slice(&D.to_le_bytes());
        }
        match self {
            BlockFormat::MXFP4 => b[mxfp4::E] = 0x7F,
            BlockFormat::NVFP4 => b[nvfp4::D..nvfp4::D + 4].fill(0x38),
            BlockFormat::IQ1_M => set_iq1_m_d(b, D),
            _ => {}
        }
    }

    /// Test data for the scales that are not f16 fields: give block `b`
    /// edge value `i` (counting cyclically) in MXFP4's E8M0 byte
    /// ([`E8M0_EDGES`]), NVFP4's four UE4M3 bytes ([`UE4M3_EDGES`], four
    /// consecutive ones) or IQ1_M's f16 d spread over its scale words (from
    /// `f16_values`). Returns false, leaving `b` as it was, for the formats
    /// whose scales are all f16 fields (`BlockLayout::edge_blocks` covers those).
    pub fn set_edge_scales(self, b: &mut [u8], i: usize, f16_values: &[u16]) -> bool {
        match self {
            BlockFormat::MXFP4 => b[mxfp4::E] = E8M0_EDGES[i % E8M0_EDGES.len()],
            BlockFormat::NVFP4 => (0..4).for_each(|k| b[nvfp4::D + k] = UE4M3_EDGES[(i + k) % UE4M3_EDGES.len()]),
            BlockFormat::IQ1_M => set_iq1_m_d(b, f16_values[i % f16_values.len()]),
            _ => return false,
        }
        true
    }

    /// (elements per block, bytes per block).
    pub const fn geometry(self) -> (u64, u64) {
        let l = self.layout();
        (l.elems as u64, l.bytes as u64)
    }
}

// Sizes as ggml-common.h derives them from QK_K (its static_asserts),
// checked when this crate compiles.
const _: () = {
    assert!(q2_k::BYTES == QK_K / 16 + QK_K / 4 + 2 + 2);
    assert!(q3_k::BYTES == QK_K / 8 + QK_K / 4 + 12 + 2);
    assert!(q4_k::BYTES == 2 + 2 + 12 + QK_K / 2);
    assert!(q5_k::BYTES == 2 + 2 + 12 + QK_K / 8 + QK_K / 2);
    assert!(q6_k::BYTES == QK_K / 2 + QK_K / 4 + QK_K / 16 + 2);
    assert!(iq2_xxs::BYTES == 2 + QK_K / 4);
    assert!(iq2_xs::BYTES == 2 + QK_K / 4 + QK_K / 32);
    assert!(iq2_s::BYTES == 2 + QK_K / 4 + QK_K / 16);
    assert!(iq3_xxs::BYTES == 2 + 3 * QK_K / 8);
    assert!(iq3_s::BYTES == 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4);
    assert!(iq1_s::BYTES == 2 + QK_K / 8 + QK_K / 16);
    assert!(iq1_m::BYTES == QK_K / 8 + QK_K / 16 + QK_K / 32);
    assert!(iq4_xs::BYTES == 2 + 2 + QK_K / 64 + QK_K / 2);
    assert!(tq1_0::BYTES == 2 + 4 * 13);
    assert!(tq2_0::BYTES == 2 + QK_K / 4);
    assert!(q4_0::BYTES == 2 + q4_0::ELEMS / 2 && q8_0::BYTES == 2 + q8_0::ELEMS);
    assert!(q4_1::BYTES == 4 + q4_1::ELEMS / 2 && q5_0::BYTES == 6 + q5_0::ELEMS / 2 && q5_1::BYTES == 8 + q5_1::ELEMS / 2);
    assert!(mxfp4::BYTES == 1 + mxfp4::ELEMS / 2 && nvfp4::BYTES == nvfp4::ELEMS / 16 + nvfp4::ELEMS / 2);
    assert!(iq4_nl::BYTES == 2 + iq4_nl::ELEMS / 2);
};

/// E8M0 bytes worth testing: the subnormal halves (0x00, 0x01), the first
/// normal one, 2^0 and 2^1 around the bias, the largest finite and 0xFF.
pub const E8M0_EDGES: [u8; 7] = [0x00, 0x01, 0x02, 0x7F, 0x80, 0xFE, 0xFF];

/// UE4M3 bytes worth testing: the two zeros (0x00, 0x7F), the same with
/// bit 7 set (ignored), subnormals (exponent 0), the first normal, the
/// largest, and 1.0 (0x38).
pub const UE4M3_EDGES: [u8; 10] = [0x00, 0x7F, 0x80, 0xFF, 0x01, 0x07, 0x08, 0x7E, 0xFE, 0x38];

/// IQ1_M has no d field: its f16 d is the top nibbles of the four u16
/// scale words (nibble k in word k), whose low 12 bits (the 3-bit
/// sub-block scales) are kept.
fn set_iq1_m_d(b: &mut [u8], d: u16) {
    for k in 0..4 {
        let at = iq1_m::SCALES + 2 * k;
        let sc = u16::from_le_bytes([b[at], b[at + 1]]) & 0x0FFF | (((d >> (4 * k)) & 0xF) << 12);
        b[at..at + 2].copy_from_slice(&sc.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_contiguous_and_cover_each_block() {
        for f in BlockFormat::ALL {
            let l = f.layout();
            assert_eq!(l.fields[0].offset, 0, "{}", l.name);
            for w in l.fields.windows(2) {
                assert!(w[0].offset < w[1].offset, "{}: {} before {}", l.name, w[0].name, w[1].name);
            }
            assert!(l.fields.last().unwrap().offset < l.bytes, "{}", l.name);
            if l.f16_fields().next().is_some() {
                assert_eq!(l.bytes % 2, 0, "{}: odd block size breaks f16 alignment", l.name);
            }
            for o in l.f16_fields() {
                let f = l.fields.iter().find(|f| f.offset == o).unwrap();
                assert_eq!((o % 2, l.field(f.name).unwrap().1 - o), (0, 2), "{}.{}", l.name, f.name);
            }
        }
    }

    #[test]
    fn sizes_follow_ggml() {
        assert_eq!(BlockFormat::Q4_K.layout().field("QS"), Some((16, 144)));
        assert_eq!(BlockFormat::from_name("q6_k"), Some(BlockFormat::Q6_K));
        assert_eq!(BlockFormat::from_ggml_id(8), Some(BlockFormat::Q8_0));
        // f16 fields: NVFP4's D is four E4M3 bytes, MXFP4's E one E8M0 byte.
        assert_eq!(BlockFormat::NVFP4.layout().f16_fields().count(), 0);
        assert_eq!(BlockFormat::IQ4_XS.layout().f16_fields().collect::<Vec<_>>(), [0]);
        // Ordinary scales: IQ1_M's d comes back as 0.1 from its four nibbles.
        let mut b = vec![0xFFu8; iq1_m::BYTES];
        BlockFormat::IQ1_M.set_ordinary_scales(&mut b);
        let sc = |k: usize| u16::from_le_bytes([b[iq1_m::SCALES + 2 * k], b[iq1_m::SCALES + 2 * k + 1]]);
        assert_eq!((sc(0) >> 12) | ((sc(1) >> 8) & 0xF0) | ((sc(2) >> 4) & 0xF00) | (sc(3) & 0xF000), 0x2E66);
        assert_eq!(sc(0) & 0x0FFF, 0x0FFF, "the 3-bit scales are kept");
    }
}
