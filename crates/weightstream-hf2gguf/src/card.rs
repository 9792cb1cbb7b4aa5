//! The model card's `general.*` keys: gguf-py's `Metadata.
//! apply_metadata_heuristic` over README.md's front matter (model_card.rs)
//! and `set_gguf_meta_model`, which writes them: the name fields (which
//! the card sets before config.json's `_name_or_path` and the directory's
//! name may), license, tags, languages, and the base models and datasets
//! with the names, organizations, versions and URLs it derives from their
//! ids. A value gguf-py would hand its string writer that is not a string
//! (a number, a date, a list) makes convert fail: refused, named.

use regex::Regex;

use crate::error::{unsupported, Result};
use crate::meta::{Metadata, Value};
use crate::model_card::{Node, README};
use crate::model_id::{components, id_to_title};

/// The card's name fields, by gguf-py's Metadata attribute, with the card
/// keys that set them, first found first.
pub(crate) const NAME_FIELDS: [(&str, &[&str]); 12] = [
    ("name", &["name", "model_name"]),
    ("author", &["author", "model_author", "model_creator"]),
    ("version", &["version", "model_version"]),
    ("organization", &["organization", "model_organization"]),
    ("description", &["description", "model_description"]),
    ("finetune", &["finetune", "model_finetune"]),
    ("basename", &["basename", "model_basename", "model_type"]),
    ("size_label", &["size_label", "model_size_label"]),
    ("source.url", &["url", "model_url"]),
    ("source.doi", &["doi", "model_doi"]),
    ("source.uuid", &["uuid", "model_uuid"]),
    ("source.repo_url", &["repo_url", "model_repo_url"]),
];
/// A base model's or dataset's fields, as set_gguf_meta_model writes them.
const ENTRY_FIELDS: [&str; 9] = ["name", "author", "version", "organization", "description", "url", "doi", "uuid", "repo_url"];

/// What the card says; a field `Some("")` is set (no heuristic replaces
/// it) but writes nothing (gguf-py skips an empty string).
#[derive(Default)]
pub(crate) struct Card {
    /// By NAME_FIELDS' order.
    pub(crate) names: [Option<String>; 12],
    license: [Option<String>; 3],
    base_models: Option<Vec<Vec<(&'static str, String)>>>,
    datasets: Option<Vec<Vec<(&'static str, String)>>>,
    tags: Option<Vec<String>>,
    languages: Option<Vec<String>>,
}

/// A value gguf-py passes to add_string: None for null; a falsy value is
/// skipped there ("" here); a truthy non-string fails in convert.
fn text(v: &Node, field: &str) -> Result<Option<String>> {
    match v {
        Node::Null => Ok(None),
        Node::Str(s) => Ok(Some(s.clone())),
        v if !v.truthy() => Ok(Some(String::new())),
        _ => Err(unsupported(README, field, "not a string (convert_hf_to_gguf.py cannot write it)")),
    }
}

/// use_array_model_card_metadata over `keys`: strings appended, lists extended.
fn array(card: &Node, keys: [&str; 2]) -> Result<Option<Vec<String>>> {
    let mut out: Option<Vec<String>> = None;
    for key in keys {
        let items = match card.get(key) {
            None | Some(Node::Null) => continue,
            Some(Node::List(l)) => l.iter().collect(),
            Some(s @ Node::Str(_)) => vec![s],
            Some(_) => vec![],
        };
        let list = out.get_or_insert_with(Vec::new);
        for (i, item) in items.into_iter().enumerate() {
            match item {
                Node::Str(s) => list.push(s.clone()),
                _ => return Err(unsupported(README, &format!("{key}[{i}]"), "not a string (convert writes a typed array or fails)")),
            }
        }
    }
    Ok(out)
}

/// A base model or dataset given by id or URL: what gguf-py derives from it.
fn entry_of(id: &str, total_params: u64) -> Vec<(&'static str, String)> {
    let mut e = vec![];
    let from_id = |hf_id: &str, e: &mut Vec<(&'static str, String)>, with_url: bool| {
        let Some(c) = components(hf_id, total_params) else { return };
        e.push(("name", id_to_title(&c.full_name)));
        if let Some(org) = &c.org {
            e.push(("organization", id_to_title(org)));
        }
        if let Some(v) = &c.version {
            e.push(("version", v.clone()));
        }
        if let (true, Some(org)) = (with_url, &c.org) {
            e.push(("repo_url", format!("https://huggingface.co/{org}/{}", c.full_name)));
        }
    };
    if ["http://", "https://", "ssh://"].iter().any(|p| id.starts_with(p)) {
        e.push(("repo_url", id.to_string()));
        // gguf-py's pattern, its unescaped dot and `$` (which also matches before a final newline) kept.
        static HF_URL: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
        let re = HF_URL.get_or_init(|| Regex::new(r"^https?://huggingface.co/([^/]+/[^/]+)\n?\z").expect("a valid regex"));
        if let Some(m) = id.contains("huggingface.co").then(|| re.captures(id)).flatten() {
            from_id(&m[1], &mut e, false);
        }
    } else {
        from_id(id, &mut e, true);
    }
    e
}

/// The base models (or datasets) under the first of `keys` the card has.
fn entries(card: &Node, keys: [&str; 3], total_params: u64) -> Result<Option<Vec<Vec<(&'static str, String)>>>> {
    let Some((key, value)) = keys.iter().find_map(|k| card.get(k).map(|v| (*k, v))) else { return Ok(None) };
    let items: Vec<&Node> = match value {
        Node::Str(_) => vec![value],
        Node::List(l) => l.iter().collect(),
        _ => vec![],
    };
    let mut out = vec![];
    for (i, item) in items.into_iter().enumerate() {
        out.push(match item {
            Node::Str(id) => entry_of(id, total_params),
            // An entry given as a mapping is written as it is.
            Node::Map(_) => {
                let mut e = vec![];
                for f in ENTRY_FIELDS {
                    if let Some(v) = item.get(f) {
                        if let Some(s) = text(v, &format!("{key}[{i}].{f}"))? {
                            e.push((f, s));
                        }
                    }
                }
                e
            }
            _ => vec![], // gguf-py logs an error and counts an empty entry
        });
    }
    Ok(Some(out))
}

impl Card {
    /// The card of front matter `fm` (None: no README or no front matter).
    pub(crate) fn parse(fm: Option<&Node>, total_params: u64) -> Result<Card> {
        let mut card = Card::default();
        let Some(fm) = fm else { return Ok(card) };
        for (slot, (_, keys)) in card.names.iter_mut().zip(NAME_FIELDS) {
            for k in keys {
                if slot.is_none() {
                    *slot = fm.get(k).map(|v| text(v, k)).transpose()?.flatten();
                }
            }
        }
        for (slot, k) in card.license.iter_mut().zip(["license", "license_name", "license_link"]) {
            *slot = match fm.get(k) {
                // A list of licenses is written joined by commas.
                Some(Node::List(l)) => Some(
                    l.iter()
                        .enumerate()
                        .map(|(i, x)| match x {
                            Node::Str(s) => Ok(s.as_str()),
                            _ => Err(unsupported(README, &format!("{k}[{i}]"), "not a string (convert cannot join it)")),
                        })
                        .collect::<Result<Vec<_>>>()?
                        .join(","),
                ),
                Some(v) => text(v, k)?,
                None => None,
            };
        }
        card.base_models = entries(fm, ["base_model", "base_models", "base_model_sources"], total_params)?;
        card.datasets = entries(fm, ["datasets", "dataset", "dataset_sources"], total_params)?;
        card.tags = array(fm, ["tags", "pipeline_tag"])?;
        card.languages = array(fm, ["languages", "language"])?;
        Ok(card)
    }

    /// The keys besides the name fields (general.rs writes those).
    pub(crate) fn write(&self, meta: &mut Metadata) {
        let mut s = |k: String, v: &Option<String>| {
            if let Some(v) = v.as_ref().filter(|v| !v.is_empty()) {
                meta.set(k, Value::Str(v.clone()));
            }
        };
        for (k, v) in ["license", "license.name", "license.link"].iter().zip(&self.license) {
            s(format!("general.{k}"), v);
        }
        for (kind, list) in [("base_model", &self.base_models), ("dataset", &self.datasets)] {
            let Some(list) = list else { continue };
            meta.set(format!("general.{kind}.count"), Value::U32(list.len() as u32));
            for (i, e) in list.iter().enumerate() {
                for f in ENTRY_FIELDS {
                    let v = e.iter().rev().find(|(k, _)| *k == f).map(|(_, v)| v.clone());
                    if let Some(v) = v.filter(|v| !v.is_empty()) {
                        meta.set(format!("general.{kind}.{i}.{f}"), Value::Str(v));
                    }
                }
            }
        }
        for (k, v) in [("general.tags", &self.tags), ("general.languages", &self.languages)] {
            if let Some(v) = v.as_ref().filter(|v| !v.is_empty()) {
                meta.set(k, Value::StrArray(v.clone()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model_card::front_matter;

    fn card(readme: &str) -> Result<Card> {
        Card::parse(front_matter(readme.as_bytes())?.as_ref(), 1000)
    }

    /// gguf-py's Metadata.load of the same card (vendored gguf-py, run once).
    #[test]
    fn keys_as_gguf_py_derives_them() {
        let c = card(concat!(
            "---\nlicense: [mit, apache-2.0]\nlanguage:\n- en\n- no\n- 'on'\npipeline_tag: text-generation\ntags: nlp\n",
            "model_creator: Someone\nmodel_type: llama\ndescription: \"\"\nbase_model:\n- meta-llama/Llama-3.1-8B\n",
            "- https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct\n- https://example.com/models/x\n- name: Custom\n  version: null\n",
            "- 42\ndatasets: HuggingFaceFW/fineweb-edu-v1.2\n---\n# x\n"
        ))
        .unwrap();
        assert_eq!((c.names[0].as_deref(), c.names[1].as_deref(), c.names[4].as_deref()), (None, Some("Someone"), Some("")));
        assert_eq!(c.names[6].as_deref(), Some("llama"));
        let mut m = Metadata::default();
        c.write(&mut m);
        // (kind, index, fields) of each entry gguf-py derives.
        let entries: [(&str, u32, &[(&str, &str)]); 5] = [
            (
                "base_model",
                0,
                &[("name", "Llama 3.1 8B"), ("organization", "Meta Llama"), ("repo_url", "https://huggingface.co/meta-llama/Llama-3.1-8B")],
            ),
            (
                "base_model",
                1,
                &[
                    ("name", "Qwen2.5 0.5B Instruct"),
                    ("organization", "Qwen"),
                    ("repo_url", "https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct"),
                ],
            ),
            ("base_model", 2, &[("repo_url", "https://example.com/models/x")]),
            ("base_model", 3, &[("name", "Custom")]),
            (
                "dataset",
                0,
                &[
                    ("name", "Fineweb Edu v1.2"),
                    ("organization", "HuggingFaceFW"),
                    ("version", "v1.2"),
                    ("repo_url", "https://huggingface.co/HuggingFaceFW/fineweb-edu-v1.2"),
                ],
            ),
        ];
        let mut want: Vec<(String, Value)> = entries
            .iter()
            .flat_map(|(kind, i, fields)| fields.iter().map(move |(f, v)| (format!("general.{kind}.{i}.{f}"), Value::Str(v.to_string()))))
            .collect();
        want.extend([
            ("general.license".to_string(), Value::Str("mit,apache-2.0".into())),
            ("general.base_model.count".to_string(), Value::U32(5)),
            ("general.dataset.count".to_string(), Value::U32(1)),
            ("general.tags".to_string(), Value::StrArray(vec!["nlp".into(), "text-generation".into()])),
            ("general.languages".to_string(), Value::StrArray(vec!["en".into(), "no".into(), "on".into()])),
        ]);
        let mut got = m.kv.clone();
        got.sort_by(|a, b| a.0.cmp(&b.0));
        want.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(got, want);
    }

    /// What convert fails on (a non-string where gguf-py writes a string,
    /// a typed array, YAML PyYAML rejects) is refused, naming the field.
    #[test]
    fn values_convert_fails_on_are_refused() {
        for (card_text, field) in [
            ("version: 1.0", "version"),
            ("model_name: [a]", "model_name"),
            ("tags: [1, a]", "tags[0]"),
            ("language: [en, yes]", "language[1]"),
            ("license: [mit, 3]", "license[1]"),
            ("base_model: [{name: [x]}]", "base_model[0].name"),
            ("license: [mit", "(front matter)"),
            ("name: !!str x", "(front matter)"),
        ] {
            let e = card(&format!("---\n{card_text}\n---\n")).err().unwrap_or_else(|| panic!("{card_text}: accepted"));
            assert_eq!((e.file.as_str(), e.field.as_str()), (README, field), "{e}");
        }
        // A falsy non-string is skipped as gguf-py skips it; "no" and 'on' stay text.
        let c = card("---\nversion: 0\nlanguage:\n- no\n---\n").unwrap();
        assert_eq!(c.names[2].as_deref(), Some(""));
        assert_eq!(c.languages, Some(vec!["no".to_string()]));
    }
}
