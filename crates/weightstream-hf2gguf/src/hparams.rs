//! The architecture and its hyperparameters: convert_hf_to_gguf.py's
//! `TextModel.set_gguf_parameters` and the architectures' additions
//! (conversion/base.py, llama.py, qwen.py of the vendored llama.cpp), with
//! every value llama.cpp would abort on refused here instead.

use serde_json::Value as Json;

use crate::config::{f32_value, find, int_value, Config, CONFIG};
use crate::error::{format_err, unsupported, Result};
use crate::meta::{Metadata, Value};
use crate::rope_freqs::Llama3Rope;

/// An architecture convert maps: config.json's `architectures[0]`, the GGUF
/// `general.architecture`, and whether llama's q/k rows are permuted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arch {
    pub hf: &'static str,
    pub name: &'static str,
    pub permute_qk: bool,
    /// A mixture of experts: its expert count is its expert tensors'
    /// (a dense architecture's is 0 or absent).
    pub moe: bool,
}

pub const ARCHS: [Arch; 6] = [
    Arch { hf: "LlamaForCausalLM", name: "llama", permute_qk: true, moe: false },
    Arch { hf: "MistralForCausalLM", name: "llama", permute_qk: true, moe: false },
    Arch { hf: "Qwen2ForCausalLM", name: "qwen2", permute_qk: false, moe: false },
    Arch { hf: "Qwen3ForCausalLM", name: "qwen3", permute_qk: false, moe: false },
    Arch { hf: "Qwen3MoeForCausalLM", name: "qwen3moe", permute_qk: false, moe: true },
    Arch { hf: "Phi3ForCausalLM", name: "phi3", permute_qk: false, moe: false },
];

/// llama.cpp's own limit on layers (LLAMA_MAX_LAYERS).
pub const MAX_LAYERS: u64 = 512;
/// llama.cpp's own limit on experts (LLAMA_MAX_EXPERTS).
pub const MAX_EXPERTS: u32 = 512;
/// Dimensions llama.cpp takes as int32.
const DIM: std::ops::RangeInclusive<u64> = 1..=i32::MAX as u64;

/// What the tensor map and the vocabulary need of the hyperparameters,
/// every value checked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hparams {
    pub n_layer: u32,
    pub n_embd: u32,
    pub n_ff: u32,
    pub n_head: u32,
    pub n_kv: u32,
    pub head_dim: u32,
    /// 0 for a dense model.
    pub n_expert: u32,
    pub n_expert_used: u32,
    pub n_ff_expert: u32,
    /// config.json's vocab_size, if it has one.
    pub vocab_size: Option<u32>,
    /// Llama 3.1+'s rope scaling, whose factors are the `rope_freqs` tensor.
    pub llama3_rope: Option<Llama3Rope>,
}

pub(crate) fn arch_of(cfg: &Config) -> Result<Arch> {
    let hf = cfg.get("architectures").and_then(|a| a.get(0)).and_then(Json::as_str);
    let Some(hf) = hf else {
        return Err(unsupported(CONFIG, "architectures", "names no architecture"));
    };
    ARCHS.iter().copied().find(|a| a.hf == hf).ok_or_else(|| {
        unsupported(CONFIG, "architectures", format!("{hf} is not supported (Llama, Mistral, Qwen2, Qwen3, Qwen3-MoE, Phi-3 are)"))
    })
}

struct Writer<'a> {
    meta: &'a mut Metadata,
    arch: &'static str,
}

impl Writer<'_> {
    fn u32(&mut self, suffix: &str, v: u32) {
        self.meta.set(format!("{}.{suffix}", self.arch), Value::U32(v));
    }

    fn f32(&mut self, suffix: &str, key: &str, v: Option<&Json>) -> Result<()> {
        if let Some(v) = v {
            self.meta.set(format!("{}.{suffix}", self.arch), Value::F32(f32_value(CONFIG, key, v)?));
        }
        Ok(())
    }
}

const LAYERS: &[&str] = &["n_layers", "num_hidden_layers", "n_layer", "num_layers"];
const CTX: &[&str] = &["max_position_embeddings", "n_ctx", "n_positions", "max_length", "max_sequence_length", "model_max_length"];
const EMBD: &[&str] = &["hidden_size", "n_embd", "dim"];
const FF: &[&str] = &["prefix_dense_intermediate_size", "dense_intermediate_size", "intermediate_size", "n_inner", "hidden_dim"];
const HEADS: &[&str] = &["num_attention_heads", "n_head", "n_heads"];
const KV_HEADS: &[&str] = &["num_key_value_heads", "n_kv_heads"];
const EXPERTS: &[&str] = &["num_local_experts", "num_experts", "n_routed_experts"];
const EXPERTS_USED: &[&str] = &["num_experts_per_tok", "num_experts_per_token", "top_k_experts"];

/// Write the hyperparameter keys of `arch` into `meta` and return them.
pub(crate) fn hparams(cfg: &Config, arch: Arch, meta: &mut Metadata) -> Result<Hparams> {
    meta.set("general.architecture", Value::Str(arch.name.into()));
    let mut w = Writer { meta, arch: arch.name };
    let n_layer = cfg.required(LAYERS, 1..=MAX_LAYERS)?;
    w.u32("block_count", n_layer);
    if let Some(ctx) = cfg.int_in(CTX, 0..=u32::MAX as u64)? {
        w.u32("context_length", ctx);
    }
    let n_embd = cfg.required(EMBD, DIM)?;
    w.u32("embedding_length", n_embd);
    // Optional to convert, but llama.cpp sizes its FFN from it and aborts at 0.
    let n_ff = cfg.required(FF, DIM)?;
    w.u32("feed_forward_length", n_ff);
    let n_head = cfg.required(HEADS, DIM)?;
    w.u32("attention.head_count", n_head);
    let n_kv = cfg.int_in(KV_HEADS, DIM)?;
    if let Some(kv) = n_kv {
        w.u32("attention.head_count_kv", kv);
        if n_head % kv != 0 {
            return Err(format_err(CONFIG, KV_HEADS[0], format!("{kv} does not divide num_attention_heads {n_head}")));
        }
    }
    if cfg.get("is_causal").and_then(Json::as_bool) == Some(false) {
        return Err(unsupported(CONFIG, "is_causal", "false: a bidirectional model"));
    }
    let llama3_rope = rope(cfg, &mut w)?;
    // Every architecture here normalizes with RMSNorm, whose epsilon
    // llama.cpp requires (class_defaults.rs fills transformers' default).
    let eps = cfg
        .find(&["rms_norm_eps", "norm_eps"])
        .ok_or_else(|| format_err(CONFIG, "rms_norm_eps", "missing (llama.cpp needs the RMSNorm epsilon)"))?;
    w.f32("attention.layer_norm_rms_epsilon", eps.0, Some(eps.1))?;
    let ln = cfg.find(&["layer_norm_eps", "layer_norm_epsilon", "norm_epsilon"]);
    w.f32("attention.layer_norm_epsilon", ln.map_or("layer_norm_eps", |x| x.0), ln.map(|x| x.1))?;
    let n_expert = cfg.int_in(EXPERTS, 0..=u32::MAX as u64)?.unwrap_or(0);
    if let Some((key, _)) = cfg.find(EXPERTS) {
        // llama.cpp asserts the count is at most LLAMA_MAX_EXPERTS, aborting
        // the host; a dense model's stray count was written as it was and
        // crashed it (issue 55). A dense model's count is 0 (or absent).
        if n_expert > MAX_EXPERTS {
            return Err(format_err(CONFIG, key, format!("{n_expert} experts: llama.cpp takes at most {MAX_EXPERTS}")));
        }
        if n_expert > 0 && !arch.moe {
            let why = format!("{n_expert} experts in a dense {} model, which has no expert tensors", arch.name);
            return Err(format_err(CONFIG, key, why));
        }
        w.u32("expert_count", n_expert);
    }
    if arch.moe && n_expert == 0 {
        return Err(format_err(CONFIG, EXPERTS[1], format!("no experts in a {} model", arch.name)));
    }
    let n_expert_used = cfg.int_in(EXPERTS_USED, 0..=u32::MAX as u64)?;
    if let Some(u) = n_expert_used {
        w.u32("expert_used_count", u);
    }
    let used = n_expert_used.unwrap_or(0);
    if n_expert > 0 && !(1..=n_expert).contains(&used) {
        return Err(format_err(CONFIG, EXPERTS_USED[0], format!("{used} experts per token of {n_expert}: must be 1..={n_expert}")));
    }
    if n_expert == 0 && used > 0 {
        return Err(format_err(CONFIG, EXPERTS_USED[0], format!("{used} experts per token in a model without experts")));
    }
    for (suffix, key) in [("expert_group_count", "n_group"), ("expert_group_used_count", "topk_group")] {
        if let Some(v) = cfg.int_in(&[key], 0..=u32::MAX as u64)? {
            w.u32(suffix, v);
        }
    }
    let gating =
        ["score_function", "scoring_func", "score_func", "moe_router_activation", "moe_router_activation_func", "expert_selection_fn"];
    if let Some((k, _)) = cfg.find(&gating) {
        return Err(unsupported(CONFIG, k, "an expert gating function is not supported"));
    }
    // convert reads config.json through transformers' config class, whose
    // head_dim is set when the file has none: hidden_size / heads for
    // LlamaConfig and MistralConfig, 128 for Qwen3Config; Qwen2's and
    // Qwen3-MoE's classes have none (convert then writes no key_length).
    let head_dim = match (cfg.int_in(&["head_dim"], DIM)?, arch.name) {
        (Some(hd), _) => Some(hd),
        (None, "llama") if n_embd % n_head == 0 => Some(n_embd / n_head),
        (None, "qwen3") => Some(128),
        _ => None,
    };
    if let Some(hd) = head_dim {
        w.u32("attention.key_length", hd);
        w.u32("attention.value_length", hd);
    } else if n_embd % n_head != 0 {
        return Err(format_err(CONFIG, EMBD[0], format!("{n_embd} is not a multiple of num_attention_heads {n_head}")));
    }
    let head_dim = head_dim.unwrap_or(n_embd / n_head);
    w.meta.set("general.file_type", Value::U32(32)); // LlamaFileType.MOSTLY_BF16
    w.meta.set("general.quantization_version", Value::U32(2));
    let vocab_size = cfg.int_in(&["vocab_size"], DIM)?;
    if arch.name == "llama" {
        let v = vocab_size.ok_or_else(|| format_err(CONFIG, "vocab_size", "missing (llama.cpp's llama needs it)"))?;
        w.u32("vocab_size", v);
        w.u32("rope.dimension_count", head_dim);
    }
    let mut n_ff_expert = 0;
    if arch.name == "qwen3moe" {
        // Qwen2MoeModel
        if let Some(v) = cfg.int_in(&["moe_intermediate_size"], DIM)? {
            w.u32("expert_feed_forward_length", v);
            n_ff_expert = v;
        }
        if let Some(v) = cfg.int_in(&["shared_expert_intermediate_size"], 0..=i32::MAX as u64)? {
            w.u32("expert_shared_feed_forward_length", v);
        }
    }
    if head_dim % 2 != 0 && arch.permute_qk {
        return Err(format_err(CONFIG, "head_dim", format!("{head_dim}: llama's q/k permutation needs an even head size")));
    }
    Ok(Hparams {
        n_layer,
        n_embd,
        n_ff,
        n_head,
        n_kv: n_kv.unwrap_or(n_head),
        head_dim,
        n_expert,
        n_expert_used: used,
        n_ff_expert,
        vocab_size,
        llama3_rope,
    })
}

/// The rope keys (TextModel.set_gguf_parameters' rope part); Llama 3's
/// scaling, which is a tensor instead (rope_freqs.rs).
fn rope(cfg: &Config, w: &mut Writer) -> Result<Option<Llama3Rope>> {
    let rope = cfg.find(&["rope_parameters", "rope_scaling"]);
    if let Some((k, r)) = rope {
        if !r.is_object() {
            return Err(format_err(CONFIG, k, "not an object"));
        }
        if ["full_attention", "sliding_attention", "mrope_section"].iter().any(|f| r.get(f).is_some()) {
            return Err(unsupported(CONFIG, k, "per-layer-type or multimodal rope parameters are not supported"));
        }
    }
    let r = rope.map(|x| x.1);
    let rope_type = find(r, &["rope_type", "type"]).and_then(|(_, v)| v.as_str());
    let factor = find(r, &["factor"]);
    match (rope_type, factor) {
        (None | Some("default") | Some("dynamic"), _) => {} // nothing written (dynamic: the HunYuan class only)
        (Some(t @ ("linear" | "yarn")), Some((_, f))) => {
            w.meta.set(format!("{}.rope.scaling.type", w.arch), Value::Str(t.into()));
            w.f32("rope.scaling.factor", "rope_scaling.factor", Some(f))?;
            if t == "yarn" {
                let orig = find(r, &["original_max_position_embeddings"])
                    .ok_or_else(|| format_err(CONFIG, "rope_scaling.original_max_position_embeddings", "missing for yarn rope"))?;
                let orig = int_value(CONFIG, "rope_scaling.original_max_position_embeddings", orig.1, 1..=u32::MAX as u64)?;
                w.u32("rope.scaling.original_context_length", orig);
                for (suffix, keys) in [
                    ("rope.scaling.yarn_ext_factor", &["extrapolation_factor"][..]),
                    ("rope.scaling.yarn_attn_factor", &["attention_factor", "attn_factor"][..]),
                    ("rope.scaling.yarn_beta_fast", &["beta_fast"][..]),
                    ("rope.scaling.yarn_beta_slow", &["beta_slow"][..]),
                ] {
                    let v = find(r, keys);
                    w.f32(suffix, v.map_or(keys[0], |x| x.0), v.map(|x| x.1))?;
                }
            }
        }
        (Some("linear" | "yarn"), None) => {}
        (Some(t), _) if t.eq_ignore_ascii_case("llama3") => {}
        (Some(t), _) => {
            // longrope and others need more than convert's llama path writes.
            return Err(unsupported(CONFIG, "rope_scaling.rope_type", format!("'{t}' is not supported")));
        }
    }
    let theta = find(r, &["rope_theta"])
        .or_else(|| cfg.find(&["global_rope_theta", "rope_global_theta", "rope_theta_global", "rope_theta", "rotary_emb_base"]));
    w.f32("rope.freq_base", theta.map_or("rope_theta", |x| x.0), theta.map(|x| x.1))?;
    let llama3 = rope_type.filter(|t| t.eq_ignore_ascii_case("llama3")).map(|_| Llama3Rope::parse(r, theta.map(|x| x.1))).transpose()?;
    let local = ["local_rope_theta", "rope_local_theta", "rope_theta_local", "swa_rope_theta", "rope_local_base_freq"];
    if let Some((k, _)) = cfg.find(&local) {
        return Err(unsupported(CONFIG, k, "a sliding-window rope theta is not supported"));
    }
    Ok(llama3)
}
