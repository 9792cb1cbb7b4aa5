//! Phi-3 (`Phi3ForCausalLM`, GGUF `phi3`): conversion/phi.py's
//! `Phi3MiniModel`, which writes its own hyperparameter keys (not the
//! generic ones of hparams.rs) and, for a `longrope` model (Phi-3-128k,
//! Phi-3.5, Phi-4-mini), the `rope_factors_long`/`_short` tensors and the
//! attention factor. convert reads config.json through transformers'
//! `Phi3Config`, so its class defaults and its rope normalization
//! (`convert_rope_params_to_dict`, `standardize_rope_params`) are applied
//! here as convert sees them; what it would raise on is refused by name.

use serde_json::{Map, Value as Json};

use crate::config::{f32_value, int_value, Config, CONFIG};
use crate::error::{format_err, unsupported, Result};
use crate::hparams::{Hparams, MAX_LAYERS};
use crate::meta::{MappedTensor, Metadata, TensorType, Value};
use crate::vocab::truthy;

/// Dimensions llama.cpp takes as int32.
const DIM: std::ops::RangeInclusive<u64> = 1..=i32::MAX as u64;
const U32: std::ops::RangeInclusive<u64> = 0..=u32::MAX as u64;

/// The rope parameters as transformers 5 hands them to convert.
struct Rope<'a> {
    /// `default` or `longrope` (transformers renames `su` and `yarn`).
    kind: &'a str,
    /// rope_scaling's own object, for its factor lists.
    params: Option<&'a Map<String, Json>>,
    original_ctx: u32,
    /// int(partial_rotary_factor * hidden_size) // num_attention_heads.
    n_rot: u32,
    theta: f32,
}

fn rope<'a>(cfg: &'a Config, n_embd: u32, n_head: u32) -> Result<Rope<'a>> {
    // convert_rope_params_to_dict: a non-empty rope_scaling wins over rope_parameters.
    let (key, params) = match cfg.get("rope_scaling").filter(|r| r.as_object().is_some_and(|o| !o.is_empty())) {
        Some(r) => ("rope_scaling", Some(r)),
        None => ("rope_parameters", cfg.get("rope_parameters")),
    };
    let params = params.map(|p| p.as_object().ok_or_else(|| format_err(CONFIG, key, "not an object"))).transpose()?;
    let get = |k: &str| params.and_then(|p| p.get(k)).filter(|v| !v.is_null());
    if get("full_attention").is_some() || get("sliding_attention").is_some() {
        return Err(unsupported(CONFIG, key, "per-layer-type rope parameters are not supported"));
    }
    let kind = match get("rope_type").or_else(|| get("type")).map(|t| t.as_str().unwrap_or("")) {
        None | Some("default") => "default",
        Some("longrope" | "su" | "yarn") => "longrope",
        // Phi3Config.validate_rope takes no other type.
        Some(t) => return Err(unsupported(CONFIG, &format!("{key}.rope_type"), format!("'{t}' is not a Phi-3 rope type"))),
    };
    // The class default, which standardize_rope_params puts over
    // rope_scaling's own value for longrope (Phi-3 keeps it outside).
    let top = cfg.int_in(&["original_max_position_embeddings"], U32)?.unwrap_or(4096);
    let original_ctx = match (kind, get("original_max_position_embeddings")) {
        ("default", Some(v)) => int_value(CONFIG, &format!("{key}.original_max_position_embeddings"), v, U32)?,
        _ => top,
    };
    let prf_field = format!("{key}.partial_rotary_factor");
    let (prf_name, prf) = match get("partial_rotary_factor") {
        Some(v) => (prf_field.as_str(), Some(v)),
        None => ("partial_rotary_factor", cfg.get("partial_rotary_factor")),
    };
    let prf = match prf {
        None => 1.0,
        Some(v) => {
            v.as_f64().filter(|x| *x > 0.0 && *x <= 1.0).ok_or_else(|| format_err(CONFIG, prf_name, format!("{v} is not in (0, 1]")))?
        }
    };
    // Python: int(rot_pct * n_embd) // n_head, in float64 then truncated.
    let n_rot = (prf * n_embd as f64) as u64 / n_head as u64;
    if n_rot == 0 || n_rot % 2 != 0 {
        return Err(format_err(
            CONFIG,
            prf_name,
            format!("{prf} gives {n_rot} rotary dimensions per head: llama.cpp needs a positive even number"),
        ));
    }
    let theta = match get("rope_theta") {
        Some(v) => f32_value(CONFIG, &format!("{key}.rope_theta"), v)?,
        None => cfg.get("rope_theta").map(|v| f32_value(CONFIG, "rope_theta", v)).transpose()?.unwrap_or(10000.0),
    };
    Ok(Rope { kind, params, original_ctx, n_rot: n_rot as u32, theta })
}

/// Write Phi3MiniModel.set_gguf_parameters' keys into `meta`.
pub(crate) fn hparams(cfg: &Config, meta: &mut Metadata) -> Result<Hparams> {
    meta.set("general.architecture", Value::Str("phi3".into()));
    let u32_key = |meta: &mut Metadata, k: &str, v: u32| meta.set(format!("phi3.{k}"), Value::U32(v));
    let n_embd = cfg.required(&["hidden_size", "n_embd"], DIM)?;
    let n_head = cfg.required(&["num_attention_heads", "n_head"], DIM)?;
    // Phi3Config.__post_init__: no KV head count means as many as heads.
    let n_kv = cfg.int_in(&["num_key_value_heads", "n_head_kv"], DIM)?.unwrap_or(n_head);
    if n_head % n_kv != 0 {
        return Err(format_err(CONFIG, "num_key_value_heads", format!("{n_kv} does not divide num_attention_heads {n_head}")));
    }
    if n_embd % n_head != 0 {
        return Err(format_err(CONFIG, "hidden_size", format!("{n_embd} is not a multiple of num_attention_heads {n_head}")));
    }
    // llama.cpp's phi3 has no key_length: its head size is hidden / heads.
    let head_dim = n_embd / n_head;
    if let Some(hd) = cfg.int_in(&["head_dim"], U32)?.filter(|&hd| hd != head_dim) {
        return Err(unsupported(
            CONFIG,
            "head_dim",
            format!("{hd}: llama.cpp's phi3 takes hidden_size / num_attention_heads ({head_dim})"),
        ));
    }
    let n_layer = cfg.required(&["n_layers", "num_hidden_layers", "n_layer", "num_layers"], 1..=MAX_LAYERS)?;
    let n_ff = cfg.required(&["intermediate_size"], DIM)?;
    let ctx = cfg.int_in(&["n_positions", "max_position_embeddings"], U32)?.unwrap_or(4096);
    let r = rope(cfg, n_embd, n_head)?;
    if r.n_rot > head_dim {
        return Err(format_err(CONFIG, "partial_rotary_factor", format!("{} rotary dimensions in a head of {head_dim}", r.n_rot)));
    }
    u32_key(meta, "context_length", ctx);
    u32_key(meta, "rope.scaling.original_context_length", r.original_ctx);
    u32_key(meta, "embedding_length", n_embd);
    u32_key(meta, "feed_forward_length", n_ff);
    u32_key(meta, "block_count", n_layer);
    u32_key(meta, "attention.head_count", n_head);
    u32_key(meta, "attention.head_count_kv", n_kv);
    let eps = cfg.get("rms_norm_eps").map(|v| f32_value(CONFIG, "rms_norm_eps", v)).transpose()?.unwrap_or(1e-5);
    meta.set("phi3.attention.layer_norm_rms_epsilon", Value::F32(eps));
    u32_key(meta, "rope.dimension_count", r.n_rot);
    meta.set("phi3.rope.freq_base", Value::F32(r.theta));
    meta.set("general.file_type", Value::U32(32)); // LlamaFileType.MOSTLY_BF16
    meta.set("general.quantization_version", Value::U32(2));
    // 0 when absent: how llama.cpp tells Phi-4 (no sliding window) apart.
    u32_key(meta, "attention.sliding_window", cfg.int_in(&["sliding_window"], U32)?.unwrap_or(0));
    let vocab_size = cfg.int_in(&["vocab_size"], DIM)?.unwrap_or(32064);
    Ok(Hparams {
        n_layer,
        n_embd,
        n_ff,
        n_head,
        n_kv,
        head_dim,
        n_expert: 0,
        n_expert_used: 0,
        n_ff_expert: 0,
        vocab_size: Some(vocab_size),
        llama3_rope: None,
    })
}

/// Phi3MiniModel.generate_extra_tensors: for a model with long factors,
/// the attention factor key and the two factor tensors.
pub(crate) fn rope_factors(cfg: &Config, hp: &Hparams, meta: &mut Metadata) -> Result<Vec<MappedTensor>> {
    let r = rope(cfg, hp.n_embd, hp.n_head)?;
    let get = |k: &str| r.params.and_then(|p| p.get(k)).filter(|v| !v.is_null());
    // Python truthiness: an absent, empty or zero long_factor writes nothing.
    let Some(long) = get("long_factor").filter(|v| truthy(v)) else {
        if r.kind == "longrope" {
            return Err(format_err(CONFIG, "rope_scaling.long_factor", "missing for longrope (transformers requires it)"));
        }
        return Ok(vec![]);
    };
    if r.kind != "longrope" {
        return Err(unsupported(CONFIG, "rope_scaling.rope_type", "long factors with the default rope type (convert: not supported)"));
    }
    let ctx = meta.get("phi3.context_length").and_then(|v| if let Value::U32(c) = v { Some(*c) } else { None }).unwrap_or(4096);
    let orig = r.original_ctx;
    // Python: max_pos / orig_max_pos, then math.sqrt(1 + math.log(scale) /
    // math.log(orig)) in float64 (libm's log, as CPython's), packed as f32.
    if orig == 0 {
        return Err(format_err(CONFIG, "original_max_position_embeddings", "0 (convert divides by it)"));
    }
    let scale = ctx as f64 / orig as f64;
    let attn_factor = if scale > 1.0 {
        if orig == 1 {
            return Err(format_err(CONFIG, "original_max_position_embeddings", "1 (convert divides by its logarithm)"));
        }
        (1.0 + scale.ln() / (orig as f64).ln()).sqrt()
    } else {
        1.0
    };
    meta.set("phi3.rope.scaling.attn_factor", Value::F32(attn_factor as f32));
    let short = get("short_factor")
        .ok_or_else(|| format_err(CONFIG, "rope_scaling.short_factor", "missing (convert needs it with long_factor)"))?;
    // Both convert (rope dims / 2) and transformers (head_dim * factor // 2) check the count.
    let want = r.n_rot as usize / 2;
    let mut out = vec![];
    for (which, v) in [("long", long), ("short", short)] {
        let field = format!("rope_scaling.{which}_factor");
        let list = v.as_array().ok_or_else(|| format_err(CONFIG, &field, "not a list of numbers"))?;
        if list.len() != want {
            return Err(format_err(CONFIG, &field, format!("{} factors, but {} rotary dimensions need {want}", list.len(), r.n_rot)));
        }
        // torch.tensor(list, dtype=float32): each Python float rounded to f32.
        let generated =
            list.iter()
                .enumerate()
                .map(|(i, x)| {
                    x.as_f64().map(|f| f as f32).filter(|f| f.is_finite()).map(f32::to_bits).ok_or_else(|| {
                        format_err(CONFIG, &format!("{field}[{i}]"), format!("{x} is not a number that fits a 32-bit float"))
                    })
                })
                .collect::<Result<Vec<u32>>>()?;
        out.push(MappedTensor {
            name: format!("rope_factors_{which}.weight"),
            shape: vec![want as u64],
            ty: TensorType::F32,
            sources: vec![],
            permute_heads: 0,
            generated,
            rows: None,
        });
    }
    Ok(out)
}
