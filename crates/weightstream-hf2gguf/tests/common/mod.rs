//! The tiny checkpoints the builder's tests mutate (hostile.rs, phi3.rs),
//! and the refusal check they share.
#![allow(dead_code)] // each test file uses part of it

use serde_json::{json, Value};
use weightstream_hf2gguf::{build, HfError, HfInput, Kind, TensorIn};

pub const SPLIT: &str =
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

pub struct Ckpt {
    pub config: Value,
    pub tokenizer: Value,
    pub tensors: Vec<TensorIn>,
}

pub fn t(name: &str, shape: &[u64]) -> TensorIn {
    TensorIn { name: name.into(), shape: shape.to_vec() }
}

/// A tiny Llama: 2 layers, hidden 64, 4 heads (2 KV), FFN 128, vocab 16.
pub fn llama() -> Ckpt {
    let config = json!({
        "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 16, "max_position_embeddings": 128,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "bos_token_id": 1, "eos_token_id": 2
    });
    let vocab: serde_json::Map<String, Value> = (0..14).map(|i| (format!("t{i}"), json!(i))).collect();
    let tokenizer = json!({
        "model": {"type": "BPE", "vocab": vocab, "merges": ["t t1"]},
        "added_tokens": [{"id": 14, "content": "<|begin|>", "special": true}, {"id": 15, "content": "<|end|>", "special": true}],
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": SPLIT}}, {"type": "ByteLevel", "use_regex": false}]}
    });
    let mut tensors = vec![t("model.embed_tokens.weight", &[16, 64]), t("model.norm.weight", &[64]), t("lm_head.weight", &[16, 64])];
    for l in 0..2 {
        let p = |s: &str| format!("model.layers.{l}.{s}");
        tensors.extend([
            t(&p("input_layernorm.weight"), &[64]),
            t(&p("post_attention_layernorm.weight"), &[64]),
            t(&p("self_attn.q_proj.weight"), &[64, 64]),
            t(&p("self_attn.k_proj.weight"), &[32, 64]),
            t(&p("self_attn.v_proj.weight"), &[32, 64]),
            t(&p("self_attn.o_proj.weight"), &[64, 64]),
            t(&p("mlp.gate_proj.weight"), &[128, 64]),
            t(&p("mlp.up_proj.weight"), &[128, 64]),
            t(&p("mlp.down_proj.weight"), &[64, 128]),
        ]);
    }
    Ckpt { config, tokenizer, tensors }
}

/// The tiny Llama as a 4-expert Qwen3-MoE (2 per token).
pub fn moe() -> Ckpt {
    let mut c = llama();
    c.config["architectures"] = json!(["Qwen3MoeForCausalLM"]);
    c.config["num_experts"] = json!(4);
    c.config["num_experts_per_tok"] = json!(2);
    c.config["moe_intermediate_size"] = json!(32);
    c.tensors.retain(|t| !t.name.contains(".mlp."));
    for l in 0..2 {
        c.tensors.push(t(&format!("model.layers.{l}.mlp.gate.weight"), &[4, 64]));
        for x in 0..4 {
            for (p, s) in [("gate_proj", [32, 64]), ("up_proj", [32, 64]), ("down_proj", [64, 32])] {
                c.tensors.push(t(&format!("model.layers.{l}.mlp.experts.{x}.{p}.weight"), &s));
            }
        }
    }
    c
}

pub fn run(c: &Ckpt) -> Result<weightstream_hf2gguf::Metadata, HfError> {
    let config = serde_json::to_vec(&c.config).unwrap();
    let tok = serde_json::to_vec(&c.tokenizer).unwrap();
    build(&HfInput { dir_name: "tiny", config: &config, tokenizer_json: Some(&tok), tensors: &c.tensors, ..Default::default() })
}

#[track_caller]
pub fn refused(c: &Ckpt, kind: Kind, file: &str, field: &str) {
    match run(c) {
        Ok(_) => panic!("{file} {field}: built, should be refused"),
        Err(e) => assert_eq!((e.kind, e.file.as_str(), e.field.as_str()), (kind, file, field), "{e}"),
    }
}
