//! Hugging Face tensor names to llama.cpp's (convert's tensor map for the
//! architectures of hparams.rs), their GGUF types and shapes, experts
//! stacked, and every shape checked against the hyperparameters: a config
//! that disagrees with its tensors is refused, naming both.

use std::collections::BTreeMap;

use crate::error::{format_err, not_found, unsupported, Result};
use crate::hparams::{Arch, Hparams};
use crate::meta::{MappedTensor, TensorType};

/// One tensor of the checkpoint as the caller lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorIn {
    pub name: String,
    /// Outermost first, as stored (a packed-quantized tensor: its logical
    /// shape).
    pub shape: Vec<u64>,
}

pub(crate) const TENSORS: &str = "tensors";

/// Per-layer tensors: Hugging Face suffix after `model.layers.N.`, GGUF
/// suffix after `blk.N.`, and which of q (1) or k (2) llama permutes.
const LAYER: &[(&str, &str, u8)] = &[
    ("input_layernorm.weight", "attn_norm.weight", 0),
    ("post_attention_layernorm.weight", "ffn_norm.weight", 0),
    ("self_attn.q_proj.weight", "attn_q.weight", 1),
    ("self_attn.q_proj.bias", "attn_q.bias", 1),
    ("self_attn.k_proj.weight", "attn_k.weight", 2),
    ("self_attn.k_proj.bias", "attn_k.bias", 2),
    ("self_attn.v_proj.weight", "attn_v.weight", 0),
    ("self_attn.v_proj.bias", "attn_v.bias", 0),
    ("self_attn.o_proj.weight", "attn_output.weight", 0),
    ("self_attn.o_proj.bias", "attn_output.bias", 0),
    ("self_attn.q_norm.weight", "attn_q_norm.weight", 0),
    ("self_attn.k_norm.weight", "attn_k_norm.weight", 0),
    ("mlp.gate_proj.weight", "ffn_gate.weight", 0),
    ("mlp.up_proj.weight", "ffn_up.weight", 0),
    ("mlp.down_proj.weight", "ffn_down.weight", 0),
    ("mlp.gate.weight", "ffn_gate_inp.weight", 0),
];
/// Phi-3's (the tensors its GGUF architecture lists): the norms, q/k/v
/// and o of LAYER, and q/k/v fused as `attn_qkv` and gate/up fused as
/// `ffn_up` (gate rows first), kept fused as llama.cpp's phi3 takes them.
const PHI3_FROM_LAYER: [&str; 7] = [
    "input_layernorm.weight",
    "post_attention_layernorm.weight",
    "self_attn.q_proj.weight",
    "self_attn.k_proj.weight",
    "self_attn.v_proj.weight",
    "self_attn.o_proj.weight",
    "mlp.down_proj.weight",
];
const PHI3_FUSED: [(&str, &str, u8); 2] =
    [("self_attn.qkv_proj.weight", "attn_qkv.weight", 0), ("mlp.gate_up_proj.weight", "ffn_up.weight", 0)];
const EXPERT: [(&str, &str); 3] =
    [("gate_proj.weight", "ffn_gate_exps.weight"), ("up_proj.weight", "ffn_up_exps.weight"), ("down_proj.weight", "ffn_down_exps.weight")];

/// Where a Hugging Face tensor goes: (GGUF name, expert index, q/k, layer).
fn gguf_name(hf: &str, arch: Arch) -> Option<(String, Option<u64>, u8, Option<u64>)> {
    match hf {
        "model.embed_tokens.weight" => return Some(("token_embd.weight".into(), None, 0, None)),
        "model.norm.weight" => return Some(("output_norm.weight".into(), None, 0, None)),
        "lm_head.weight" => return Some(("output.weight".into(), None, 0, None)),
        _ => {}
    }
    let rest = hf.strip_prefix("model.layers.")?;
    let (bid, rest) = rest.split_once('.')?;
    let bid: u64 = decimal(bid)?;
    let entry = match arch.name {
        "phi3" if !PHI3_FROM_LAYER.contains(&rest) => PHI3_FUSED.iter().find(|(h, _, _)| *h == rest),
        _ => LAYER.iter().find(|(h, _, _)| *h == rest),
    };
    if let Some(&(_, g, qk)) = entry {
        return Some((format!("blk.{bid}.{g}"), None, if arch.permute_qk { qk } else { 0 }, Some(bid)));
    }
    let (xid, part) = rest.strip_prefix("mlp.experts.")?.split_once('.')?;
    let xid = decimal(xid)?;
    let (_, g) = EXPERT.iter().find(|(h, _)| *h == part)?;
    Some((format!("blk.{bid}.{g}"), Some(xid), 0, Some(bid)))
}

/// A plain decimal index (no sign, no leading `+`), as the model's own
/// module names are.
fn decimal(s: &str) -> Option<u64> {
    (!s.is_empty() && s.len() <= 12 && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok()).flatten()
}

/// convert's type for a GGUF tensor: F32 for 1-D ones, norms and the router.
fn type_of(name: &str, dims: usize) -> TensorType {
    if dims <= 1 || name.ends_with("_norm.weight") || name.contains(".ffn_gate_inp.") {
        TensorType::F32
    } else {
        TensorType::BF16
    }
}

/// The tensor map of `tensors` for `arch` with hyperparameters `hp`.
pub(crate) fn map(tensors: &[TensorIn], arch: Arch, hp: &Hparams) -> Result<Vec<MappedTensor>> {
    // GGUF name -> (sources by expert, q/k): experts gathered by index, so
    // nothing is sized from config.json's expert count.
    let mut by_name: BTreeMap<String, (BTreeMap<u64, usize>, u8, bool)> = BTreeMap::new();
    let mut order: Vec<String> = vec![];
    for (i, t) in tensors.iter().enumerate() {
        if t.name.ends_with(".rotary_emb.inv_freq") {
            continue; // convert drops these
        }
        let (name, xid, qk, bid) =
            gguf_name(&t.name, arch).ok_or_else(|| unsupported(TENSORS, &t.name, "has no llama.cpp counterpart the converter knows"))?;
        if let Some(b) = bid.filter(|&b| b >= hp.n_layer as u64) {
            return Err(format_err(TENSORS, &t.name, format!("layer {b}, but config.json's num_hidden_layers is {}", hp.n_layer)));
        }
        if let Some(x) = xid.filter(|&x| x >= hp.n_expert as u64) {
            return Err(format_err(TENSORS, &t.name, format!("expert {x}, but config.json's expert count is {}", hp.n_expert)));
        }
        let e = by_name.entry(name.clone()).or_insert_with(|| {
            order.push(name.clone());
            (BTreeMap::new(), qk, xid.is_some())
        });
        if e.0.insert(xid.unwrap_or(0), i).is_some() {
            return Err(format_err(TENSORS, &t.name, "appears twice"));
        }
    }
    let mut out = Vec::with_capacity(order.len());
    for name in order {
        let (sources, qk, stacked) = &by_name[&name];
        let first = &tensors[*sources.values().next().expect("an entry has a source")];
        let mut shape = first.shape.clone();
        if *stacked {
            if sources.len() != hp.n_expert as usize {
                let missing = (0..hp.n_expert as u64).find(|x| !sources.contains_key(x)).unwrap_or(0);
                return Err(not_found(TENSORS, &name, format!("expert {missing} of {} is missing", hp.n_expert)));
            }
            if let Some(&k) = sources.values().find(|&&k| tensors[k].shape != first.shape) {
                return Err(format_err(
                    TENSORS,
                    &tensors[k].name,
                    format!("shape {:?}, other experts {:?}", tensors[k].shape, first.shape),
                ));
            }
            shape.insert(0, hp.n_expert as u64); // torch.stack(experts): a new outermost dimension
        }
        check_shape(&name, &first.name, &first.shape, hp, arch)?;
        let permute_heads = match qk {
            1 => hp.n_head,
            2 => hp.n_kv,
            _ => 0,
        };
        out.push(MappedTensor {
            ty: type_of(&name, shape.len()),
            name,
            shape,
            sources: sources.values().copied().collect(),
            permute_heads,
            generated: vec![],
            rows: None,
        });
    }
    // Llama 3's rope scaling: the factors convert computes, as a tensor (rope_freqs.rs).
    if let Some(r) = hp.llama3_rope.filter(|_| arch.name == "llama") {
        let generated = r.factors(hp.head_dim);
        out.push(MappedTensor {
            name: "rope_freqs.weight".into(),
            shape: vec![generated.len() as u64],
            ty: TensorType::F32,
            sources: vec![],
            permute_heads: 0,
            generated,
            rows: None,
        });
    }
    // The expert count written is every stacked tensor's outermost
    // dimension (checked above); a MoE model without them would declare
    // experts no tensor has.
    if hp.n_expert > 0 && !out.iter().any(|t| t.name.ends_with("_exps.weight")) {
        let why = format!("config.json declares {} experts, but no layer has expert tensors (mlp.experts.N.*)", hp.n_expert);
        return Err(not_found(TENSORS, "blk.0.ffn_up_exps.weight", why));
    }
    for required in ["token_embd.weight", "output_norm.weight"] {
        if !out.iter().any(|t| t.name == required) {
            return Err(not_found(TENSORS, required, "missing: llama.cpp needs it"));
        }
    }
    Ok(out)
}

/// Phi-3's `attn_qkv` as the q, k and v row ranges llama.cpp creates
/// instead when the caller fills the tensors (meta.rs: `unfused`).
pub(crate) fn unfused(tensors: &[MappedTensor], hp: &Hparams) -> Vec<(String, Vec<MappedTensor>)> {
    let (q, kv) = (hp.n_head as u64 * hp.head_dim as u64, hp.n_kv as u64 * hp.head_dim as u64);
    let fused = tensors.iter().filter(|t| t.name.ends_with(".attn_qkv.weight") && t.shape.len() == 2);
    fused
        .map(|t| {
            let parts = [("attn_q", 0, q), ("attn_k", q, kv), ("attn_v", q + kv, kv)].map(|(part, start, n)| MappedTensor {
                name: t.name.replace("attn_qkv", part),
                shape: vec![n, t.shape[1]],
                rows: Some((start, q + 2 * kv)),
                ..t.clone()
            });
            (t.name.clone(), parts.to_vec())
        })
        .collect()
}

/// The shapes llama.cpp will size from the hyperparameters: a disagreement
/// is refused here, naming the tensor and the config fields.
fn check_shape(gguf: &str, hf: &str, shape: &[u64], hp: &Hparams, arch: Arch) -> Result<()> {
    let (embd, q, kv) = (hp.n_embd as u64, hp.n_head as u64 * hp.head_dim as u64, hp.n_kv as u64 * hp.head_dim as u64);
    let suffix = gguf.split_once('.').map_or(gguf, |(b, rest)| if b == "blk" { rest.split_once('.').map_or(rest, |x| x.1) } else { gguf });
    let want: Option<(Vec<u64>, &str)> = match suffix {
        "token_embd.weight" | "output.weight" => {
            Some((vec![hp.vocab_size.map_or(shape.first().copied().unwrap_or(0), u64::from), embd], "vocab_size, hidden_size"))
        }
        "output_norm.weight" | "attn_norm.weight" | "ffn_norm.weight" => Some((vec![embd], "hidden_size")),
        "attn_q.weight" => Some((vec![q, embd], "num_attention_heads x head_dim, hidden_size")),
        "attn_k.weight" | "attn_v.weight" => Some((vec![kv, embd], "num_key_value_heads x head_dim, hidden_size")),
        "attn_output.weight" => Some((vec![embd, q], "hidden_size, num_attention_heads x head_dim")),
        "attn_q.bias" => Some((vec![q], "num_attention_heads x head_dim")),
        "attn_k.bias" | "attn_v.bias" => Some((vec![kv], "num_key_value_heads x head_dim")),
        "attn_q_norm.weight" | "attn_k_norm.weight" => Some((vec![hp.head_dim as u64], "head_dim")),
        "ffn_gate_inp.weight" => Some((vec![hp.n_expert as u64, embd], "num_experts, hidden_size")),
        "attn_qkv.weight" => Some((vec![q + 2 * kv, embd], "(num_attention_heads + 2 x num_key_value_heads) x head_dim, hidden_size")),
        "ffn_up.weight" if arch.name == "phi3" => Some((vec![2 * hp.n_ff as u64, embd], "2 x intermediate_size, hidden_size")),
        "ffn_gate.weight" | "ffn_up.weight" => Some((vec![hp.n_ff as u64, embd], "intermediate_size, hidden_size")),
        "ffn_down.weight" => Some((vec![embd, hp.n_ff as u64], "hidden_size, intermediate_size")),
        "ffn_gate_exps.weight" | "ffn_up_exps.weight" if hp.n_ff_expert > 0 => {
            Some((vec![hp.n_ff_expert as u64, embd], "moe_intermediate_size, hidden_size"))
        }
        "ffn_down_exps.weight" if hp.n_ff_expert > 0 => Some((vec![embd, hp.n_ff_expert as u64], "hidden_size, moe_intermediate_size")),
        _ => None,
    };
    match want {
        Some((w, fields)) if w != shape => Err(format_err(TENSORS, hf, format!("shape {shape:?}, but config.json ({fields}) says {w:?}"))),
        _ => Ok(()),
    }
}
