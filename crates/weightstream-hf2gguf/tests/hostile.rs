//! Hostile checkpoint directories: every one that made llama.cpp abort
//! the host process through the C adapter, or load what convert refuses
//! (issue 41), is a typed refusal naming the file and field, decided
//! before anything is sized from the value. Each case mutates one valid
//! tiny checkpoint, which itself builds.

use serde_json::{json, Value};
use weightstream_hf2gguf::{build, HfError, HfInput, Kind, TensorIn, Value as Meta};

const SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

struct Ckpt {
    config: Value,
    tokenizer: Value,
    tensors: Vec<TensorIn>,
}

fn t(name: &str, shape: &[u64]) -> TensorIn {
    TensorIn { name: name.into(), shape: shape.to_vec() }
}

/// A tiny Llama: 2 layers, hidden 64, 4 heads (2 KV), FFN 128, vocab 16.
fn llama() -> Ckpt {
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
fn moe() -> Ckpt {
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

fn run(c: &Ckpt) -> Result<weightstream_hf2gguf::Metadata, HfError> {
    let config = serde_json::to_vec(&c.config).unwrap();
    let tok = serde_json::to_vec(&c.tokenizer).unwrap();
    build(&HfInput { dir_name: "tiny", config: &config, tokenizer_json: Some(&tok), tensors: &c.tensors, ..Default::default() })
}

#[track_caller]
fn refused(c: &Ckpt, kind: Kind, file: &str, field: &str) {
    match run(c) {
        Ok(_) => panic!("{file} {field}: built, should be refused"),
        Err(e) => assert_eq!((e.kind, e.file.as_str(), e.field.as_str()), (kind, file, field), "{e}"),
    }
}

#[test]
fn the_valid_checkpoints_build() {
    let m = run(&llama()).unwrap();
    assert_eq!(m.get("llama.attention.head_count"), Some(&Meta::U32(4)));
    assert_eq!(m.get("tokenizer.ggml.bos_token_id"), Some(&Meta::U32(1)));
    assert_eq!(m.tensor("blk.0.attn_k.weight").unwrap().permute_heads, 2);
    // No head_dim in config.json: LlamaConfig's (hidden / heads), as convert sees it.
    assert_eq!(m.get("llama.attention.key_length"), Some(&Meta::U32(16)));
    let m = run(&moe()).unwrap();
    assert_eq!(m.get("qwen3moe.attention.key_length"), None, "Qwen3MoeConfig has no head_dim default");
    assert_eq!(m.tensor("blk.1.ffn_up_exps.weight").unwrap().shape, vec![4, 32, 64]);
    assert_eq!(m.get("general.size_label"), Some(&Meta::Str("4x40K".into())));
}

#[test]
fn duplicate_token_text_is_refused() {
    // A repeated model.vocab key (serde would keep only the last id).
    let mut c = llama();
    let text = serde_json::to_string(&c.tokenizer).unwrap().replacen("\"t3\":3", "\"t3\":3,\"t3\":13", 1);
    c.tokenizer = Value::Null;
    let config = serde_json::to_vec(&c.config).unwrap();
    let e = build(&HfInput {
        dir_name: "tiny",
        config: &config,
        tokenizer_json: Some(text.as_bytes()),
        tensors: &c.tensors,
        ..Default::default()
    })
    .unwrap_err();
    assert_eq!((e.kind, e.file.as_str(), e.field.as_str()), (Kind::Format, "tokenizer.json", "model.vocab"), "{e}");
    // An added token repeating another id's text.
    let mut c = llama();
    c.tokenizer["added_tokens"][1]["content"] = json!("t5");
    c.tokenizer["added_tokens"][1]["special"] = json!(true);
    refused(&c, Kind::Format, "tokenizer.json", "tokens");
}

#[test]
fn values_llama_cpp_aborts_on_are_refused() {
    for (key, v) in [
        ("num_attention_heads", json!(0)),
        ("num_key_value_heads", json!(0)),
        ("num_key_value_heads", json!(3)),
        ("hidden_size", json!(0)),
        ("intermediate_size", json!(0)),
        ("num_hidden_layers", json!(0)),
        ("num_hidden_layers", json!(513)),
        ("vocab_size", json!(-5)),
        ("num_attention_heads", json!(4294967296u64)),
        ("hidden_size", json!(1.5)),
    ] {
        let mut c = llama();
        c.config[key] = v;
        refused(&c, Kind::Format, "config.json", key);
    }
    let mut c = llama();
    c.config.as_object_mut().unwrap().remove("rms_norm_eps");
    refused(&c, Kind::Format, "config.json", "rms_norm_eps");
    let mut c = llama();
    c.config.as_object_mut().unwrap().remove("intermediate_size");
    refused(&c, Kind::Format, "config.json", "prefix_dense_intermediate_size");
    let mut c = moe();
    c.config["num_experts_per_tok"] = json!(5);
    refused(&c, Kind::Format, "config.json", "num_experts_per_tok");
    let mut c = moe();
    c.config["num_experts_per_tok"] = json!(0);
    refused(&c, Kind::Format, "config.json", "num_experts_per_tok");
}

#[test]
fn config_values_that_disagree_with_the_tensors_are_refused_before_sizing_anything() {
    // 30 million tokens: refused against the embedding's 16 rows, at once.
    let mut c = llama();
    c.config["vocab_size"] = json!(30_000_000);
    refused(&c, Kind::Format, "tensors", "model.embed_tokens.weight");
    // 2^32 - 1 experts: the router's 4 rows disagree; nothing is sized from it.
    let mut c = moe();
    c.config["num_experts"] = json!(4294967295u64);
    let e = run(&c).unwrap_err();
    assert_eq!((e.kind, e.file.as_str()), (Kind::Format, "tensors"), "{e}");
    // A layer past num_hidden_layers, and fewer layers than declared's tensors.
    let mut c = llama();
    c.config["num_hidden_layers"] = json!(1);
    refused(&c, Kind::Format, "tensors", "model.layers.1.input_layernorm.weight");
    let mut c = llama();
    c.config["num_key_value_heads"] = json!(4);
    refused(&c, Kind::Format, "tensors", "model.layers.0.self_attn.k_proj.weight");
    let mut c = moe();
    c.tensors.retain(|t| t.name != "model.layers.0.mlp.experts.2.up_proj.weight");
    refused(&c, Kind::NotFound, "tensors", "blk.0.ffn_up_exps.weight");
}

#[test]
fn ids_and_rope_values_convert_refuses_are_refused() {
    for v in [json!(4294967296u64), json!(-1), json!(16)] {
        let mut c = llama();
        c.config["bos_token_id"] = v;
        refused(&c, Kind::Format, "config.json", "bos_token_id");
    }
    for v in [json!(4294967296u64), json!(-1), json!(0)] {
        let mut c = llama();
        c.config["rope_scaling"] = json!({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": v});
        refused(&c, Kind::Format, "config.json", "rope_scaling.original_max_position_embeddings");
    }
    let mut c = llama();
    c.config["rope_scaling"] = json!({"rope_type": "longrope", "factor": 4.0});
    refused(&c, Kind::Unsupported, "config.json", "rope_scaling.rope_type");
}

#[test]
fn malformed_files_are_refused_naming_them() {
    let c = llama();
    let tok = serde_json::to_vec(&c.tokenizer).unwrap();
    for (config, field) in [(&b"{"[..], "(whole file)"), (b"[1]", "(whole file)"), (b"{\"architectures\": [\"GPT2\"]}", "architectures")] {
        let e = build(&HfInput { config, tokenizer_json: Some(&tok), tensors: &c.tensors, ..Default::default() }).unwrap_err();
        assert_eq!((e.file.as_str(), e.field.as_str()), ("config.json", field), "{e}");
    }
    let config = serde_json::to_vec(&c.config).unwrap();
    let e =
        build(&HfInput { config: &config, tokenizer_model: Some(&[0x0A, 0xFF]), tensors: &c.tensors, ..Default::default() }).unwrap_err();
    assert_eq!(e.file, "tokenizer.model", "{e}");
    let e = build(&HfInput { config: &config, tensors: &c.tensors, ..Default::default() }).unwrap_err();
    assert_eq!(e.kind, Kind::NotFound, "{e}");
}
