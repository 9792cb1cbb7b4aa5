//! What the two vocabulary readers (vocab_bpe.rs, vocab_spm.rs) share: the
//! token types, convert's token-text rules, and the tokenizer keys written
//! from a vocabulary, after the check llama.cpp's loader would abort on.

use std::collections::HashMap;

use crate::error::{format_err, Result};
use crate::meta::{Metadata, Value};

/// gguf-py's TokenType.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TokenType {
    Normal = 1,
    Unknown = 2,
    Control = 3,
    UserDefined = 4,
    Unused = 5,
    Byte = 6,
}

pub(crate) struct Vocab {
    pub(crate) model: &'static str,
    pub(crate) pre: &'static str,
    pub(crate) tokens: Vec<String>,
    pub(crate) scores: Option<Vec<f32>>,
    pub(crate) types: Vec<TokenType>,
    pub(crate) merges: Vec<String>,
    /// Special-token ids from this one on are skipped (the SentencePiece
    /// path's `n_vocab`, as SpecialVocab is given it there).
    pub(crate) special_limit: Option<u32>,
    /// Where the tokens came from, for errors.
    pub(crate) file: &'static str,
}

/// convert's `does_token_look_special`.
pub(crate) fn looks_special(t: &str) -> bool {
    matches!(t, "<pad>" | "<mask>" | "<2mass>" | "[@BOS@]")
        || (t.len() >= 4 && t.starts_with("<|") && t.ends_with("|>"))
        || (t.len() >= 8 && t.starts_with("<\u{ff5c}") && t.ends_with("\u{ff5c}>"))
        || (t.len() >= 8 && t.starts_with("<unused") && t.ends_with('>'))
}

/// Python's truthiness of a JSON value (`if x:`).
pub(crate) fn truthy(v: &serde_json::Value) -> bool {
    use serde_json::Value as J;
    match v {
        J::Null => false,
        J::Bool(b) => *b,
        J::Number(n) => n.as_f64() != Some(0.0),
        J::String(s) => !s.is_empty(),
        J::Array(a) => !a.is_empty(),
        J::Object(o) => !o.is_empty(),
    }
}

/// `s` with every U+2581 (▁) a space: convert pre-normalizes user-defined
/// tokens so.
pub(crate) fn spaces(s: &str) -> String {
    s.replace('\u{2581}', " ")
}

impl Vocab {
    /// Two ids with the same text make llama.cpp's vocabulary loader abort
    /// the process: refused here, naming both.
    fn check_unique(&self) -> Result<()> {
        let mut seen: HashMap<&str, usize> = HashMap::with_capacity(self.tokens.len());
        for (i, t) in self.tokens.iter().enumerate() {
            if let Some(j) = seen.insert(t, i) {
                return Err(format_err(
                    self.file,
                    "tokens",
                    format!("ids {j} and {i} have the same text {t:?} (llama.cpp needs distinct tokens)"),
                ));
            }
        }
        Ok(())
    }

    pub(crate) fn write(&self, meta: &mut Metadata) -> Result<()> {
        self.check_unique()?;
        meta.set("tokenizer.ggml.model", Value::Str(self.model.into()));
        meta.set("tokenizer.ggml.pre", Value::Str(self.pre.into()));
        meta.set("tokenizer.ggml.tokens", Value::StrArray(self.tokens.clone()));
        if let Some(s) = &self.scores {
            meta.set("tokenizer.ggml.scores", Value::F32Array(s.clone()));
        }
        meta.set("tokenizer.ggml.token_type", Value::I32Array(self.types.iter().map(|&t| t as i32).collect()));
        if !self.merges.is_empty() {
            meta.set("tokenizer.ggml.merges", Value::StrArray(self.merges.clone()));
        }
        Ok(())
    }
}
