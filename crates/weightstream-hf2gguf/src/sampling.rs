//! generation_config.json's sampling defaults as gguf-py's `Metadata.load`
//! writes them (`general.sampling.*`): Llama 3.1 Instruct's temperature
//! 0.6 and top_p 0.9, Qwen3's top_k 20, read by llama.cpp as the model's
//! default sampler settings.
//!
//! gguf-py's rules, kept: a file that is not there, or not JSON, adds
//! nothing (`load_generation_config` swallows the decode error); a JSON
//! value that is falsy (`{}`, `[]`, `0`, `""`, `null`) adds nothing; a key
//! that is absent or `null` adds nothing. What convert crashes on is
//! refused by name: a truthy non-object, bytes that are not UTF-8, an
//! integer key holding a float or out of i32, a float key holding a string
//! or a number f32 cannot hold, a `sequence` that is not a string.

use serde_json::Value as Json;

use crate::error::{format_err, Result};
use crate::meta::{Metadata, Value};

pub(crate) const GENERATION_CONFIG: &str = "generation_config.json";

/// How gguf-py packs a key's value: `add_int32`, `add_float32`, `add_string`.
#[derive(Clone, Copy)]
enum Pack {
    I32,
    F32,
    Str,
}

/// (GGUF key, generation_config.json keys tried in order, packing), in
/// gguf-py's order. `penalty_repeat` falls back to transformers'
/// `repetition_penalty` only where the key is absent (a null stops it).
const KEYS: [(&str, &[&str], Pack); 12] = [
    ("general.sampling.sequence", &["sequence"], Pack::Str),
    ("general.sampling.top_k", &["top_k"], Pack::I32),
    ("general.sampling.top_p", &["top_p"], Pack::F32),
    ("general.sampling.min_p", &["min_p"], Pack::F32),
    ("general.sampling.xtc_probability", &["xtc_probability"], Pack::F32),
    ("general.sampling.xtc_threshold", &["xtc_threshold"], Pack::F32),
    ("general.sampling.temp", &["temperature"], Pack::F32),
    ("general.sampling.penalty_last_n", &["penalty_last_n"], Pack::I32),
    ("general.sampling.penalty_repeat", &["penalty_repeat", "repetition_penalty"], Pack::F32),
    ("general.sampling.mirostat", &["mirostat"], Pack::I32),
    ("general.sampling.mirostat_tau", &["mirostat_tau"], Pack::F32),
    ("general.sampling.mirostat_eta", &["mirostat_eta"], Pack::F32),
];

/// Python's truth value of a JSON value.
fn truthy(v: &Json) -> bool {
    match v {
        Json::Null => false,
        Json::Bool(b) => *b,
        Json::Number(n) => n.as_f64().is_some_and(|x| x != 0.0),
        Json::String(s) => !s.is_empty(),
        Json::Array(a) => !a.is_empty(),
        Json::Object(o) => !o.is_empty(),
    }
}

/// The sampling keys of `file` (generation_config.json's bytes), into `meta`.
pub(crate) fn write(file: Option<&[u8]>, meta: &mut Metadata) -> Result<()> {
    let Some(bytes) = file else { return Ok(()) };
    // open(encoding="utf-8") raises on bad bytes, and gguf-py does not catch that.
    let text = std::str::from_utf8(bytes).map_err(|e| format_err(GENERATION_CONFIG, "(whole file)", format!("not UTF-8: {e}")))?;
    let Ok(gen) = serde_json::from_str::<Json>(text) else { return Ok(()) };
    if !truthy(&gen) {
        return Ok(());
    }
    let Json::Object(gen) = gen else {
        return Err(format_err(GENERATION_CONFIG, "(whole file)", "not a JSON object (convert fails on it)"));
    };
    for (key, names, pack) in KEYS {
        // dict.get(a, dict.get(b)): the first name present decides, null or not.
        let Some((name, v)) = names.iter().find_map(|n| gen.get(*n).map(|v| (*n, v))) else { continue };
        if v.is_null() {
            continue;
        }
        let bad = |why: &str| format_err(GENERATION_CONFIG, name, format!("{v}: {why} (convert fails on it)"));
        let value = match pack {
            Pack::Str => Value::Str(v.as_str().ok_or_else(|| bad("not a string"))?.to_owned()),
            Pack::I32 => Value::I32(match v {
                Json::Bool(b) => i32::from(*b),
                _ => v.as_i64().and_then(|x| i32::try_from(x).ok()).ok_or_else(|| bad("not an integer in i32's range"))?,
            }),
            Pack::F32 => {
                let x = match v {
                    Json::Bool(b) => f64::from(u8::from(*b)),
                    _ => v.as_f64().ok_or_else(|| bad("not a number"))?,
                };
                // struct.pack("<f") rounds to nearest and refuses what overflows.
                let f = x as f32;
                if f.is_infinite() && x.is_finite() {
                    return Err(bad("beyond f32's range"));
                }
                Value::F32(f)
            }
        };
        meta.set(key, value);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(json: &str) -> Result<Vec<(String, Value)>> {
        let mut m = Metadata::default();
        write(Some(json.as_bytes()), &mut m)?;
        Ok(m.kv)
    }

    #[test]
    fn as_gguf_py_writes_them() {
        let kv = keys(r#"{"temperature": 0.6, "top_p": 0.9, "top_k": 20, "repetition_penalty": 1.05, "do_sample": true}"#).unwrap();
        assert_eq!(
            kv,
            vec![
                ("general.sampling.top_k".into(), Value::I32(20)),
                ("general.sampling.top_p".into(), Value::F32(0.9)),
                ("general.sampling.temp".into(), Value::F32(0.6)),
                ("general.sampling.penalty_repeat".into(), Value::F32(1.05)),
            ]
        );
        // A null penalty_repeat stops the fallback; booleans pack as 0 and 1.
        let kv = keys(r#"{"penalty_repeat": null, "repetition_penalty": 1.1, "mirostat": true, "temperature": 1}"#).unwrap();
        assert_eq!(kv, vec![("general.sampling.temp".into(), Value::F32(1.0)), ("general.sampling.mirostat".into(), Value::I32(1))]);
    }

    #[test]
    fn what_gguf_py_ignores_adds_nothing() {
        for json in ["{", "{}", "[]", "0", "\"\"", "null", r#"{"top_k": null, "eos_token_id": 2}"#] {
            assert_eq!(keys(json).unwrap(), vec![], "{json}");
        }
        let mut m = Metadata::default();
        write(None, &mut m).unwrap();
        assert!(m.kv.is_empty());
    }

    #[test]
    fn what_convert_crashes_on_is_refused_by_name() {
        for (json, field) in [
            ("[1]", "(whole file)"),
            ("3", "(whole file)"),
            (r#"{"top_k": 1.5}"#, "top_k"),
            (r#"{"top_k": 2147483648}"#, "top_k"),
            (r#"{"temperature": "hot"}"#, "temperature"),
            (r#"{"top_p": 1e39}"#, "top_p"),
            (r#"{"sequence": 5}"#, "sequence"),
        ] {
            let e = keys(json).unwrap_err();
            assert_eq!((e.file.as_str(), e.field.as_str()), (GENERATION_CONFIG, field), "{json}: {e}");
        }
        let mut m = Metadata::default();
        let e = write(Some(b"{\"top_k\": 1, \xff}"), &mut m).unwrap_err();
        assert_eq!(e.field, "(whole file)");
    }
}
