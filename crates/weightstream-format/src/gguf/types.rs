//! ggml tensor types: every id llama.cpp defines, with block geometry, so
//! `inspect` can list any file; only some are loadable.

use serde::Serialize;

use weightstream_blocks::block::{self, BlockFormat};

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

const QK_K: u64 = block::QK_K as u64;

/// The ggml types without a block format of ours: the plain element types
/// and the quantizations weightstream lists but does not load. Ids, block
/// sizes and bytes per block as in ggml.h / gguf-py 0.19.0
/// (GGML_QUANT_SIZES). Ids 4, 5 (Q4_2, Q4_3) and 31-33, 36-38 were removed
/// from ggml and are rejected as unknown.
const OTHER_TYPES: [GgmlTypeInfo; 10] = [
    info(0, "F32", 1, 4),
    info(1, "F16", 1, 2),
    info(9, "Q8_1", 32, 4 + 4 + 32),
    info(15, "Q8_K", 256, 4 + QK_K + QK_K / 8),
    info(24, "I8", 1, 1),
    info(25, "I16", 1, 2),
    info(26, "I32", 1, 4),
    info(27, "I64", 1, 8),
    info(28, "F64", 1, 8),
    info(30, "BF16", 1, 2),
];
const OTHERS: usize = OTHER_TYPES.len();

const fn info(id: u32, name: &'static str, block: u64, type_size: u64) -> GgmlTypeInfo {
    GgmlTypeInfo { id, name, block, type_size }
}

/// Every known type, by id: the others above and one row per block format,
/// its id, name and geometry taken from its one definition in
/// `weightstream_blocks::block` (nothing restated here).
static TYPES: [GgmlTypeInfo; OTHERS + BlockFormat::ALL.len()] = {
    let mut t = [OTHER_TYPES[0]; OTHERS + BlockFormat::ALL.len()];
    let mut n = 0;
    while n < OTHERS {
        t[n] = OTHER_TYPES[n];
        n += 1;
    }
    let mut k = 0;
    while k < BlockFormat::ALL.len() {
        let l = BlockFormat::ALL[k].layout();
        t[n + k] = info(l.ggml_id, l.name, l.elems as u64, l.bytes as u64);
        k += 1;
    }
    // Insertion sort by id (const context): `all()` lists types in id order.
    let mut i = 1;
    while i < t.len() {
        let mut j = i;
        while j > 0 && t[j - 1].id > t[j].id {
            let tmp = t[j];
            t[j] = t[j - 1];
            t[j - 1] = tmp;
            j -= 1;
        }
        i += 1;
    }
    t
};

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
