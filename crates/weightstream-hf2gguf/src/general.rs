//! The `general.*` keys convert_hf_to_gguf.py writes besides the
//! architecture: the type, and the name, basename, finetune, version and
//! size label its metadata heuristics derive from config.json's
//! `_name_or_path` (a model id) or the directory's name (gguf-py's
//! `Metadata.get_model_id_components`, `id_to_title`), and from the
//! parameter count (`size_label`), after what the README model card says
//! (card.rs).

use crate::card::{Card, NAME_FIELDS};
use crate::hparams::Hparams;
use crate::meta::{Metadata, Value};
use crate::model_id::{components, id_to_title};

/// `general.type` and the name keys: the card's (card.rs), then what the
/// model ids in order give (the first to give a field wins: `_name_or_path`,
/// then the directory's name, as Metadata.apply_metadata_heuristic fills
/// them). Returns whether the size label is set (convert then computes none).
pub(crate) fn write_head(meta: &mut Metadata, card: &Card, ids: &[Option<&str>], total_params: u64) -> bool {
    meta.set("general.type", Value::Str("model".into()));
    let mut f = card.names.clone();
    let [name, version, org, finetune, basename, size] = [0, 2, 3, 5, 6, 7];
    for c in ids.iter().flatten().filter_map(|id| components(id, total_params)) {
        f[name].get_or_insert_with(|| id_to_title(&c.full_name));
        if f[org].is_none() {
            f[org] = c.org.as_deref().map(id_to_title);
        }
        for (i, v) in [(basename, c.basename), (finetune, c.finetune), (version, c.version), (size, c.size_label)] {
            if f[i].is_none() {
                f[i] = v;
            }
        }
    }
    // prepare_metadata: the directory's name itself, if nothing named the model.
    if let (None, Some(Some(dir))) = (&f[name], ids.last()) {
        f[name] = Some(dir.to_string());
    }
    let size_set = f[size].is_some();
    for ((key, _), v) in NAME_FIELDS.iter().zip(f) {
        // gguf-py's add_string skips an empty value.
        if let Some(v) = v.filter(|v| !v.is_empty()) {
            meta.set(format!("general.{key}"), Value::Str(v));
        }
    }
    size_set
}

/// convert's size label from the parameter count when the name gave none.
pub(crate) fn write_size_label(meta: &mut Metadata, hp: &Hparams, mapped: &Metadata) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model_id::components;

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
