//! The output: GGUF key-value metadata (in the order convert_hf_to_gguf.py
//! writes it; a key set twice keeps its first place and the last value, as
//! `gguf_set_*` does) and the tensor map.

use std::collections::HashMap;

/// A GGUF metadata value, of the types convert writes: the GGUF writer's
/// own (weightstream-format), so what is built here is what is written.
pub use weightstream_format::gguf::writer::WriteValue as Value;

/// The GGUF element type of a mapped tensor (convert's `--outtype bf16`:
/// F32 for 1-D tensors, norms and the MoE router, BF16 otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TensorType {
    F32,
    BF16,
}

/// One tensor llama.cpp is given and where its data comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappedTensor {
    /// The GGUF name: `blk.0.attn_q.weight`.
    pub name: String,
    /// Outermost first (as safetensors; GGUF lists dimensions innermost first).
    pub shape: Vec<u64>,
    pub ty: TensorType,
    /// Indices into the input tensor list; several (one per expert, in
    /// expert order) for a stacked expert tensor, whose shape gains an
    /// outermost dimension.
    pub sources: Vec<usize>,
    /// llama's q/k rows in convert's order (`LlamaModel.permute`): the
    /// number of heads to permute by, 0 for none. A row order the loader
    /// writes directly: output row `h * d + 2 * i + j` (d rows per head)
    /// is input row `h * d + j * d / 2 + i`.
    pub permute_heads: u32,
    /// A tensor convert computes rather than reads (Llama 3's
    /// `rope_freqs.weight`): its F32 values' bits; `sources` is empty.
    pub generated: Vec<u32>,
    /// A part of its one source: (first row, the source's rows); this
    /// tensor's outermost dimension is how many rows it takes. Only in
    /// [`Metadata::user_init_tensors`].
    pub rows: Option<(u64, u64)>,
}

/// The keys and the tensors convert writes. Tied embeddings have no
/// `output.weight`: llama.cpp then multiplies by `token_embd.weight`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metadata {
    /// Read it freely; write it through [`Metadata::set`], which keeps the
    /// key index (a direct change is noticed and the index rebuilt).
    pub kv: Vec<(String, Value)>,
    pub tensors: Vec<MappedTensor>,
    /// Fused tensors llama.cpp does not create when the caller fills the
    /// tensors (`llama_model_init_from_user` skips them as
    /// TENSOR_SKIP_IF_VIRTUAL: Phi-3's `attn_qkv`), with the parts it
    /// creates instead, each a row range of the fused tensor's source.
    pub unfused: Vec<(String, Vec<MappedTensor>)>,
    /// Key -> its place in `kv`: a model card's 100,000 datasets are
    /// 400,000 keys, each set once; found by a scan of `kv`, that was
    /// quadratic (322 s, issue 55).
    index: HashMap<String, usize>,
}

impl Metadata {
    /// The index of `key` in `kv`, the index first rebuilt if `kv` was
    /// changed directly (its length or the key found no longer agree).
    fn slot(&mut self, key: &str) -> Option<usize> {
        if self.index.len() == self.kv.len() {
            match self.index.get(key) {
                None => return None,
                Some(&i) if self.kv.get(i).is_some_and(|e| e.0 == key) => return Some(i),
                Some(_) => {}
            }
        }
        // A repeated key (pushed directly) is found at its first place, as a scan finds it.
        self.index.clear();
        for (i, (k, _)) in self.kv.iter().enumerate() {
            self.index.entry(k.clone()).or_insert(i);
        }
        self.index.get(key).copied()
    }

    pub fn set(&mut self, key: impl Into<String>, value: Value) {
        let key = key.into();
        match self.slot(&key) {
            Some(i) => self.kv[i].1 = value,
            None => {
                self.index.insert(key.clone(), self.kv.len());
                self.kv.push((key, value));
            }
        }
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        match self.index.get(key).and_then(|&i| self.kv.get(i)) {
            Some((k, v)) if k == key => Some(v),
            // Not indexed (kv changed directly, or absent): the first match, as before.
            _ if self.index.len() != self.kv.len() => self.kv.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn tensor(&self, name: &str) -> Option<&MappedTensor> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// The tensors as llama.cpp creates them for a caller that fills them
    /// (the C adapter): [`Metadata::tensors`] with each fused one replaced
    /// by its parts. A GGUF file holds [`Metadata::tensors`].
    pub fn user_init_tensors(&self) -> Vec<MappedTensor> {
        let mut out = vec![];
        for t in &self.tensors {
            match self.unfused.iter().find(|(name, _)| *name == t.name) {
                Some((_, parts)) => out.extend(parts.iter().cloned()),
                None => out.push(t.clone()),
            }
        }
        out
    }
}
