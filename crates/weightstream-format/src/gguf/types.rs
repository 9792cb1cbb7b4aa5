//! ggml tensor types: every id llama.cpp defines, with block geometry, so
//! `inspect` can list any file; only some are loadable.

use serde::Serialize;

use crate::block::{self, BlockFormat};

/// Block geometry of a ggml type: `block` elements take `type_size` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GgmlTypeInfo {
    pub id: u32,
    pub name: &'static str,
    pub block: u64,
    pub type_size: u64,
}

/// A ggml type id known to this reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GgmlType(&'static GgmlTypeInfo);

macro_rules! ggml_types {
    ($($name:ident = $id:expr, $block:expr, $size:expr;)*) => {
        const TYPES: &[GgmlTypeInfo] = &[
            $(GgmlTypeInfo { id: $id, name: stringify!($name), block: $block, type_size: $size },)*
        ];
    };
}

const QK_K: u64 = block::QK_K as u64;

// Ids, block sizes and bytes per block as in ggml.h / gguf-py 0.19.0
// (GGML_QUANT_SIZES). Types with a dequant kernel take their geometry from
// their one definition in `crate::block`; the others are listed so
// `inspect` can show them. Ids 4, 5 (Q4_2, Q4_3) and 31-33, 36-38 were
// removed from ggml and are rejected as unknown.
ggml_types! {
    F32 = 0, 1, 4;
    F16 = 1, 1, 2;
    Q4_0 = 2, block::q4_0::ELEMS as u64, block::q4_0::BYTES as u64;
    Q4_1 = 3, block::q4_1::ELEMS as u64, block::q4_1::BYTES as u64;
    Q5_0 = 6, block::q5_0::ELEMS as u64, block::q5_0::BYTES as u64;
    Q5_1 = 7, block::q5_1::ELEMS as u64, block::q5_1::BYTES as u64;
    Q8_0 = 8, block::q8_0::ELEMS as u64, block::q8_0::BYTES as u64;
    Q8_1 = 9, 32, 4 + 4 + 32;
    Q2_K = 10, block::q2_k::ELEMS as u64, block::q2_k::BYTES as u64;
    Q3_K = 11, block::q3_k::ELEMS as u64, block::q3_k::BYTES as u64;
    Q4_K = 12, block::q4_k::ELEMS as u64, block::q4_k::BYTES as u64;
    Q5_K = 13, block::q5_k::ELEMS as u64, block::q5_k::BYTES as u64;
    Q6_K = 14, block::q6_k::ELEMS as u64, block::q6_k::BYTES as u64;
    Q8_K = 15, 256, 4 + QK_K + QK_K / 8;
    IQ2_XXS = 16, block::iq2_xxs::ELEMS as u64, block::iq2_xxs::BYTES as u64;
    IQ2_XS = 17, block::iq2_xs::ELEMS as u64, block::iq2_xs::BYTES as u64;
    IQ3_XXS = 18, block::iq3_xxs::ELEMS as u64, block::iq3_xxs::BYTES as u64;
    IQ1_S = 19, block::iq1_s::ELEMS as u64, block::iq1_s::BYTES as u64;
    IQ4_NL = 20, block::iq4_nl::ELEMS as u64, block::iq4_nl::BYTES as u64;
    IQ3_S = 21, block::iq3_s::ELEMS as u64, block::iq3_s::BYTES as u64;
    IQ2_S = 22, block::iq2_s::ELEMS as u64, block::iq2_s::BYTES as u64;
    IQ4_XS = 23, block::iq4_xs::ELEMS as u64, block::iq4_xs::BYTES as u64;
    I8 = 24, 1, 1;
    I16 = 25, 1, 2;
    I32 = 26, 1, 4;
    I64 = 27, 1, 8;
    F64 = 28, 1, 8;
    IQ1_M = 29, block::iq1_m::ELEMS as u64, block::iq1_m::BYTES as u64;
    BF16 = 30, 1, 2;
    TQ1_0 = 34, block::tq1_0::ELEMS as u64, block::tq1_0::BYTES as u64;
    TQ2_0 = 35, block::tq2_0::ELEMS as u64, block::tq2_0::BYTES as u64;
    MXFP4 = 39, block::mxfp4::ELEMS as u64, block::mxfp4::BYTES as u64;
    NVFP4 = 40, block::nvfp4::ELEMS as u64, block::nvfp4::BYTES as u64;
    Q1_0 = 41, 128, 2 + 16;
}

impl GgmlType {
    pub fn from_id(id: u32) -> Option<GgmlType> {
        TYPES.iter().find(|t| t.id == id).map(GgmlType)
    }
    pub fn from_name(name: &str) -> Option<GgmlType> {
        TYPES.iter().find(|t| t.name == name).map(GgmlType)
    }
    pub fn all() -> impl Iterator<Item = GgmlType> {
        TYPES.iter().map(GgmlType)
    }
    pub fn id(self) -> u32 {
        self.0.id
    }
    pub fn name(self) -> &'static str {
        self.0.name
    }
    pub fn block(self) -> u64 {
        self.0.block
    }
    pub fn type_size(self) -> u64 {
        self.0.type_size
    }
    /// The block format with a dequant kernel, if this type has one.
    pub fn block_format(self) -> Option<BlockFormat> {
        BlockFormat::from_ggml_id(self.id())
    }
    /// Bytes for `n_elems` elements, or `None` if `n_elems` is not a whole
    /// number of blocks or the size overflows.
    pub fn nbytes(self, n_elems: u64) -> Option<u64> {
        if n_elems % self.block() != 0 {
            return None;
        }
        (n_elems / self.block()).checked_mul(self.type_size())
    }
}

impl Serialize for GgmlType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_names_are_unique() {
        for (i, a) in TYPES.iter().enumerate() {
            for b in &TYPES[i + 1..] {
                assert_ne!(a.id, b.id);
                assert_ne!(a.name, b.name);
            }
        }
        assert_eq!(GgmlType::from_id(2).unwrap().name(), "Q4_0");
        assert_eq!(GgmlType::from_name("Q8_0").unwrap().type_size(), 34);
        assert!(GgmlType::from_id(4).is_none());
        assert_eq!(GgmlType::from_name("Q4_0").unwrap().nbytes(64), Some(36));
        assert_eq!(GgmlType::from_name("Q4_0").unwrap().nbytes(33), None);
    }

    #[test]
    fn block_formats_agree_with_the_ggml_table() {
        for f in BlockFormat::ALL {
            let t = GgmlType::from_id(f.layout().ggml_id).unwrap();
            assert_eq!((t.name(), t.block(), t.type_size()), (f.name(), f.geometry().0, f.geometry().1));
            assert_eq!(t.block_format(), Some(*f));
        }
    }
}
