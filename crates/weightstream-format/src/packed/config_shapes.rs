//! A 4-bit float weight's shape against config.json's dimensions.
//!
//! NVFP4 and MXFP4 checkpoints have been seen in the field stored
//! transposed, `[in / 2, out]` bytes, with scales laid along the stored
//! rows. Every such file's weight and scales agree with each other (the
//! pairing in `super::resolve` checks that), so only the model's own
//! dimensions can tell: a language-model projection whose BF16 shape is
//! not the `[out, in]` its config makes it would load as plausible,
//! wrong BF16 (transformers and vLLM read `[out, in]`). Refused naming
//! the weight, its scales and the config fields.
//!
//! Checked only where the config states the dimensions and the layout is
//! the standard one (Llama-family names under the language model's
//! `layers.`; no multi-head latent attention, whose projections have
//! other shapes; experts only with `moe_intermediate_size`), so a model
//! of another shape is never refused for it.

use std::path::Path;

use serde_json::Value as Json;

use crate::catalog::{PackedScheme, TensorInfo};
use crate::error::{ErrorKind, FormatError, Result};

/// The language model's layers, by the prefixes transformers gives them
/// (a vision or audio tower has dimensions of its own).
const LAYER_PREFIXES: [&str; 3] = ["model.layers.", "model.language_model.layers.", "language_model.model.layers."];

/// config.json's dimensions, from `text_config` where a multimodal model
/// nests them.
struct Dims<'c> {
    config: &'c Json,
}

impl Dims<'_> {
    fn get(&self, key: &str) -> Option<u64> {
        self.config.get(key).and_then(Json::as_u64).filter(|&v| v > 0)
    }

    /// `[out, in]` of the projection `module` ends with, and the fields
    /// that say so; None where the config does not state them.
    fn expected(&self, module: &str) -> Option<([u64; 2], String)> {
        let hidden = self.get("hidden_size")?;
        let (_, rest) = module.split_once(".self_attn.").or_else(|| module.split_once(".mlp."))?;
        let attention = module.contains(".self_attn.");
        if attention {
            // Multi-head latent attention (DeepSeek): other shapes.
            if ["kv_lora_rank", "q_lora_rank", "v_head_dim"].iter().any(|k| self.config.get(*k).is_some_and(|v| !v.is_null())) {
                return None;
            }
            let heads = self.get("num_attention_heads")?;
            let kv = self.get("num_key_value_heads").unwrap_or(heads);
            let head_dim = self.get("head_dim").unwrap_or(hidden / heads);
            let fields = format!("hidden_size {hidden}, num_attention_heads {heads}, num_key_value_heads {kv}, head_dim {head_dim}");
            let shape = match rest {
                "q_proj" => [heads * head_dim, hidden],
                "k_proj" | "v_proj" => [kv * head_dim, hidden],
                "o_proj" => [hidden, heads * head_dim],
                _ => return None,
            };
            return Some((shape, fields));
        }
        let (key, proj) = match rest.rsplit_once('.') {
            // mlp.experts.N.gate_proj: a routed expert.
            Some((experts, proj)) if experts.starts_with("experts.") && experts[8..].bytes().all(|b| b.is_ascii_digit()) => {
                ("moe_intermediate_size", proj)
            }
            Some(_) => return None,
            None => ("intermediate_size", rest),
        };
        let inter = self.get(key)?;
        let fields = format!("hidden_size {hidden}, {key} {inter}");
        let shape = match proj {
            "gate_proj" | "up_proj" => [inter, hidden],
            "down_proj" => [hidden, inter],
            _ => return None,
        };
        Some((shape, fields))
    }
}

/// Refuse a 4-bit float weight (NVFP4, MXFP4 compressed-tensors) whose BF16
/// shape is not the one `config` gives its projection (after
/// `super::pair_packed`).
pub fn check_against_config<'p>(
    config: Option<&Json>,
    config_path: &Path,
    tensors: &[TensorInfo],
    file_path: impl Fn(usize) -> &'p Path,
) -> Result<()> {
    let Some(config) = config else { return Ok(()) };
    let config = match config.get("text_config") {
        Some(t) if t.get("hidden_size").is_some() => t,
        _ => config,
    };
    let dims = Dims { config };
    for t in tensors {
        let (Some(p), Some(s)) = (t.packed.as_deref(), t.scale.as_ref()) else { continue };
        if !matches!(p.scheme, PackedScheme::Nvfp4Modelopt | PackedScheme::Nvfp4CompressedTensors | PackedScheme::Mxfp4CompressedTensors) {
            continue;
        }
        let Some(module) = p.name.strip_suffix(".weight") else { continue };
        if !LAYER_PREFIXES.iter().any(|pre| module.starts_with(pre)) {
            continue;
        }
        let Some((want, fields)) = dims.expected(module) else { continue };
        if p.shape != want {
            let scale = &tensors[s.tensor];
            let reason = format!(
                "{} '{}' is stored as {:?} (BF16 {:?}) with group scales '{}' {:?}, but {fields} make it [{}, {}] (out, in): \
                 a transposed or misshapen weight, which would load as wrong values",
                p.scheme.name(),
                t.name,
                t.shape,
                p.shape,
                scale.name,
                scale.shape,
                want[0],
                want[1]
            );
            return Err(FormatError::at(
                file_path(t.file),
                t.offset,
                ErrorKind::ConfigMismatch { config: config_path.display().to_string(), weight: t.name.clone(), reason },
            )
            .with_tensor(&t.name));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dims(c: &Json) -> Dims<'_> {
        Dims { config: c }
    }

    #[test]
    fn llama_projections_and_experts() {
        let c = json!({"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "moe_intermediate_size": 32});
        let d = dims(&c);
        let e = |m: &str| d.expected(m).map(|(s, _)| s);
        assert_eq!(e("model.layers.0.self_attn.q_proj"), Some([64, 64]));
        assert_eq!(e("model.layers.0.self_attn.k_proj"), Some([32, 64]));
        assert_eq!(e("model.layers.0.self_attn.o_proj"), Some([64, 64]));
        assert_eq!(e("model.layers.3.mlp.down_proj"), Some([64, 128]));
        assert_eq!(e("model.layers.3.mlp.experts.7.up_proj"), Some([32, 64]));
        assert_eq!(e("model.layers.3.mlp.shared_expert.up_proj"), None);
        assert_eq!(e("model.layers.3.mlp.gate"), None);
    }

    #[test]
    fn latent_attention_and_missing_fields_are_not_checked() {
        let c = json!({"hidden_size": 64, "num_attention_heads": 4, "kv_lora_rank": 16, "intermediate_size": 128});
        assert!(dims(&c).expected("model.layers.0.self_attn.o_proj").is_none());
        assert_eq!(dims(&c).expected("model.layers.0.mlp.up_proj").map(|(s, _)| s), Some([128, 64]));
        let c = json!({"hidden_size": 64});
        assert!(dims(&c).expected("model.layers.0.mlp.up_proj").is_none());
        assert!(dims(&c).expected("model.layers.0.mlp.experts.1.up_proj").is_none());
    }
}
