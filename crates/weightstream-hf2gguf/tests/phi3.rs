//! Phi-3 (phi3.rs, vocab_spm.rs's Phi-3 path): a tiny valid checkpoint
//! builds as conversion/phi.py's Phi3MiniModel writes it, and what that
//! converter raises on (or llama.cpp would abort on) is a typed refusal
//! naming the file and field, each case one mutation of it.

mod common;

use common::{llama, t, Ckpt};
use serde_json::{json, Value};
use weightstream_hf2gguf::{build, HfError, HfInput, Kind, Value as Meta};

/// A SentencePiece tokenizer.model of `pieces` (text, score, type),
/// protobuf-encoded by hand: ModelProto.pieces (1) of piece (1), score
/// (2), type (3).
fn spm(pieces: &[(&str, f32, u8)]) -> Vec<u8> {
    let mut out = vec![];
    for (text, score, kind) in pieces {
        let mut p = vec![0x0A, text.len() as u8];
        p.extend(text.as_bytes());
        p.push(0x15);
        p.extend(score.to_le_bytes());
        p.extend([0x18, *kind]);
        out.extend([0x0A, p.len() as u8]);
        out.extend(p);
    }
    out
}

/// A tiny Phi-3: the Llama's sizes with q/k/v and gate/up fused, a
/// SentencePiece model of 12 pieces (vocab_size 16: 4 padded), and
/// Phi-3's files over it.
struct Phi3 {
    ckpt: Ckpt,
    model: Vec<u8>,
    tokenizer_config: Value,
    added_tokens: Value,
}

fn phi3() -> Phi3 {
    let mut c = llama();
    c.config["architectures"] = json!(["Phi3ForCausalLM"]);
    c.config["eos_token_id"] = json!(12);
    c.tensors.retain(|t| !t.name.contains("_proj."));
    for l in 0..2 {
        let p = |s: &str| format!("model.layers.{l}.{s}");
        c.tensors.extend([
            t(&p("self_attn.qkv_proj.weight"), &[128, 64]),
            t(&p("self_attn.o_proj.weight"), &[64, 64]),
            t(&p("mlp.gate_up_proj.weight"), &[256, 64]),
            t(&p("mlp.down_proj.weight"), &[64, 128]),
        ]);
    }
    c.tokenizer = json!({"added_tokens": [{"id": 12, "content": "<|endoftext|>", "special": true}]});
    let mut pieces = vec![("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3)];
    let letters: Vec<String> = (0..9).map(|i| format!("\u{2581}{}", (b'a' + i) as char)).collect();
    pieces.extend(letters.iter().enumerate().map(|(i, s)| (s.as_str(), -(i as f32), 1)));
    let tokenizer_config = json!({"tokenizer_class": "LlamaTokenizer", "eos_token": "<|endoftext|>",
        "added_tokens_decoder": {"13": {"content": "<|assistant|>", "special": true}, "14": {"content": "<|x\u{2581}y|>", "special": false}}});
    Phi3 { ckpt: c, model: spm(&pieces), tokenizer_config, added_tokens: json!({"<|system|>": 15, "<|beyond|>": 99}) }
}

fn run_phi3(p: &Phi3) -> Result<weightstream_hf2gguf::Metadata, HfError> {
    let config = serde_json::to_vec(&p.ckpt.config).unwrap();
    let tok = serde_json::to_vec(&p.ckpt.tokenizer).unwrap();
    let tc = serde_json::to_vec(&p.tokenizer_config).unwrap();
    let added = serde_json::to_vec(&p.added_tokens).unwrap();
    build(&HfInput {
        dir_name: "tiny",
        config: &config,
        tokenizer_json: Some(&tok),
        tokenizer_config: Some(&tc),
        tokenizer_model: Some(&p.model),
        added_tokens: Some(&added),
        tensors: &p.ckpt.tensors,
        ..Default::default()
    })
}

#[track_caller]
fn phi3_refused(p: &Phi3, kind: Kind, file: &str, field: &str) {
    match run_phi3(p) {
        Ok(_) => panic!("{file} {field}: built, should be refused"),
        Err(e) => assert_eq!((e.kind, e.file.as_str(), e.field.as_str()), (kind, file, field), "{e}"),
    }
}

/// Phi-4-mini's rope: longrope over 0.75 of each head (12 of 16
/// dimensions: 6 factors each), a context 4x the original.
fn longrope(p: &mut Phi3) {
    p.ckpt.config["partial_rotary_factor"] = json!(0.75);
    p.ckpt.config["max_position_embeddings"] = json!(512);
    p.ckpt.config["original_max_position_embeddings"] = json!(128);
    p.ckpt.config["rope_scaling"] =
        json!({"type": "longrope", "long_factor": [1.0, 1.5, 2.0, 2.5, 3.0, 0.1], "short_factor": [1, 1, 1, 1, 1, 1]});
}

#[test]
fn phi3_builds_as_convert_writes_it() {
    let m = run_phi3(&phi3()).unwrap();
    assert_eq!(m.get("general.architecture"), Some(&Meta::Str("phi3".into())));
    assert_eq!(m.get("phi3.rope.dimension_count"), Some(&Meta::U32(16)));
    // Phi3Config's class defaults where config.json has none.
    assert_eq!(m.get("phi3.attention.sliding_window"), Some(&Meta::U32(0)));
    assert_eq!(m.get("phi3.rope.scaling.original_context_length"), Some(&Meta::U32(4096)));
    assert_eq!(m.get("phi3.attention.key_length"), None);
    assert_eq!(m.tensor("blk.0.attn_qkv.weight").unwrap().shape, vec![128, 64]);
    assert_eq!(m.tensor("blk.1.ffn_up.weight").unwrap().shape, vec![256, 64]);
    let Some(Meta::StrArray(tokens)) = m.get("tokenizer.ggml.tokens") else { panic!("no tokens") };
    assert_eq!(&tokens[11..], ["\u{2581}i", "<|endoftext|>", "<|assistant|>", "<|x\u{2581}y|>", "<|system|>"]);
    assert_eq!(m.get("tokenizer.ggml.token_type"), Some(&Meta::I32Array(vec![2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 4, 4])));
    assert_eq!(m.get("tokenizer.ggml.eos_token_id"), Some(&Meta::U32(12)));
    let mut p = phi3();
    longrope(&mut p);
    let m = run_phi3(&p).unwrap();
    assert_eq!(m.get("phi3.rope.dimension_count"), Some(&Meta::U32(12)));
    // sqrt(1 + ln 4 / ln 128), rounded to f32.
    assert_eq!(m.get("phi3.rope.scaling.attn_factor"), Some(&Meta::F32(1.1338934)));
    let long = m.tensor("rope_factors_long.weight").unwrap();
    assert_eq!((long.shape.clone(), long.generated[5]), (vec![6], 0.1f32.to_bits()));
    assert_eq!(m.tensor("rope_factors_short.weight").unwrap().generated, vec![1.0f32.to_bits(); 6]);
}

type Case = (fn(&mut Phi3), Kind, &'static str, &'static str);

/// Each case mutates the valid tiny Phi-3 (or its longrope form).
fn phi3_cases(cases: &[Case]) {
    for (mutate, kind, file, field) in cases {
        let mut p = phi3();
        mutate(&mut p);
        phi3_refused(&p, *kind, file, field);
    }
}

#[test]
fn phi3_values_convert_raises_on_are_refused() {
    const LONG: &str = "rope_scaling.long_factor";
    phi3_cases(&[
        (|p| (longrope(p), p.ckpt.config["rope_scaling"]["long_factor"] = json!([1.0, 2.0])).1, Kind::Format, "config.json", LONG),
        (
            |p| (longrope(p), p.ckpt.config["rope_scaling"]["long_factor"][2] = json!("3")).1,
            Kind::Format,
            "config.json",
            "rope_scaling.long_factor[2]",
        ),
        // Finite as a float64, infinite as the float32 convert writes.
        (
            |p| (longrope(p), p.ckpt.config["rope_scaling"]["long_factor"][2] = json!(1e300)).1,
            Kind::Format,
            "config.json",
            "rope_scaling.long_factor[2]",
        ),
        (
            |p| drop((longrope(p), p.ckpt.config["rope_scaling"].as_object_mut().unwrap().remove("short_factor"))),
            Kind::Format,
            "config.json",
            "rope_scaling.short_factor",
        ),
        // Long factors with the default type: convert's NotImplementedError.
        (
            |p| (longrope(p), p.ckpt.config["rope_scaling"]["type"] = json!("default")).1,
            Kind::Unsupported,
            "config.json",
            "rope_scaling.rope_type",
        ),
        (
            |p| (longrope(p), p.ckpt.config["rope_scaling"]["type"] = json!("dynamic")).1,
            Kind::Unsupported,
            "config.json",
            "rope_scaling.rope_type",
        ),
        // A context past an original of 1: convert divides by log(1).
        (
            |p| (longrope(p), p.ckpt.config["original_max_position_embeddings"] = json!(1)).1,
            Kind::Format,
            "config.json",
            "original_max_position_embeddings",
        ),
        // 0.1 of 64: 6 // 4 = 1 rotary dimension, odd.
        (|p| p.ckpt.config["partial_rotary_factor"] = json!(0.1), Kind::Format, "config.json", "partial_rotary_factor"),
        (|p| p.ckpt.config["head_dim"] = json!(32), Kind::Unsupported, "config.json", "head_dim"),
        (|p| p.ckpt.config["sliding_window"] = json!(-1), Kind::Format, "config.json", "sliding_window"),
        // Fused tensors checked against the config; an unfused gate refused.
        (|p| p.ckpt.config["intermediate_size"] = json!(256), Kind::Format, "tensors", "model.layers.0.mlp.gate_up_proj.weight"),
        (|p| p.ckpt.config["num_key_value_heads"] = json!(4), Kind::Format, "tensors", "model.layers.0.self_attn.qkv_proj.weight"),
        (
            |p| p.ckpt.tensors.push(t("model.layers.0.mlp.gate_proj.weight", &[128, 64])),
            Kind::Unsupported,
            "tensors",
            "model.layers.0.mlp.gate_proj.weight",
        ),
    ]);
}

#[test]
fn phi3_tokenizer_files_convert_raises_on_are_refused() {
    phi3_cases(&[
        // Ids past vocab_size or negative: convert's Phi-3 loop indexes its list with them.
        (
            |p| p.tokenizer_config["added_tokens_decoder"]["16"] = json!({"content": "<|x|>", "special": true}),
            Kind::Format,
            "tokenizer_config.json",
            "added_tokens_decoder.16",
        ),
        (|p| p.ckpt.tokenizer["added_tokens"][0]["id"] = json!(-1), Kind::Format, "tokenizer.json", "added_tokens[0].id"),
        (|p| p.added_tokens["<|neg|>"] = json!(-2), Kind::Format, "added_tokens.json", "\"<|neg|>\""),
        // More pieces than vocab_size.
        (
            |p| {
                p.ckpt.config["vocab_size"] = json!(8);
                p.ckpt.tensors.iter_mut().filter(|t| t.shape.first() == Some(&16)).for_each(|t| t.shape[0] = 8);
            },
            Kind::Format,
            "tokenizer.model",
            "pieces",
        ),
        (
            |p| drop(p.tokenizer_config.as_object_mut().unwrap().remove("tokenizer_class")),
            Kind::NotFound,
            "tokenizer_config.json",
            "tokenizer_class",
        ),
        // Two ids with one text (llama.cpp aborts), through the added tokens.
        (|p| p.added_tokens["\u{2581}a"] = json!(15), Kind::Format, "tokenizer.model", "tokens"),
    ]);
}
