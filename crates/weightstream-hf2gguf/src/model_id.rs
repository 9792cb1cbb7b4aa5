//! gguf-py's model id heuristics (`Metadata.get_model_id_components`,
//! `id_to_title`): a Hugging Face id or directory name split into name,
//! organization, basename, finetune, version and size label, as convert
//! names the model (general.rs) and its base models and datasets (card.rs).

use std::sync::OnceLock;

use regex::Regex;

/// Metadata.id_to_title: words title-cased unless acronyms or versions.
pub(crate) fn id_to_title(s: &str) -> String {
    static VERSION: OnceLock<Regex> = OnceLock::new();
    let version = VERSION.get_or_init(|| Regex::new(r"^(v\d+(?:\.\d+)*|\d.*)$").expect("a valid regex"));
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

pub(crate) struct Components {
    pub(crate) full_name: String,
    /// The part before the first `/`, unless it starts with a dot.
    pub(crate) org: Option<String>,
    pub(crate) basename: Option<String>,
    pub(crate) finetune: Option<String>,
    pub(crate) version: Option<String>,
    pub(crate) size_label: Option<String>,
}

const VERSION: usize = 1;
const TYPE: usize = 2;
const SIZE: usize = 4;
const FINETUNE: usize = 8;
const BASENAME: usize = 16;

/// Metadata.get_model_id_components (None only where gguf-py's would give
/// nothing at all; an empty id gives an empty name, as there).
pub(crate) fn components(model_id: &str, total_params: u64) -> Option<Components> {
    if model_id.contains(' ') {
        return Some(Components { full_name: model_id.into(), org: None, basename: None, finetune: None, version: None, size_label: None });
    }
    let (org, full) = model_id.split_once('/').map_or((None, model_id), |(o, n)| (Some(o), n));
    let org = org.filter(|o| !o.starts_with('.')).map(str::to_string);
    let full = full.to_string();
    // Compiled once: a build names several ids (the model, its base
    // models and datasets), and the hf_metadata fuzz target builds
    // thousands of checkpoints.
    static PARTS: OnceLock<[Regex; 4]> = OnceLock::new();
    let [ver, ty, size, ft] = PARTS.get_or_init(|| {
        let re = |p: &str| Regex::new(&format!("(?i)^(?:{p})$")).expect("a valid regex");
        [
            re(r"(v|iter)?\d+([.]\d+)*"),
            re(r"i?q\d(_\w)*|b?fp?(16|32)"),
            re(r"(([A]|\d+[x])?\d+([._]\d+)?[KMBT][\d]?|small|mini|medium|large|x?xl)"),
            re(r"chat|instruct|vision|lora"),
        ]
    });
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
    Some(Components { full_name: full, org, basename, finetune, version, size_label })
}
