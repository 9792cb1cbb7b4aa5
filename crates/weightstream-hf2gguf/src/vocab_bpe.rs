//! tokenizer.json's byte-level BPE as convert_hf_to_gguf.py writes it
//! (`_set_vocab_gpt2`, `get_vocab_base`): tokens, token types, merges.
//!
//! convert names the BPE pre-tokenizer by hashing what the tokenizer makes
//! of a test text, which needs the tokenizer itself; here it is recognized
//! by tokenizer.json's split regex (the part that decides how llama.cpp
//! splits text), and a regex not in [`PRE`] is refused.

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::Value as Json;

use crate::error::{format_err, json_err, unsupported, Result};
use crate::vocab::{looks_special, spaces, TokenType, Vocab};

pub(crate) const TOKENIZER_JSON: &str = "tokenizer.json";

/// Split regexes of tokenizer.json and the llama.cpp pre-tokenizer (with
/// the same regex, llama-vocab.cpp) convert names for them.
const PRE: [(&str, &str); 2] = [
    (
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        "llama-bpe", // Llama 3
    ),
    (
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        "qwen2", // Qwen2, Qwen2.5, Qwen3
    ),
];

/// The parts of tokenizer.json the conversion reads.
#[derive(Deserialize)]
pub(crate) struct TokenizerJson {
    #[serde(default)]
    model: Option<Model>,
    #[serde(default)]
    pub(crate) added_tokens: Vec<AddedToken>,
    #[serde(default)]
    pre_tokenizer: Option<Json>,
    #[serde(default)]
    pub(crate) normalizer: Option<Json>,
    #[serde(default)]
    pub(crate) post_processor: Option<Json>,
}

#[derive(Deserialize)]
pub(crate) struct AddedToken {
    pub(crate) id: i64,
    pub(crate) content: String,
    #[serde(default)]
    pub(crate) special: bool,
}

#[derive(Deserialize)]
struct Model {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    vocab: Option<Pairs>,
    #[serde(default)]
    merges: Vec<Json>,
}

/// A JSON object as its (key, value) pairs in file order, every key kept:
/// a vocabulary that repeats a token must be seen to, not silently
/// collapsed to its last id (llama.cpp aborts on duplicate token text).
pub(crate) struct Pairs(pub(crate) Vec<(String, Json)>);

impl<'de> Deserialize<'de> for Pairs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Pairs, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Pairs;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object of token -> id")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> std::result::Result<Pairs, A::Error> {
                let mut v = Vec::with_capacity(m.size_hint().unwrap_or(0).min(1 << 20));
                while let Some(pair) = m.next_entry()? {
                    v.push(pair);
                }
                Ok(Pairs(v))
            }
        }
        d.deserialize_map(V)
    }
}

pub(crate) fn parse(bytes: &[u8]) -> Result<TokenizerJson> {
    serde_json::from_slice(bytes).map_err(|e| json_err(TOKENIZER_JSON, e))
}

/// The pre-tokenizer: Sequence[Split(regex), ByteLevel(use_regex=false)].
fn pre_of(tok: &TokenizerJson) -> Result<&'static str> {
    let p = tok.pre_tokenizer.as_ref();
    let seq = p.filter(|p| p.get("type").and_then(Json::as_str) == Some("Sequence")).and_then(|p| p.get("pretokenizers")?.as_array());
    if let Some([split, bl]) = seq.map(Vec::as_slice) {
        let regex = split.get("pattern").and_then(|p| p.get("Regex")).and_then(Json::as_str);
        let byte_level =
            bl.get("type").and_then(Json::as_str) == Some("ByteLevel") && bl.get("use_regex").and_then(Json::as_bool) == Some(false);
        if let (Some(regex), true) = (regex, byte_level) {
            return PRE.iter().find(|(r, _)| *r == regex).map(|(_, name)| *name).ok_or_else(|| {
                unsupported(
                    TOKENIZER_JSON,
                    "pre_tokenizer.pretokenizers[0].pattern.Regex",
                    "not a split regex the converter knows (Llama 3's, Qwen2's)",
                )
            });
        }
    }
    Err(unsupported(
        TOKENIZER_JSON,
        "pre_tokenizer",
        "not a regex split followed by ByteLevel: not a tokenizer the converter takes (Llama 3 and Qwen byte-level BPE are)",
    ))
}

/// A merge `"a b"` or `["a", "b"]` as `"a b"`, spaces inside a part written
/// as U+0120 (gguf-py's SpecialVocab).
fn merge_of(m: &Json) -> Option<String> {
    match m {
        Json::String(s) => Some(s.clone()),
        Json::Array(p) => match p.as_slice() {
            [Json::String(a), Json::String(b)] => Some(format!("{} {}", a.replace(' ', "\u{120}"), b.replace(' ', "\u{120}"))),
            _ => None,
        },
        _ => None,
    }
}

/// The vocabulary of `n_vocab` tokens (the embedding's rows: already
/// checked against config.json, so nothing here is sized from an unchecked
/// value).
pub(crate) fn vocab(tok: &TokenizerJson, n_vocab: u32) -> Result<Vocab> {
    let pre = pre_of(tok)?;
    let model = tok.model.as_ref();
    let (Some("BPE"), Some(pairs)) = (model.and_then(|m| m.kind.as_deref()), model.and_then(|m| m.vocab.as_ref())) else {
        return Err(unsupported(TOKENIZER_JSON, "model.type", "only BPE tokenizers with a vocab are converted"));
    };
    let n = n_vocab as usize;
    let mut tokens: Vec<Option<String>> = vec![None; n];
    let mut types = vec![TokenType::Unused; n];
    // A key twice, or an id twice: the tokenizers library would keep one of
    // them and leave a hole or a duplicate; llama.cpp aborts on the latter.
    let mut seen = std::collections::HashMap::with_capacity(pairs.0.len());
    for (text, id) in &pairs.0 {
        let id = id.as_u64().filter(|&i| i < n_vocab as u64);
        let Some(id) = id else {
            return Err(format_err(TOKENIZER_JSON, &format!("model.vocab[{text:?}]"), format!("id outside the vocabulary of {n_vocab}")));
        };
        if let Some(first) = seen.insert(text.as_str(), id) {
            return Err(format_err(TOKENIZER_JSON, "model.vocab", format!("token {text:?} appears twice (ids {first} and {id})")));
        }
        if let Some(other) = &tokens[id as usize] {
            return Err(format_err(TOKENIZER_JSON, "model.vocab", format!("id {id} is given to both {other:?} and {text:?}")));
        }
        tokens[id as usize] = Some(text.clone());
        types[id as usize] = TokenType::Normal;
    }
    for (i, a) in tok.added_tokens.iter().enumerate() {
        let Some(id) = u64::try_from(a.id).ok().filter(|&i| i < n_vocab as u64) else {
            return Err(format_err(
                TOKENIZER_JSON,
                &format!("added_tokens[{i}].id"),
                format!("{} is outside the vocabulary of {n_vocab}", a.id),
            ));
        };
        let control = a.special || looks_special(&a.content);
        tokens[id as usize] = Some(if control { a.content.clone() } else { spaces(&a.content) });
        types[id as usize] = if control { TokenType::Control } else { TokenType::UserDefined };
    }
    let tokens: Vec<String> = tokens.into_iter().enumerate().map(|(i, t)| t.unwrap_or_else(|| format!("[PAD{i}]"))).collect();
    let merges = model.map_or(&[][..], |m| &m.merges[..]);
    let merges = merges
        .iter()
        .enumerate()
        .map(|(i, m)| {
            merge_of(m).ok_or_else(|| format_err(TOKENIZER_JSON, &format!("model.merges[{i}]"), "neither \"a b\" nor [\"a\", \"b\"]"))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Vocab { model: "gpt2", pre, tokens, scores: None, types, merges, special_limit: None, file: TOKENIZER_JSON })
}
