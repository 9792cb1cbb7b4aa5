//! `hf_metadata`: Hugging Face checkpoint directories through
//! weightstream-hf2gguf, the builder whose C predecessor let hostile
//! configs abort the host process (issue 41). The input is a list of
//! mutations of one valid tiny checkpoint (a Llama, a Qwen3-MoE or a
//! Phi-3 with longrope factors: a config field set to an edge value, a
//! token or tensor changed, a file replaced by raw bytes: config.json,
//! tokenizer.json, tokenizer.model, README.md, tokenizer_config.json,
//! generation_config.json; or README.md generated: alias bombs and long
//! lists, issue 55), so
//! the fuzzer spends its time past the parsers. `build` must return, never
//! panic, and whatever it accepts must be what llama.cpp can take: token
//! texts distinct, as many tokens as embedding rows, every source a valid
//! tensor, every key once, special ids inside the vocabulary.

use serde_json::{json, Value};
use weightstream_hf2gguf::{build, HfInput, TensorIn, Value as Meta};

const SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

const FIELDS: &[&str] = &[
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "vocab_size",
    "head_dim",
    "num_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "bos_token_id",
    "eos_token_id",
    "pad_token_id",
    "max_position_embeddings",
    "rms_norm_eps",
    "rope_theta",
    "rope_scaling",
    "architectures",
    "tie_word_embeddings",
    "text_config",
    "is_causal",
    "_name_or_path",
    "partial_rotary_factor",
    "original_max_position_embeddings",
    "sliding_window",
];

fn edge(b: u8) -> Value {
    match b % 16 {
        0 => json!(0),
        1 => json!(1),
        2 => json!(-1),
        3 => json!(4294967296u64),
        4 => json!(u64::MAX),
        5 => json!(2),
        6 => json!(3),
        7 => json!(1.5),
        8 => json!("7"),
        9 => Value::Null,
        10 => json!([1, 2]),
        11 => json!({"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": b as i64 - 128}),
        12 => json!(["Qwen3MoeForCausalLM"]),
        13 => json!(513),
        14 => json!(64),
        _ => json!(30_000_000),
    }
}

fn t(name: String, shape: &[u64]) -> TensorIn {
    TensorIn { name, shape: shape.to_vec() }
}

/// The tiny Llama as a Phi-3: q/k/v and gate/up fused, Phi-4's byte-level
/// BPE path (tokenizer_config.json's GPT2Tokenizer), longrope over 0.75
/// of each head (6 factors each).
fn phi3() -> (Value, Value, Vec<TensorIn>) {
    let (mut config, tok, mut ts) = base(false);
    config["architectures"] = json!(["Phi3ForCausalLM"]);
    config["partial_rotary_factor"] = json!(0.75);
    config["max_position_embeddings"] = json!(512);
    config["original_max_position_embeddings"] = json!(128);
    config["rope_scaling"] = json!({"type": "longrope", "long_factor": [1.0, 1.5, 2.0, 2.5, 3.0, 0.1], "short_factor": [1, 1, 1, 1, 1, 1]});
    ts.retain(|t| !t.name.contains("_proj."));
    for l in 0..2 {
        for (s, shape) in [
            ("self_attn.qkv_proj.weight", [128u64, 64]),
            ("self_attn.o_proj.weight", [64, 64]),
            ("mlp.gate_up_proj.weight", [256, 64]),
            ("mlp.down_proj.weight", [64, 128]),
        ] {
            ts.push(t(format!("model.layers.{l}.{s}"), &shape));
        }
    }
    (config, tok, ts)
}

/// The valid tiny checkpoint (a Llama; or with `moe`, its 4-expert Qwen3-MoE).
fn base(moe: bool) -> (Value, Value, Vec<TensorIn>) {
    let mut config = json!({
        "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 16, "bos_token_id": 1, "eos_token_id": 2,
        "rms_norm_eps": 1e-5
    });
    let vocab: serde_json::Map<String, Value> = (0..14).map(|i| (format!("t{i}"), json!(i))).collect();
    let tokenizer = json!({
        "model": {"type": "BPE", "vocab": vocab, "merges": ["t t1", ["t", "t2"]]},
        "added_tokens": [{"id": 14, "content": "<|begin|>", "special": true}, {"id": 15, "content": "x\u{2581}y", "special": false}],
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": SPLIT}}, {"type": "ByteLevel", "use_regex": false}]},
        "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|begin|>"}}, {"Sequence": {"id": "A"}}]}
    });
    let mut ts = vec![t("model.embed_tokens.weight".into(), &[16, 64]), t("model.norm.weight".into(), &[64])];
    for l in 0..2 {
        for (s, shape) in [
            ("input_layernorm.weight", &[64u64][..]),
            ("post_attention_layernorm.weight", &[64]),
            ("self_attn.q_proj.weight", &[64, 64]),
            ("self_attn.k_proj.weight", &[32, 64]),
            ("self_attn.v_proj.weight", &[32, 64]),
            ("self_attn.o_proj.weight", &[64, 64]),
        ] {
            ts.push(t(format!("model.layers.{l}.{s}"), shape));
        }
        if moe {
            ts.push(t(format!("model.layers.{l}.mlp.gate.weight"), &[4, 64]));
            for x in 0..4 {
                for (p, s) in [("gate_proj", [32, 64]), ("up_proj", [32, 64]), ("down_proj", [64, 32])] {
                    ts.push(t(format!("model.layers.{l}.mlp.experts.{x}.{p}.weight"), &s));
                }
            }
        } else {
            for (p, s) in [("gate_proj", [128, 64]), ("up_proj", [128, 64]), ("down_proj", [64, 128])] {
                ts.push(t(format!("model.layers.{l}.mlp.{p}.weight"), &s));
            }
        }
    }
    if moe {
        config["architectures"] = json!(["Qwen3MoeForCausalLM"]);
        config["num_experts"] = json!(4);
        config["num_experts_per_tok"] = json!(2);
        config["moe_intermediate_size"] = json!(32);
    }
    (config, tokenizer, ts)
}

/// A model card of `n` items: `b % 4` picks an alias bomb (an anchored
/// scalar of `a + 1` KiB aliased `n` times), a list of `n` base models,
/// datasets or tags, anchors nested `n` deep (at most 63), or a mapping of
/// `n` keys before the card's own.
fn readme(a: u8, b: u8, n: usize) -> Vec<u8> {
    let mut y = String::from("---\nlicense: mit\n");
    match b % 4 {
        0 => {
            y += &format!("big: &big {}\ndatasets:\n", "x".repeat((a as usize + 1) << 10));
            y += &"- *big\n".repeat(n);
        }
        1 => {
            y += &format!("{}:\n", ["datasets", "base_model", "tags"][a as usize % 3]);
            (0..n).for_each(|i| y += &format!("- org{i}/set-{}-v{a}\n", i % 7));
        }
        2 => {
            y += &format!("a0: &a0 {}\n", "y".repeat((a as usize + 1) << 8));
            (1..n.min(63)).for_each(|i| y += &format!("a{i}: &a{i} [*a{}, *a{}]\n", i - 1, i - 1));
        }
        _ => {
            (0..n).for_each(|i| y += &format!("k{i}: v{i}\n"));
            y += "datasets: [org/x]\nmodel_name: m\n";
        }
    }
    (y + "---\n# Model\n").into_bytes()
}

pub fn hf_metadata(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else { return };
    // A Llama, a Qwen3-MoE, a Phi-3 (whose converter reads tokenizer_config.json).
    let (mut config, mut tok, mut tensors) = if first % 3 == 2 { phi3() } else { base(first % 3 == 1) };
    let tc = (first % 3 == 2).then(|| br#"{"tokenizer_class": "GPT2Tokenizer"}"#.to_vec());
    // config, tokenizer.json, tokenizer.model, README.md, tokenizer_config.json, generation_config.json
    let mut raw: [Option<Vec<u8>>; 6] = Default::default();
    // A generated README.md: readme(a, b, 16^scale items).
    let mut card: Option<(u8, u8, u32)> = None;
    let mut ops = rest.chunks(3);
    for op in ops.by_ref() {
        let [kind, a, b] = [op[0], *op.get(1).unwrap_or(&0), *op.get(2).unwrap_or(&0)];
        match kind % 8 {
            0 | 1 => config[FIELDS[a as usize % FIELDS.len()]] = edge(b),
            2 => {
                // A vocab entry's id, or an added token's id or text.
                let i = a as usize % 14;
                if b & 1 == 0 {
                    tok["model"]["vocab"][format!("t{i}")] = json!(b as i64 / 2 - 20);
                } else {
                    tok["added_tokens"][(a % 2) as usize][if b & 2 == 0 { "id" } else { "content" }] =
                        if b & 2 == 0 { json!(b as i64 / 4 - 10) } else { json!(format!("t{}", b % 16)) };
                }
            }
            3 if !tensors.is_empty() => {
                // A tensor dropped, duplicated, or reshaped.
                let i = a as usize % tensors.len();
                match b % 4 {
                    0 => drop(tensors.remove(i)),
                    1 => tensors.push(tensors[i].clone()),
                    2 => tensors[i].shape = vec![b as u64 % 9, 64],
                    _ => tensors[i].name = format!("model.layers.{}.mlp.experts.{}.up_proj.weight", a % 3, b % 7),
                }
            }
            4 => tok["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = json!(["x", SPLIT][(b & 1) as usize]),
            5 => {
                tok["post_processor"] =
                    [json!(null), json!({"type": "ByteLevel"}), json!({"type": "RobertaProcessing"})][b as usize % 3].clone()
            }
            // A generated README.md (card.rs): each such op makes it 16
            // times bigger, so that a few reach the sizes that once cost
            // the machine (issue 55), while a random input rarely does.
            6 => card = Some((a, b, card.map_or(1, |c| (c.2 + 1).min(5)))),
            // The rest of the input as one file's raw bytes.
            _ => {
                let bytes: Vec<u8> = ops.by_ref().flatten().copied().collect();
                raw[a as usize % raw.len()] = Some(bytes);
                break;
            }
        }
    }
    if let (None, Some((a, b, scale))) = (&raw[3], card) {
        raw[3] = Some(readme(a, b, 16usize.pow(scale).min(1 << 17)));
    }
    let cfg = raw[0].take().unwrap_or_else(|| serde_json::to_vec(&config).expect("JSON"));
    let tj = raw[1].take().unwrap_or_else(|| serde_json::to_vec(&tok).expect("JSON"));
    let input = HfInput {
        dir_name: "fuzz",
        config: &cfg,
        tokenizer_json: Some(&tj),
        tokenizer_model: raw[2].as_deref(),
        readme: raw[3].as_deref(),
        tokenizer_config: raw[4].as_deref().or(tc.as_deref()),
        generation_config: raw[5].as_deref(),
        tensors: &tensors,
        ..Default::default()
    };
    let built = build(&input);
    // The unmutated checkpoints build: otherwise every input would be refused at once.
    assert!(!rest.is_empty() || built.is_ok(), "the base checkpoint is refused: {:?}", built.err());
    let Ok(meta) = built else { return };
    // Accepted: what llama.cpp takes without aborting.
    let rows = meta.tensor("token_embd.weight").expect("an accepted model has embeddings").shape[0];
    let Some(Meta::StrArray(tokens)) = meta.get("tokenizer.ggml.tokens") else { panic!("no tokens") };
    assert_eq!(tokens.len() as u64, rows, "one token per embedding row");
    let mut sorted: Vec<&String> = tokens.iter().collect();
    sorted.sort();
    assert!(sorted.windows(2).all(|w| w[0] != w[1]), "duplicate token text accepted");
    let mut keys: Vec<&str> = meta.kv.iter().map(|(k, _)| k.as_str()).collect();
    keys.sort();
    assert!(keys.windows(2).all(|w| w[0] != w[1]), "a key twice");
    for m in &meta.tensors {
        // Read from sources, or computed (rope factors).
        assert!(!m.sources.is_empty() || !m.generated.is_empty(), "{}: no data", m.name);
        assert!(m.sources.iter().all(|&s| s < tensors.len()), "{}: bad sources", m.name);
    }
    for (k, v) in &meta.kv {
        if let (true, Meta::U32(id)) = (k.ends_with("_token_id"), v) {
            assert!((*id as u64) < rows, "{k} = {id} outside {rows} tokens");
        }
    }
}
