//! Encodings: how a tensor's stored bytes become BF16, in the vocabulary
//! the readers produce and every kernel implements.

use serde::Serialize;

use crate::block::BlockFormat;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Fp8Format {
    E4M3,
    E5M2,
}

/// How a tensor's stored bytes become BF16. Serialized as its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    F32,
    F16,
    BF16,
    /// A block quantization format (ggml's Q4_0 ... Q6_K): `crate::block`.
    Block(BlockFormat),
    Fp8(Fp8Format),
    /// FP4 E2M1 values two per byte, low nibble first, each group of
    /// elements times its scale (the safetensors 4-bit schemes:
    /// weightstream-format's `packed`).
    E2m1,
    /// Signed integers of `bits` bits (4 or 8) packed little-endian in
    /// int32 words, stored with a `2^(bits-1)` offset (compressed-tensors
    /// `pack-quantized`): `(q - zero_point) * scale` per group.
    Int {
        bits: u8,
    },
}

impl Encoding {
    pub fn name(self) -> &'static str {
        match self {
            Encoding::F32 => "F32",
            Encoding::F16 => "F16",
            Encoding::BF16 => "BF16",
            Encoding::Block(f) => f.name(),
            Encoding::Fp8(Fp8Format::E4M3) => "F8_E4M3",
            Encoding::Fp8(Fp8Format::E5M2) => "F8_E5M2",
            Encoding::E2m1 => "E2M1",
            Encoding::Int { bits: 4 } => "INT4",
            Encoding::Int { .. } => "INT8",
        }
    }

    /// Elements per independently decodable block, and its size in bytes.
    /// Chunks of a tensor start and end on these boundaries.
    pub fn block(self) -> (u64, u64) {
        match self {
            Encoding::F32 => (1, 4),
            Encoding::F16 | Encoding::BF16 => (1, 2),
            Encoding::Block(f) => f.geometry(),
            Encoding::Fp8(_) => (1, 1),
            Encoding::E2m1 => (2, 1),
            // One int32 word: 8 nibbles or 4 bytes.
            Encoding::Int { bits } => (32 / bits as u64, 4),
        }
    }
}

impl Serialize for Encoding {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// E2M1 (FP4) values by code: sign bit 3, then 0, 0.5, 1, 1.5, 2, 3, 4, 6
/// (code 8 is -0.0, as the references decode it). The one definition the
/// CPU kernels use; the CUDA kernel builds the same values from the bits
/// (kernels/cuda/packed.cu) and the parity tests compare the two.
pub const E2M1_VALUES: [f32; 16] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0];
