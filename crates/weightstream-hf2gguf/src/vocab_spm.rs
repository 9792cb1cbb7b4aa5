//! A SentencePiece tokenizer.model (Llama 2, Mistral) as the vocabulary
//! convert_hf_to_gguf.py writes from it (`_set_vocab_sentencepiece`,
//! `_create_vocab_sentencepiece`): model "llama", pre "default", every
//! piece with its score and type, then added_tokens.json and
//! tokenizer_config.json's added_tokens_decoder over them, ids up to the
//! vocabulary's size padded as `[PADn]`; Phi-3's variant of it
//! (conversion/phi.py) as [`vocab_phi3`].

use serde_json::Value as Json;

use crate::error::{format_err, json_err, Result};
use crate::vocab::{looks_special, spaces, truthy, TokenType, Vocab};
use crate::vocab_bpe::{AddedToken, Pairs, TOKENIZER_JSON};

pub(crate) const TOKENIZER_MODEL: &str = "tokenizer.model";
const ADDED_TOKENS: &str = "added_tokens.json";
const TOKENIZER_CONFIG: &str = "tokenizer_config.json";

/// sentencepiece_model.proto's ModelProto: only its pieces are read.
#[derive(Clone, PartialEq, prost::Message)]
struct ModelProto {
    #[prost(message, repeated, tag = "1")]
    pieces: Vec<Piece>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Piece {
    #[prost(string, optional, tag = "1")]
    piece: Option<String>,
    #[prost(float, optional, tag = "2")]
    score: Option<f32>,
    #[prost(int32, optional, tag = "3")]
    kind: Option<i32>,
}

/// The pieces of `model` over `n` `[PADi]` slots: (tokens, scores,
/// types); with `strict`, more pieces than slots is refused (Phi-3's
/// loop would index past its list), else they are cut off.
fn pieces(model: &[u8], n: usize, strict: bool) -> Result<(Vec<String>, Vec<f32>, Vec<TokenType>)> {
    let proto = <ModelProto as prost::Message>::decode(model)
        .map_err(|e| format_err(TOKENIZER_MODEL, "(whole file)", format!("not a SentencePiece model: {e}")))?;
    if strict && proto.pieces.len() > n {
        return Err(format_err(TOKENIZER_MODEL, "pieces", format!("{} pieces, but config.json's vocab_size is {n}", proto.pieces.len())));
    }
    let mut tokens: Vec<String> = (0..n).map(|i| format!("[PAD{i}]")).collect();
    let mut scores = vec![-10000.0f32; n];
    let mut types = vec![TokenType::Unused; n];
    for (i, p) in proto.pieces.into_iter().enumerate().take(n) {
        let text = p.piece.ok_or_else(|| format_err(TOKENIZER_MODEL, &format!("pieces[{i}].piece"), "missing"))?;
        // UNKNOWN, CONTROL, UNUSED and BYTE kept, everything else NORMAL.
        types[i] = match p.kind.unwrap_or(1) {
            2 => TokenType::Unknown,
            3 => TokenType::Control,
            5 => TokenType::Unused,
            6 => TokenType::Byte,
            _ => TokenType::Normal,
        };
        tokens[i] = text;
        scores[i] = p.score.unwrap_or(0.0);
    }
    Ok((tokens, scores, types))
}

fn spm_vocab(tokens: Vec<String>, scores: Vec<f32>, types: Vec<TokenType>, n_vocab: u32) -> Vocab {
    Vocab {
        model: "llama",
        pre: "default",
        tokens,
        scores: Some(scores),
        types,
        merges: vec![],
        special_limit: Some(n_vocab),
        file: TOKENIZER_MODEL,
    }
}

/// The vocabulary of `n_vocab` tokens (the embedding's rows).
pub(crate) fn vocab(model: &[u8], added_tokens: Option<&[u8]>, decoder: Option<&Json>, n_vocab: u32) -> Result<Vocab> {
    let (mut tokens, mut scores, mut types) = pieces(model, n_vocab as usize, false)?;
    if let Some(bytes) = added_tokens {
        let added: Pairs = serde_json::from_slice(bytes).map_err(|e| json_err(ADDED_TOKENS, e))?;
        for (text, id) in added.0 {
            if let Some(id) = id.as_u64().filter(|&i| i < n_vocab as u64) {
                tokens[id as usize] = text;
                scores[id as usize] = -1000.0;
                types[id as usize] = TokenType::UserDefined;
            }
        }
    }
    if let Some(dec) = decoder {
        let dec = dec.as_object().ok_or_else(|| format_err(TOKENIZER_CONFIG, "added_tokens_decoder", "not an object"))?;
        for (key, entry) in dec {
            let field = format!("added_tokens_decoder.{key}");
            let id: i64 = key.parse().map_err(|_| format_err(TOKENIZER_CONFIG, &field, "the key is not an integer id"))?;
            let content =
                entry.get("content").and_then(Json::as_str).ok_or_else(|| format_err(TOKENIZER_CONFIG, &field, "no content string"))?;
            if let Some(id) = u64::try_from(id).ok().filter(|&i| i < n_vocab as u64) {
                let control = entry.get("special").and_then(Json::as_bool) == Some(true) || looks_special(content);
                tokens[id as usize] = if control { content.to_string() } else { spaces(content) };
                scores[id as usize] = -1000.0;
                types[id as usize] = if control { TokenType::Control } else { TokenType::UserDefined };
            }
        }
    }
    Ok(spm_vocab(tokens, scores, types, n_vocab))
}

/// An id convert's Phi-3 path indexes its token list with: one outside
/// it raises there (a negative one would silently count from the end).
fn phi3_id(file: &str, field: &str, id: Option<i64>, n_vocab: u32) -> Result<usize> {
    id.filter(|&i| (0..n_vocab as i64).contains(&i))
        .map(|i| i as usize)
        .ok_or_else(|| format_err(file, field, format!("not a token id below config.json's vocab_size {n_vocab}")))
}

/// Phi3MiniModel.set_vocab's SentencePiece branch: the pieces, then
/// added_tokens.json (ids past the vocabulary skipped), tokenizer_config's
/// added_tokens_decoder and tokenizer.json's added_tokens over them, their
/// text as written (no U+2581 to space), USER_DEFINED or, when marked
/// special, CONTROL, all scored -1000.
pub(crate) fn vocab_phi3(
    model: &[u8],
    added_tokens: Option<&[u8]>,
    decoder: Option<&Json>,
    added: &[AddedToken],
    n_vocab: u32,
) -> Result<Vocab> {
    let (mut tokens, mut scores, mut types) = pieces(model, n_vocab as usize, true)?;
    let mut set = |id: usize, text: &str, control: bool| {
        tokens[id] = text.to_string();
        scores[id] = -1000.0;
        types[id] = if control { TokenType::Control } else { TokenType::UserDefined };
    };
    if let Some(bytes) = added_tokens {
        let added: Pairs = serde_json::from_slice(bytes).map_err(|e| json_err(ADDED_TOKENS, e))?;
        for (text, id) in added.0 {
            let field = format!("{text:?}");
            let id = id.as_i64().ok_or_else(|| format_err(ADDED_TOKENS, &field, format!("{id} is not an integer id")))?;
            if id >= n_vocab as i64 {
                continue; // convert: "ignore token ...: id is out of range"
            }
            set(phi3_id(ADDED_TOKENS, &field, Some(id), n_vocab)?, &text, false);
        }
    }
    if let Some(dec) = decoder {
        let dec = dec.as_object().ok_or_else(|| format_err(TOKENIZER_CONFIG, "added_tokens_decoder", "not an object"))?;
        for (key, entry) in dec {
            let field = format!("added_tokens_decoder.{key}");
            let id = phi3_id(TOKENIZER_CONFIG, &field, key.parse().ok(), n_vocab)?;
            let content =
                entry.get("content").and_then(Json::as_str).ok_or_else(|| format_err(TOKENIZER_CONFIG, &field, "no content string"))?;
            set(id, content, entry.get("special").is_some_and(truthy));
        }
    }
    for (i, a) in added.iter().enumerate() {
        let id = phi3_id(TOKENIZER_JSON, &format!("added_tokens[{i}].id"), Some(a.id), n_vocab)?;
        set(id, &a.content, a.special);
    }
    Ok(spm_vocab(tokens, scores, types, n_vocab))
}
