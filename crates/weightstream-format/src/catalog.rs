//! The catalog: every tensor of a checkpoint, format-neutral, validated.
//!
//! Readers produce it; the planner consumes it. A tensor's `encoding` says how
//! its bytes become BF16 (what the dequant kernels implement), or why they
//! cannot.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::Value as Json;

use crate::gguf::{GgmlType, MetadataValue};
use crate::safetensors::StDtype;
pub use weightstream_blocks::{BlockFormat, Encoding, Fp8Format, GlobalOp, ScaleDtype, ScaleKind, ScaleLayout};
use weightstream_io::SharedSource;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Gguf,
    Safetensors,
}

/// A tensor's storage type, in its own format's vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dtype {
    Ggml(GgmlType),
    St(StDtype),
}

impl Dtype {
    pub fn name(self) -> &'static str {
        match self {
            Dtype::Ggml(t) => t.name(),
            Dtype::St(d) => d.name(),
        }
    }
}

impl Serialize for Dtype {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// An FP8 weight's link to its scale tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ScaleRef {
    /// Index of the scale tensor in `Catalog::tensors`.
    pub tensor: usize,
    pub dtype: ScaleDtype,
    pub layout: ScaleLayout,
}

/// A packed weight's global scale, read and checked at open.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GlobalScale {
    /// Index of the global-scale tensor in `Catalog::tensors`.
    pub tensor: usize,
    pub value: f32,
    pub op: GlobalOp,
}

/// Which producer's layout a packed weight follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PackedScheme {
    /// NVIDIA ModelOpt NVFP4 (`hf_quant_config.json` `quant_algo: NVFP4`).
    Nvfp4Modelopt,
    /// compressed-tensors `nvfp4-pack-quantized`.
    Nvfp4CompressedTensors,
    /// compressed-tensors `mxfp4-pack-quantized`.
    Mxfp4CompressedTensors,
    /// gpt-oss's MXFP4 experts (`*_blocks`, `*_scales`).
    Mxfp4GptOss,
    /// compressed-tensors `pack-quantized` integers (GPTQ/AWQ-style W4A16,
    /// W8A16), symmetric or with zero points.
    IntCompressedTensors,
}

impl PackedScheme {
    pub fn name(self) -> &'static str {
        match self {
            PackedScheme::Nvfp4Modelopt => "NVFP4 (ModelOpt)",
            PackedScheme::Nvfp4CompressedTensors => "NVFP4 (compressed-tensors nvfp4-pack-quantized)",
            PackedScheme::Mxfp4CompressedTensors => "MXFP4 (compressed-tensors mxfp4-pack-quantized)",
            PackedScheme::Mxfp4GptOss => "MXFP4 (gpt-oss)",
            PackedScheme::IntCompressedTensors => "integers (compressed-tensors pack-quantized)",
        }
    }
}

/// A weight stored packed in another dtype beside its scale tensors (the
/// safetensors 4-bit schemes, `crate::packed`): the BF16 tensor it becomes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Packed {
    pub scheme: PackedScheme,
    /// How its stored bytes become BF16 (E2M1, INT4, INT8).
    pub encoding: Encoding,
    /// The BF16 tensor's name (`X.weight`; gpt-oss's `X_blocks` becomes `X`).
    pub name: String,
    /// The BF16 tensor's shape (the stored one with its last dimension in
    /// elements, not bytes).
    pub shape: Vec<u64>,
    pub global: Option<GlobalScale>,
    /// Index of the zero-point tensor (asymmetric integer packs): int32
    /// words packed along the rows, one value per group scale.
    pub zeros: Option<usize>,
}

/// What a tensor is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Role {
    /// A model tensor: loaded and handed out.
    Data,
    /// A scale (or global scale) of the FP8 or packed weight at this index:
    /// consumed by its dequant.
    Scale { weight: usize },
    /// An activation scale (`input_scale`): not needed to dequantize weights.
    InputScale,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TensorInfo {
    pub name: String,
    pub dtype: Dtype,
    /// Row-major, outermost dimension first (as numpy and torch show it).
    pub shape: Vec<u64>,
    /// Index into `Catalog::files`.
    pub file: usize,
    /// Absolute byte offset in its file.
    pub offset: u64,
    pub nbytes: u64,
    pub role: Role,
    pub scale: Option<ScaleRef>,
    /// Set for a packed 4-bit weight: what it becomes (boxed: most tensors
    /// have none, and catalogs of a million tensors stay small).
    pub packed: Option<Box<Packed>>,
}

impl TensorInfo {
    /// A data tensor of file 0 at offset 0 with no bytes, unpaired: what
    /// tests build catalogs and pairings from.
    pub fn test(name: &str, dtype: Dtype, shape: &[u64]) -> TensorInfo {
        TensorInfo {
            name: name.into(),
            dtype,
            shape: shape.to_vec(),
            file: 0,
            offset: 0,
            nbytes: 0,
            role: Role::Data,
            scale: None,
            packed: None,
        }
    }

    pub fn n_elems(&self) -> u64 {
        // Validated at open: the product fits.
        self.shape.iter().product()
    }

    /// `[rows, cols]` of the tensor seen as a row-major matrix: the innermost
    /// dimension against all the others.
    pub fn matrix(&self) -> (u64, u64) {
        match self.shape.split_last() {
            None => (1, 1),
            Some((&cols, rest)) => (rest.iter().product(), cols),
        }
    }

    /// The name of the BF16 tensor a load produces from this one.
    pub fn out_name(&self) -> &str {
        self.packed.as_ref().map_or(&self.name, |p| &p.name)
    }

    /// The shape of the BF16 tensor a load produces from this one.
    pub fn out_shape(&self) -> &[u64] {
        self.packed.as_ref().map_or(&self.shape, |p| &p.shape)
    }

    /// Elements of the BF16 tensor (validated at open: the product fits).
    pub fn out_elems(&self) -> u64 {
        self.out_shape().iter().product()
    }

    /// `[rows, cols]` of the BF16 tensor seen as a row-major matrix.
    pub fn out_matrix(&self) -> (u64, u64) {
        match self.out_shape().split_last() {
            None => (1, 1),
            Some((&cols, rest)) => (rest.iter().product(), cols),
        }
    }

    /// How this tensor becomes BF16, or why it cannot.
    pub fn encoding(&self) -> Result<Encoding, String> {
        if let Some(p) = &self.packed {
            return Ok(p.encoding);
        }
        let enc = match self.dtype {
            Dtype::Ggml(t) => match t.name() {
                "F32" => Some(Encoding::F32),
                "F16" => Some(Encoding::F16),
                "BF16" => Some(Encoding::BF16),
                _ => t.block_format().map(Encoding::Block),
            },
            Dtype::St(d) => match d {
                StDtype::F32 => Some(Encoding::F32),
                StDtype::F16 => Some(Encoding::F16),
                StDtype::BF16 => Some(Encoding::BF16),
                StDtype::F8_E4M3 => Some(Encoding::Fp8(Fp8Format::E4M3)),
                StDtype::F8_E5M2 => Some(Encoding::Fp8(Fp8Format::E5M2)),
                _ => None,
            },
        };
        enc.ok_or_else(|| unsupported_reason(self.dtype))
    }
}

/// Every encoding with a kernel, for messages: "F32, F16, BF16, Q4_0, ...".
pub fn supported_encodings() -> String {
    let mut names = vec!["F32", "F16", "BF16"];
    names.extend(BlockFormat::ALL.iter().map(|f| f.name()));
    names.extend(["F8_E4M3", "F8_E5M2", "E2M1 (NVFP4 and MXFP4 safetensors schemes)", "INT4, INT8 (compressed-tensors pack-quantized)"]);
    names.join(", ")
}

/// Why a dtype has no kernel: what it is and what is supported, so the
/// user knows whether a newer weightstream or another file is the way out.
fn unsupported_reason(dtype: Dtype) -> String {
    let what = match dtype {
        Dtype::Ggml(t) if matches!(t.name(), "I8" | "I16" | "I32" | "I64" | "F64") => {
            format!("ggml type {} is not a weight encoding weightstream dequantizes", t.name())
        }
        Dtype::Ggml(t) if matches!(t.name(), "Q8_1" | "Q8_K") => format!(
            "ggml type {} is an intermediate of ggml's matrix products, not a weight encoding: no reference \
             (gguf-py) dequantizes it, so weightstream refuses it rather than guess",
            t.name()
        ),
        Dtype::Ggml(t) => format!(
            "ggml type {} has no reference dequantization (gguf-py 0.19 has none) to check a kernel against, \
             so weightstream refuses it rather than guess",
            t.name()
        ),
        Dtype::St(d) => format!("safetensors dtype {} has no dequantization kernel in this version of weightstream", d.name()),
    };
    format!("{what} (supported: {})", supported_encodings())
}

/// One file of a checkpoint and the source that reads it.
#[derive(Clone)]
pub struct CatalogFile {
    pub path: PathBuf,
    pub source: SharedSource,
}

impl std::fmt::Debug for CatalogFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatalogFile").field("path", &self.path).field("len", &self.source.len()).finish()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Metadata {
    Gguf { version: u32, alignment: u64, kv: Vec<(String, MetadataValue)> },
    Safetensors(BTreeMap<String, String>),
}

impl Metadata {
    pub fn to_json(&self) -> Json {
        self.to_json_where(|_| true)
    }

    /// The keys `keep` accepts only: a GGUF's model keys without its
    /// `tokenizer.*` arrays (hundreds of thousands of strings in a current
    /// model) for a caller that builds a model config.
    pub fn to_json_where(&self, keep: impl Fn(&str) -> bool) -> Json {
        match self {
            Metadata::Gguf { kv, .. } => Json::Object(kv.iter().filter(|(k, _)| keep(k)).map(|(k, v)| (k.clone(), v.to_json())).collect()),
            Metadata::Safetensors(m) => Json::Object(m.iter().map(|(k, v)| (k.clone(), Json::String(v.clone()))).collect()),
        }
    }

    pub fn gguf_value(&self, key: &str) -> Option<&MetadataValue> {
        match self {
            Metadata::Gguf { kv, .. } => kv.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            Metadata::Safetensors(_) => None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Catalog {
    pub format: Format,
    /// What the user opened: a file or a checkpoint directory.
    pub root: PathBuf,
    pub files: Vec<CatalogFile>,
    pub metadata: Metadata,
    /// In file order (file index, then offset).
    pub tensors: Vec<TensorInfo>,
    /// `config.json` beside safetensors shards, when present.
    pub config: Option<Json>,
}

impl Catalog {
    /// What the checkpoint's remote files fetched from their store so far
    /// (every open, header and load through this catalog); `None` when no
    /// file is remote.
    pub fn fetched(&self) -> Option<crate::io::Fetched> {
        self.files.iter().filter_map(|f| f.source.fetched()).reduce(|a, b| a + b)
    }

    pub fn tensor(&self, name: &str) -> Option<(usize, &TensorInfo)> {
        self.tensors.iter().enumerate().find(|(_, t)| t.name == name)
    }

    /// The tensor a load produces as `name` (its BF16 name: a packed
    /// weight's, or the stored one).
    pub fn out_tensor(&self, name: &str) -> Option<(usize, &TensorInfo)> {
        self.data_tensors().find(|(_, t)| t.out_name() == name)
    }

    /// Tensors a load hands out (scales and activation scales are consumed
    /// or dropped).
    pub fn data_tensors(&self) -> impl Iterator<Item = (usize, &TensorInfo)> {
        self.tensors.iter().enumerate().filter(|(_, t)| t.role == Role::Data)
    }

    /// Sum of all files' sizes.
    pub fn file_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.source.len()).sum()
    }
}
