//! The `general.*` keys convert_hf_to_gguf.py writes besides the
//! architecture: the type, and the name, basename, finetune, version and
//! size label its metadata heuristics derive from config.json's
//! `_name_or_path` (a model id) or the directory's name (gguf-py's
//! `Metadata.get_model_id_components`, `id_to_title`), and from the
//! parameter count (`size_label`). A README model card's keys (license,
//! tags, languages, base models) are not written yet.

use regex::Regex;

use crate::hparams::Hparams;
use crate::meta::{Metadata, Value};

/// `general.type` and the name keys, from the model ids in order (the
/// first to give a field wins: `_name_or_path`, then the directory's name,
/// as Metadata.apply_metadata_heuristic fills them).
pub(crate) fn write_head(meta: &mut Metadata, ids: &[&str], total_params: u64) {
    meta.set("general.type", Value::Str("model".into()));
    let mut name = None;
    let mut fields: [Option<String>; 4] = Default::default();
    for c in ids.iter().filter_map(|id| components(id, total_params)) {
        name.get_or_insert_with(|| id_to_title(&c.full_name));
        for (slot, v) in fields.iter_mut().zip([c.basename, c.finetune, c.version, c.size_label]) {
            if slot.is_none() {
                *slot = v;
            }
        }
    }
    if let Some(n) = name {
        meta.set("general.name", Value::Str(n));
    }
    for (key, v) in ["general.basename", "general.finetune", "general.version", "general.size_label"].into_iter().zip(fields) {
        if let Some(v) = v {
            meta.set(key, Value::Str(v));
        }
    }
}

/// convert's size label from the parameter count when the name gave none.
pub(crate) fn write_size_label(meta: &mut Metadata, hp: &Hparams, mapped: &Metadata) {
    if meta.get("general.size_label").is_some() {
        return;
    }
    let (total, shared, expert) = params(mapped, hp);
    if total == 0 {
        return;
    }
    let label = if hp.n_expert > 0 { format!("{}x{}", hp.n_expert, rounded(shared + expert)) } else { rounded(total) };
    meta.set("general.size_label", Value::Str(label));
}

/// (total, shared, per-expert) parameters of the tensors convert writes
/// (GGUFWriter.get_total_parameter_count).
pub(crate) fn params(meta: &Metadata, hp: &Hparams) -> (u64, u64, u64) {
    let (mut total, mut shared, mut expert) = (0u64, 0u64, 0u64);
    for t in &meta.tensors {
        // Saturating: the caller's shapes are the files' (bounded by their
        // bytes), but this crate takes any list.
        let size = t.shape.iter().fold(1u64, |a, &d| a.saturating_mul(d));
        if t.name.contains("_exps.") && t.shape.len() >= 3 {
            expert = expert.saturating_add(size / hp.n_expert.max(1) as u64);
        } else {
            shared = shared.saturating_add(size);
        }
        total = total.saturating_add(size);
    }
    (total, shared, expert)
}

/// gguf-py's model_weight_count_rounded_notation (min_digits 2).
fn rounded(n: u64) -> String {
    let x = n as f64;
    let (scaled, suffix) = if x > 1e12 {
        (x * 1e-12, "T")
    } else if x > 1e9 {
        (x * 1e-9, "B")
    } else if x > 1e6 {
        (x * 1e-6, "M")
    } else {
        (x * 1e-3, "K")
    };
    // Python's round() is half to even; its str() of the integer, zeros stripped on the left.
    let r = scaled.round_ties_even() as u64;
    let digits = r.to_string().trim_start_matches('0').len();
    let fix = 2usize.saturating_sub(digits);
    format!("{scaled:.fix$}{suffix}")
}

/// Metadata.id_to_title: words title-cased unless acronyms or versions.
fn id_to_title(s: &str) -> String {
    let version = Regex::new(r"^(v\d+(?:\.\d+)*|\d.*)$").expect("a valid regex");
    s.trim()
        .replace('-', " ")
        .split_whitespace()
        .map(|w| if is_lower(w) && !version.is_match(w) { title(w) } else { w.to_string() })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Python's str.islower: some cased character, none upper case.
fn is_lower(w: &str) -> bool {
    w.chars().any(char::is_lowercase) && !w.chars().any(char::is_uppercase)
}

/// Python's str.title: each run of letters capitalized at its start.
fn title(w: &str) -> String {
    let mut out = String::with_capacity(w.len());
    let mut prev_cased = false;
    for c in w.chars() {
        if prev_cased {
            out.extend(c.to_lowercase());
        } else {
            out.extend(c.to_uppercase());
        }
        prev_cased = c.is_alphabetic();
    }
    out
}

struct Components {
    full_name: String,
    basename: Option<String>,
    finetune: Option<String>,
    version: Option<String>,
    size_label: Option<String>,
}

const VERSION: usize = 1;
const TYPE: usize = 2;
const SIZE: usize = 4;
const FINETUNE: usize = 8;
const BASENAME: usize = 16;

/// Metadata.get_model_id_components for a model id without spaces.
fn components(model_id: &str, total_params: u64) -> Option<Components> {
    if model_id.is_empty() {
        return None;
    }
    if model_id.contains(' ') {
        return Some(Components { full_name: model_id.into(), basename: None, finetune: None, version: None, size_label: None });
    }
    let full = model_id.split_once('/').map_or(model_id, |(_, n)| n).to_string();
    let re = |p: &str| Regex::new(&format!("(?i)^(?:{p})$")).expect("a valid regex");
    let (ver, ty, size, ft) = (
        re(r"(v|iter)?\d+([.]\d+)*"),
        re(r"i?q\d(_\w)*|b?fp?(16|32)"),
        re(r"(([A]|\d+[x])?\d+([._]\d+)?[KMBT][\d]?|small|mini|medium|large|x?xl)"),
        re(r"chat|instruct|vision|lora"),
    );
    let mut parts: Vec<String> = full.split('-').filter(|p| !p.is_empty()).map(str::to_string).collect();
    let mut types = vec![0usize; parts.len()];
    for i in 0..parts.len() {
        let part = parts[i].clone();
        if ver.is_match(&part) {
            types[i] |= VERSION;
        } else if ty.is_match(&part) {
            types[i] |= TYPE;
            parts[i] = part.to_uppercase();
        } else if i > 0 && size.is_match(&part) {
            let mut p: Vec<char> = part.replace('_', ".").chars().collect();
            if p.last().is_some_and(|c| c.is_ascii_digit()) && p.len() >= 2 {
                // bloom-7b1 notation: 7b1 -> 7.1b
                let n = p.len();
                let (a, b) = (p[n - 2], p[n - 1]);
                p.truncate(n - 2);
                p.extend(['.', b, a]);
            }
            let n = p.len();
            if n > 1 && p[n - 2].is_ascii_digit() && "kmbt".contains(p[n - 1]) {
                p[n - 1] = p[n - 1].to_ascii_uppercase();
            }
            let mut s: String = p.iter().collect();
            if total_params != 0 {
                let (num, unit) = s.split_at(s.len() - 1);
                if let (Ok(x), Some(k)) = (num.parse::<f64>(), " KMBT".find(unit)) {
                    let label = x * 1000f64.powi(k as i32);
                    let t = total_params as f64;
                    if (label - t).abs() > (7 * total_params / 8) as f64 {
                        types[i] |= FINETUNE; // likely a context length
                        s = format!("{}{}", num, unit.to_lowercase());
                    }
                }
            }
            if types[i] == 0 {
                types[i] |= SIZE;
            }
            parts[i] = s;
        } else if i > 0 && ft.is_match(&part) {
            types[i] |= FINETUNE;
        }
    }
    // Word-based size labels drop out when a number-based one is present.
    if parts.iter().zip(&types).any(|(n, t)| t & SIZE != 0 && n.chars().any(|c| c.is_ascii_digit())) {
        for (n, t) in parts.iter().zip(types.iter_mut()) {
            if *t & SIZE != 0 && n.chars().all(char::is_alphabetic) {
                *t &= !SIZE;
            }
        }
    }
    let mut at_start = true;
    for (p, t) in parts.iter().zip(types.iter_mut()) {
        if at_start && ((*t == 0 && p.chars().next().is_some_and(char::is_alphabetic)) || *t & VERSION != 0) {
            *t |= BASENAME;
        } else {
            at_start = false;
            if *t == 0 {
                *t |= FINETUNE;
            }
        }
    }
    for t in types.iter_mut().rev() {
        if *t & BASENAME != 0 && t.count_ones() > 1 {
            *t &= !BASENAME;
        } else {
            break;
        }
    }
    let join = |want: usize, not: usize| {
        let mut seen: Vec<&str> = vec![];
        for (p, t) in parts.iter().zip(&types) {
            if t & want != 0 && t & not == 0 && !(want == SIZE && seen.contains(&p.as_str())) {
                seen.push(p);
            }
        }
        (!seen.is_empty()).then(|| seen.join("-"))
    };
    let (mut basename, finetune, version, size_label) = (join(BASENAME, 0), join(FINETUNE, 0), join(VERSION, BASENAME), join(SIZE, 0));
    if size_label.is_none() && finetune.is_none() && version.is_none() {
        basename = None; // too ambiguous
    }
    Some(Components { full_name: full, basename, finetune, version, size_label })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_as_gguf_py_derives_them() {
        assert_eq!(id_to_title("llama-bf16"), "Llama Bf16");
        assert_eq!(id_to_title("Qwen3-30B-A3B"), "Qwen3 30B A3B");
        let c = components("meta-llama/Llama-3.1-8B-Instruct", 8_030_000_000).unwrap();
        assert_eq!(c.full_name, "Llama-3.1-8B-Instruct");
        assert_eq!(
            (c.basename.as_deref(), c.size_label.as_deref(), c.finetune.as_deref()),
            (Some("Llama-3.1"), Some("8B"), Some("Instruct"))
        );
        let c = components("llama-bf16", 394_000).unwrap();
        assert_eq!((c.basename, c.size_label, c.finetune, c.version), (None, None, None, None));
        assert_eq!(rounded(394_112), "394K");
        assert_eq!(rounded(248_000), "248K");
        assert_eq!(rounded(8_030_261_248), "8.0B");
        assert_eq!(rounded(1_500_000), "1.5M");
    }
}
