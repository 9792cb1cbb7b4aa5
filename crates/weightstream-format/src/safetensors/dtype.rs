//! safetensors dtype strings, as the `safetensors` crate 0.7 defines them.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)]
pub enum StDtype {
    BOOL,
    F4,
    F6_E2M3,
    F6_E3M2,
    U8,
    I8,
    F8_E5M2,
    F8_E4M3,
    F8_E8M0,
    I16,
    U16,
    F16,
    BF16,
    I32,
    U32,
    F32,
    C64,
    F64,
    I64,
    U64,
}

const ALL: &[(StDtype, &str, u64)] = &[
    (StDtype::BOOL, "BOOL", 8),
    (StDtype::F4, "F4", 4),
    (StDtype::F6_E2M3, "F6_E2M3", 6),
    (StDtype::F6_E3M2, "F6_E3M2", 6),
    (StDtype::U8, "U8", 8),
    (StDtype::I8, "I8", 8),
    (StDtype::F8_E5M2, "F8_E5M2", 8),
    (StDtype::F8_E4M3, "F8_E4M3", 8),
    (StDtype::F8_E8M0, "F8_E8M0", 8),
    (StDtype::I16, "I16", 16),
    (StDtype::U16, "U16", 16),
    (StDtype::F16, "F16", 16),
    (StDtype::BF16, "BF16", 16),
    (StDtype::I32, "I32", 32),
    (StDtype::U32, "U32", 32),
    (StDtype::F32, "F32", 32),
    (StDtype::C64, "C64", 64),
    (StDtype::F64, "F64", 64),
    (StDtype::I64, "I64", 64),
    (StDtype::U64, "U64", 64),
];

impl StDtype {
    pub fn parse(s: &str) -> Option<StDtype> {
        ALL.iter().find(|(_, n, _)| *n == s).map(|(d, _, _)| *d)
    }
    pub fn name(self) -> &'static str {
        ALL.iter().find(|(d, _, _)| *d == self).map(|(_, n, _)| *n).unwrap_or("?")
    }
    pub fn bits(self) -> u64 {
        ALL.iter().find(|(d, _, _)| *d == self).map(|(_, _, b)| *b).unwrap_or(8)
    }
    /// Bytes for `n_elems` elements; `None` on overflow or when sub-byte
    /// elements do not end on a byte boundary.
    pub fn nbytes(self, n_elems: u64) -> Option<u64> {
        let bits = n_elems.checked_mul(self.bits())?;
        (bits % 8 == 0).then_some(bits / 8)
    }
}

impl Serialize for StDtype {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}
