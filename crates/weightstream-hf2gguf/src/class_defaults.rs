//! The values transformers' config classes give the fields config.json
//! leaves out. convert_hf_to_gguf.py reads config.json through
//! `AutoConfig.from_pretrained(...).to_dict()`, so a missing
//! `max_position_embeddings` is written as the class's default, not left
//! out. These are transformers 5's defaults (the vLLM venv's, which the
//! test converts with) for the fields convert writes for the families of
//! hparams.rs; the model's dimensions (hidden size, heads, layers, FFN
//! size) have class defaults too (a 7B model's) but are refused by name
//! when missing, as no real checkpoint omits them. Phi-3's are in phi3.rs.

use serde_json::{json, Value as Json};

use crate::config::Config;
use crate::hparams::Arch;

/// Fill `cfg`'s absent fields as `arch`'s config class does.
pub(crate) fn fill(cfg: &mut Config, arch: Arch) {
    let (ctx, kv, vocab) = match arch.hf {
        // LlamaConfig.__post_init__: no KV head count means as many as heads.
        "LlamaForCausalLM" => (2048, cfg.get("num_attention_heads").cloned(), 32000),
        "MistralForCausalLM" => (131072, Some(json!(8)), 32000),
        "Qwen2ForCausalLM" | "Qwen3ForCausalLM" => (32768, Some(json!(32)), 151936),
        "Qwen3MoeForCausalLM" => (32768, Some(json!(4)), 151936),
        _ => return,
    };
    let mut defaults: Vec<(&str, Json)> =
        vec![("max_position_embeddings", json!(ctx)), ("rms_norm_eps", json!(1e-6)), ("vocab_size", json!(vocab))];
    if let Some(kv) = kv {
        defaults.push(("num_key_value_heads", kv));
    }
    // convert_rope_params_to_dict: rope_parameters.rope_theta is the file's
    // rope_theta, else the class's default_theta.
    let rope = cfg.find(&["rope_parameters", "rope_scaling"]).and_then(|(_, r)| r.get("rope_theta")).is_some();
    if !rope {
        defaults.push(("rope_theta", json!(10000.0)));
    }
    if arch.hf == "Qwen3MoeForCausalLM" {
        defaults.push(("num_experts_per_tok", json!(8)));
        defaults.push(("moe_intermediate_size", json!(768)));
        // num_experts is the class's alias of num_local_experts.
        if cfg.find(&["num_local_experts", "num_experts"]).is_none() {
            defaults.push(("num_local_experts", json!(128)));
        }
    }
    for (key, value) in defaults {
        cfg.set_default(key, value);
    }
}
