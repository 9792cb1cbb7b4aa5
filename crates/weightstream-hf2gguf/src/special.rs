//! The special-token keys as gguf-py's SpecialVocab (the vendored
//! gguf-py/gguf/vocab.py) writes them: ids of bos/eos/unk/sep/pad/mask from
//! tokenizer_config.json (by content, through tokenizer.json's
//! added_tokens) then config.json; the add_bos/add_eos/add_sep flags from
//! tokenizer.json's post-processor then tokenizer_config.json; the chat
//! template; the normalizer's lowercase and strip-accents flags.
//! Post-processors SpecialVocab would answer by renaming special tokens are
//! refused, and so is an id outside the vocabulary (llama.cpp indexes its
//! token table with it).

use serde_json::Value as Json;

use crate::config::{Config, CONFIG};
use crate::error::{format_err, unsupported, Result};
use crate::meta::{Metadata, Value};
use crate::vocab_bpe::{AddedToken, TOKENIZER_JSON};

const TOKENIZER_CONFIG: &str = "tokenizer_config.json";
const KINDS: [(&str, &str); 6] = [
    ("bos", "tokenizer.ggml.bos_token_id"),
    ("eos", "tokenizer.ggml.eos_token_id"),
    ("unk", "tokenizer.ggml.unknown_token_id"),
    ("sep", "tokenizer.ggml.seperator_token_id"),
    ("pad", "tokenizer.ggml.padding_token_id"),
    ("mask", "tokenizer.ggml.mask_token_id"),
];

#[derive(Default, Clone, Copy)]
struct Special {
    id: Option<u32>,
    add: Option<bool>,
}

/// What the special-token keys are read from.
pub(crate) struct Sources<'a> {
    pub(crate) post_processor: Option<&'a Json>,
    pub(crate) normalizer: Option<&'a Json>,
    pub(crate) added: &'a [AddedToken],
    pub(crate) tokenizer_config: Option<&'a Json>,
    pub(crate) chat_template_jinja: Option<&'a str>,
    pub(crate) config: &'a Config,
    /// Tokens in the vocabulary; ids from `limit` on are skipped as
    /// SpecialVocab skips them on the SentencePiece path, other ids at or
    /// past `n_vocab` refused.
    pub(crate) n_vocab: u32,
    pub(crate) limit: Option<u32>,
}

fn content_of(v: Option<&Json>) -> Option<&str> {
    match v? {
        Json::Object(o) => o.get("content").and_then(Json::as_str),
        v => v.as_str(),
    }
}

/// The add_bos/add_eos flags a post-processor implies; the special token a
/// template puts first, and the first one between A and B of a pair.
fn post_processor<'a>(pp: Option<&'a Json>, sp: &mut [Special; 6]) -> Result<(Option<&'a str>, Option<&'a str>)> {
    let Some(pp) = pp.filter(|p| p.is_object()) else { return Ok((None, None)) };
    let list: Vec<&Json> = match pp.get("processors").and_then(Json::as_array) {
        Some(l) => l.iter().collect(),
        None => vec![pp],
    };
    let (mut leading, mut middle) = (None, None);
    for p in list {
        match p.get("type").and_then(Json::as_str) {
            Some("ByteLevel") => {
                sp[0].add.get_or_insert(false);
                sp[1].add.get_or_insert(false);
            }
            Some("TemplateProcessing") => {
                let single = p.get("single").and_then(Json::as_array);
                if let Some([one]) = single.map(Vec::as_slice) {
                    if one.get("Sequence").is_some() {
                        continue; // [A]: nothing added
                    }
                }
                let first = match single.map(Vec::as_slice) {
                    Some([s, a]) if a.get("Sequence").is_some() => s.get("SpecialToken").and_then(|t| t.get("id")).and_then(Json::as_str),
                    _ => None,
                };
                let Some(first) = first else {
                    return Err(unsupported(
                        TOKENIZER_JSON,
                        "post_processor",
                        "a TemplateProcessing other than [A] or [special, A] is not supported",
                    ));
                };
                leading = Some(first);
                // pair [first, A, middle..., B]: add_sep from the first middle token.
                if let Some(pair) = p.get("pair").and_then(Json::as_array).filter(|p| p.len() > 3) {
                    fn seq(j: &Json) -> Option<&str> {
                        j.get("Sequence").and_then(|s| s.get("id")).and_then(Json::as_str)
                    }
                    if seq(&pair[1]) == Some("A") && seq(&pair[pair.len() - 1]) == Some("B") {
                        middle = pair[2].get("SpecialToken").and_then(|t| t.get("id")).and_then(Json::as_str);
                        sp[3].add = Some(false); // compared with sep and eos below
                    }
                }
            }
            Some(t) => return Err(unsupported(TOKENIZER_JSON, "post_processor.type", format!("{t} is not supported"))),
            None => {}
        }
    }
    Ok((leading, middle))
}

/// SpecialVocab._parse_normalizer: Lowercase / StripAccents flags.
fn normalizer_flags(n: Option<&Json>, lower: &mut Option<bool>, strip: &mut Option<bool>) {
    let Some(t) = n.and_then(|n| n.get("type")).and_then(Json::as_str) else { return };
    let n = n.expect("has a type");
    match t {
        "Lowercase" => *lower = Some(true),
        "StripAccents" => *strip = Some(true),
        "BertNormalizer" => {
            if let Some(l) = n.get("lowercase").and_then(Json::as_bool) {
                *lower = Some(l);
            }
            if let Some(a) = n.get("strip_accents").and_then(Json::as_bool) {
                *strip = Some(a);
            }
        }
        "Sequence" => {
            n.get("normalizers").and_then(Json::as_array).into_iter().flatten().for_each(|x| normalizer_flags(Some(x), lower, strip))
        }
        _ => {}
    }
}

pub(crate) fn write(s: &Sources, meta: &mut Metadata) -> Result<()> {
    let mut lower = None;
    let mut strip = None;
    normalizer_flags(s.normalizer, &mut lower, &mut strip);
    if let Some(l) = lower {
        meta.set("tokenizer.ggml.normalizer.lowercase", Value::Bool(l));
    }
    if let Some(a) = strip {
        meta.set("tokenizer.ggml.normalizer.strip_accents", Value::Bool(a));
    }
    let mut sp = [Special::default(); 6];
    let (leading, middle) = post_processor(s.post_processor, &mut sp)?;
    let tc = s.tokenizer_config;
    let added_id = |content: &str| s.added.iter().find(|a| a.content == content).map(|a| a.id);
    // The first valid source wins (SpecialVocab._set_special_token).
    let set_id = |sp: &mut Special, id: i64, file: &str, field: &str| -> Result<()> {
        if sp.id.is_some() || id < 0 {
            return Ok(());
        }
        if s.limit.is_some_and(|l| id >= l as i64) {
            return Ok(()); // SpecialVocab given n_vocab skips it
        }
        if id >= s.n_vocab as i64 {
            return Err(format_err(file, field, format!("id {id} is outside the vocabulary of {}", s.n_vocab)));
        }
        sp.id = Some(id as u32);
        Ok(())
    };
    if let Some(first) = leading {
        // A template's leading token is the BOS token, added (a different
        // one would make convert rename tokens: refused).
        let bos = content_of(tc.and_then(|t| t.get("bos_token")));
        if bos.is_some_and(|b| b != first) {
            return Err(unsupported(
                TOKENIZER_JSON,
                "post_processor",
                format!("adds {first:?} first, but tokenizer_config.json's bos_token is {:?}", bos.unwrap_or("")),
            ));
        }
        if bos.is_none() {
            if let Some(id) = added_id(first) {
                set_id(&mut sp[0], id, TOKENIZER_JSON, "added_tokens")?;
            }
        }
        sp[0].add = Some(true);
        for k in [1usize, 3] {
            let key = if k == 1 { "eos_token" } else { "sep_token" };
            if middle.is_some() && content_of(tc.and_then(|t| t.get(key))) == middle {
                sp[3].add = Some(true);
            }
        }
    }
    if let Some(tc) = tc {
        match (tc.get("chat_template"), s.chat_template_jinja) {
            (Some(Json::String(t)), _) => meta.set("tokenizer.chat_template", Value::Str(t.clone())),
            (None, Some(t)) => meta.set("tokenizer.chat_template", Value::Str(t.to_string())),
            _ => {}
        }
        for (i, (typ, _)) in KINDS.iter().enumerate() {
            if let Some(add) = tc.get(format!("add_{typ}_token")).and_then(Json::as_bool) {
                sp[i].add.get_or_insert(add);
            }
            if let Some(id) = content_of(tc.get(format!("{typ}_token"))).and_then(added_id) {
                set_id(&mut sp[i], id, TOKENIZER_CONFIG, &format!("{typ}_token"))?;
            }
        }
    }
    for (i, (typ, key)) in KINDS.iter().enumerate() {
        let field = format!("{typ}_token_id");
        // An integer must be a token id (gguf-py raises on a negative one,
        // and one past u32 cannot be written); a list (several eos ids) or
        // anything else SpecialVocab ignores.
        if let Some(v) = s.config.get(&field).filter(|v| v.is_i64() || v.is_u64()) {
            match v.as_i64() {
                Some(id) if (0..=u32::MAX as i64).contains(&id) => set_id(&mut sp[i], id, CONFIG, &field)?,
                _ => return Err(format_err(CONFIG, &field, format!("{v} is not a token id"))),
            }
        }
        if let Some(id) = sp[i].id {
            meta.set(*key, Value::U32(id));
        }
        // gguf-py has add_*_token keys for these three only.
        if let (Some(add), true) = (sp[i].add, matches!(*typ, "bos" | "eos" | "sep")) {
            meta.set(format!("tokenizer.ggml.add_{typ}_token"), Value::Bool(add));
        }
    }
    Ok(())
}
