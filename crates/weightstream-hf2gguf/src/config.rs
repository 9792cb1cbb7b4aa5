//! config.json read the way convert_hf_to_gguf.py reads it (`find_hparam`:
//! the first of several names that is present and not null), every value
//! range-checked where it is read.

use serde_json::{Map, Value as Json};

use crate::error::{format_err, json_err, Result};

pub(crate) const CONFIG: &str = "config.json";

pub(crate) struct Config {
    root: Map<String, Json>,
}

/// The first of `keys` that `obj` holds, not null: (its name, its value).
pub(crate) fn find<'a>(obj: Option<&'a Json>, keys: &[&'static str]) -> Option<(&'static str, &'a Json)> {
    let obj = obj?.as_object()?;
    keys.iter().find_map(|k| obj.get(*k).filter(|v| !v.is_null()).map(|v| (*k, v)))
}

impl Config {
    pub(crate) fn parse(bytes: &[u8]) -> Result<Config> {
        match serde_json::from_slice::<Json>(bytes).map_err(|e| json_err(CONFIG, e))? {
            Json::Object(root) => Ok(Config { root }),
            _ => Err(format_err(CONFIG, "(whole file)", "not a JSON object")),
        }
    }

    pub(crate) fn get(&self, key: &str) -> Option<&Json> {
        self.root.get(key).filter(|v| !v.is_null())
    }

    pub(crate) fn find(&self, keys: &[&'static str]) -> Option<(&'static str, &Json)> {
        keys.iter().find_map(|k| self.get(k).map(|v| (*k, v)))
    }

    /// The first of `keys` as an integer in `range` (None: absent).
    pub(crate) fn int_in(&self, keys: &[&'static str], range: std::ops::RangeInclusive<u64>) -> Result<Option<u32>> {
        let Some((key, v)) = self.find(keys) else { return Ok(None) };
        int_value(CONFIG, key, v, range).map(Some)
    }

    /// As [`Config::int_in`], refusing an absent value.
    pub(crate) fn required(&self, keys: &[&'static str], range: std::ops::RangeInclusive<u64>) -> Result<u32> {
        self.int_in(keys, range)?.ok_or_else(|| format_err(CONFIG, keys[0], "missing (llama.cpp needs it)"))
    }

    /// Set `key` to `value` where config.json does not name it at all (a
    /// null stays null: transformers keeps it so).
    pub(crate) fn set_default(&mut self, key: &str, value: Json) {
        self.root.entry(key).or_insert(value);
    }

    pub(crate) fn str_of(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Json::as_str)
    }
}

/// `v` as an integer in `range` (which stays within u32), else a typed
/// refusal naming `file` and `key`.
pub(crate) fn int_value(file: &str, key: &str, v: &Json, range: std::ops::RangeInclusive<u64>) -> Result<u32> {
    match v.as_u64() {
        Some(n) if range.contains(&n) => Ok(n as u32),
        _ => Err(format_err(file, key, format!("{v} is not an integer in {}..={}", range.start(), range.end()))),
    }
}

/// `v` as a number, rounded to f32 (gguf-py packs a Python float as
/// float32: round to nearest); a finite value that overflows f32 is refused.
pub(crate) fn f32_value(file: &str, key: &str, v: &Json) -> Result<f32> {
    let x = v.as_f64().ok_or_else(|| format_err(file, key, format!("{v} is not a number")))?;
    let f = x as f32;
    if !f.is_finite() {
        return Err(format_err(file, key, format!("{v} does not fit a 32-bit float")));
    }
    Ok(f)
}
