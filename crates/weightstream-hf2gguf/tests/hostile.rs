//! Hostile checkpoint directories: every one that made llama.cpp abort
//! the host process through the C adapter, or load what convert refuses
//! (issue 41), is a typed refusal naming the file and field, decided
//! before anything is sized from the value. Each case mutates one valid
//! tiny checkpoint, which itself builds.

mod common;

use common::{llama, moe, refused, run};
use serde_json::{json, Value};
use weightstream_hf2gguf::{build, HfInput, Kind, Value as Meta};

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
    c.config.as_object_mut().unwrap().remove("intermediate_size");
    refused(&c, Kind::Format, "config.json", "prefix_dense_intermediate_size");
    let mut c = moe();
    c.config["num_experts_per_tok"] = json!(5);
    refused(&c, Kind::Format, "config.json", "num_experts_per_tok");
    let mut c = moe();
    c.config["num_experts_per_tok"] = json!(0);
    refused(&c, Kind::Format, "config.json", "num_experts_per_tok");
}

/// Fields config.json leaves out are what transformers' config class
/// gives convert (class_defaults.rs), or refused where they disagree.
#[test]
fn absent_fields_take_the_config_class_defaults() {
    let mut c = llama();
    for k in ["rms_norm_eps", "max_position_embeddings", "num_key_value_heads", "rope_theta"] {
        c.config.as_object_mut().unwrap().remove(k);
    }
    c.tensors.iter_mut().filter(|t| t.name.contains(".k_proj.") || t.name.contains(".v_proj.")).for_each(|t| t.shape[0] = 64);
    let m = run(&c).unwrap();
    assert_eq!(m.get("llama.attention.layer_norm_rms_epsilon"), Some(&Meta::F32(1e-6)));
    assert_eq!(m.get("llama.context_length"), Some(&Meta::U32(2048)));
    assert_eq!(m.get("llama.attention.head_count_kv"), Some(&Meta::U32(4)), "LlamaConfig: as many as heads");
    assert_eq!(m.get("llama.rope.freq_base"), Some(&Meta::F32(10000.0)));
    // MistralConfig's 8 KV heads do not divide these 4 heads; LlamaConfig's
    // 32000 tokens are not the embedding's 16 rows.
    c.config["architectures"] = json!(["MistralForCausalLM"]);
    refused(&c, Kind::Format, "config.json", "num_key_value_heads");
    let mut c = llama();
    c.config.as_object_mut().unwrap().remove("vocab_size");
    refused(&c, Kind::Format, "tensors", "model.embed_tokens.weight");
    let mut c = moe();
    c.config.as_object_mut().unwrap().remove("num_experts_per_tok");
    refused(&c, Kind::Format, "config.json", "num_experts_per_tok"); // Qwen3MoeConfig's 8 of 4 experts
}

#[test]
fn config_values_that_disagree_with_the_tensors_are_refused_before_sizing_anything() {
    // 30 million tokens: refused against the embedding's 16 rows, at once.
    let mut c = llama();
    c.config["vocab_size"] = json!(30_000_000);
    refused(&c, Kind::Format, "tensors", "model.embed_tokens.weight");
    // 2^32 - 1 experts: past llama.cpp's 512, refused before the tensors
    // (whose router rows, 4, disagree too); nothing is sized from it.
    let mut c = moe();
    c.config["num_experts"] = json!(4294967295u64);
    refused(&c, Kind::Format, "config.json", "num_experts");
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

/// An expert count is the expert tensors' (issue 55): a dense Qwen2 with
/// `num_experts: 4294967295` wrote `qwen2.expert_count = 4294967295`,
/// and llama.cpp (LLAMA_MAX_EXPERTS, 512) aborted on the GGUF.
#[test]
fn an_expert_count_the_tensors_do_not_have_is_refused() {
    let mut dense = llama();
    dense.config["architectures"] = json!(["Qwen2ForCausalLM"]);
    run(&dense).unwrap();
    for (key, n) in [("num_experts", 4294967295u64), ("num_experts", 4), ("num_local_experts", 1), ("n_routed_experts", 512)] {
        let mut c = llama();
        c.config["architectures"] = json!(["Qwen2ForCausalLM"]);
        c.config[key] = json!(n);
        // One expert per token: what the count's other check accepts.
        c.config["num_experts_per_tok"] = json!(1);
        refused(&c, Kind::Format, "config.json", key);
    }
    // 0 experts in a dense model is what convert writes as 0: llama.cpp takes it.
    dense.config["num_experts"] = json!(0);
    assert_eq!(run(&dense).unwrap().get("qwen2.expert_count"), Some(&Meta::U32(0)));
    // A MoE model: at most 512, at least 1, and as many as its expert tensors.
    let mut c = moe();
    c.config["num_experts"] = json!(513);
    refused(&c, Kind::Format, "config.json", "num_experts");
    let mut c = moe();
    c.config["num_experts"] = json!(0);
    c.config["num_experts_per_tok"] = json!(0);
    refused(&c, Kind::Format, "config.json", "num_experts");
    let mut c = moe();
    c.tensors.retain(|t| !t.name.contains(".mlp."));
    refused(&c, Kind::NotFound, "tensors", "blk.0.ffn_up_exps.weight");
    let mut c = moe();
    c.config["num_experts"] = json!(5);
    refused(&c, Kind::Format, "tensors", "model.layers.0.mlp.gate.weight");
    let m = run(&moe()).unwrap();
    assert_eq!(m.get("qwen3moe.expert_count"), Some(&Meta::U32(4)));
    assert_eq!(m.tensor("blk.0.ffn_gate_exps.weight").unwrap().shape[0], 4);
}
