//! weightstream-hf2gguf: a Hugging Face checkpoint directory described as
//! the GGUF llama.cpp would load after convert_hf_to_gguf.py `--outtype
//! bf16` (the vendored llama.cpp's conversion code is the reference): its
//! metadata keys with their types, and the tensor map (GGUF name, shape,
//! type, source tensors, llama's q/k row order). No Python, no torch.
//!
//! Every input is untrusted: config.json fields are range-checked and
//! compared with the tensors before anything is sized from them, the
//! tokenizer files are parsed by serde and prost, and whatever llama.cpp
//! would abort on (duplicate token text, zero heads, more experts per
//! token than experts, an id outside the vocabulary) is a typed [`HfError`]
//! naming the file and field.
//!
//! The caller reads the files (from a local directory or object storage)
//! and lists the tensors; [`build`] does the rest.

mod card;
mod class_defaults;
mod config;
mod error;
mod general;
mod hparams;
mod meta;
mod model_card;
mod model_id;
mod phi3;
mod rope_freqs;
mod sampling;
mod special;
mod tensors;
mod vocab;
mod vocab_bpe;
mod vocab_spm;

pub use error::{HfError, Kind, Result};
pub use hparams::{Arch, Hparams, ARCHS, MAX_EXPERTS, MAX_LAYERS};
pub use meta::{MappedTensor, Metadata, TensorType, Value};
pub use rope_freqs::Llama3Rope;
pub use tensors::TensorIn;

use config::{Config, CONFIG};
use error::{not_found, unsupported};

/// The files of a checkpoint directory the conversion reads (None:
/// absent), its name, and its tensors.
#[derive(Debug, Clone, Default)]
pub struct HfInput<'a> {
    /// The directory's name (convert derives `general.name` from it, and
    /// looks for "qwen3-reranker" in it).
    pub dir_name: &'a str,
    pub config: &'a [u8],
    pub tokenizer_json: Option<&'a [u8]>,
    pub tokenizer_config: Option<&'a [u8]>,
    pub tokenizer_model: Option<&'a [u8]>,
    pub added_tokens: Option<&'a [u8]>,
    pub chat_template_jinja: Option<&'a [u8]>,
    pub readme: Option<&'a [u8]>,
    /// Its sampling defaults become `general.sampling.*` (sampling.rs).
    pub generation_config: Option<&'a [u8]>,
    /// modules.json is present (a sentence-transformers model).
    pub has_modules_json: bool,
    pub tensors: &'a [TensorIn],
}

/// The most tokens a vocabulary may have.
pub const MAX_VOCAB: u32 = 1 << 24;

/// The files [`build`] reads, by name in the checkpoint directory.
pub const FILES: [&str; 8] = [
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "added_tokens.json",
    "chat_template.jinja",
    "README.md",
    "generation_config.json",
];

/// Qwen3Model._is_qwen3_reranker: "# qwen3-reranker" in README.md, or the
/// directory's or `_name_or_path`'s name, lowercased.
fn is_reranker(input: &HfInput, cfg: &Config) -> bool {
    let names = [input.dir_name, cfg.str_of("_name_or_path").unwrap_or("")];
    let readme = input.readme.map(|r| String::from_utf8_lossy(r).to_lowercase()).unwrap_or_default();
    names.iter().any(|n| {
        let n = n.to_lowercase();
        n.contains("qwen3-reranker") || n.contains("qwen3-vl-reranker")
    }) || readme.contains("# qwen3-reranker")
        || readme.contains("# qwen3-vl-reranker")
}

fn utf8<'a>(file: &str, bytes: &'a [u8]) -> Result<&'a str> {
    std::str::from_utf8(bytes).map_err(|e| error::format_err(file, "(whole file)", format!("not UTF-8: {e}")))
}

/// Phi3MiniModel.set_vocab: tokenizer_config.json's `tokenizer_class`
/// (which it requires when the file exists) picks Phi-4's byte-level BPE
/// (`GPT2Tokenizer`) or else the SentencePiece tokenizer.model.
fn phi3_vocab(
    input: &HfInput,
    tc: Option<&serde_json::Value>,
    tok: Option<&vocab_bpe::TokenizerJson>,
    n_vocab: u32,
) -> Result<vocab::Vocab> {
    if let Some(tc) = tc {
        let class = tc
            .get("tokenizer_class")
            .ok_or_else(|| not_found("tokenizer_config.json", "tokenizer_class", "missing (convert reads it for Phi-3)"))?;
        if class.as_str() == Some("GPT2Tokenizer") {
            let tok = tok.ok_or_else(|| not_found(vocab_bpe::TOKENIZER_JSON, "(whole file)", "missing for a GPT2Tokenizer"))?;
            return vocab_bpe::vocab(tok, n_vocab);
        }
    }
    let model = input
        .tokenizer_model
        .ok_or_else(|| not_found(vocab_spm::TOKENIZER_MODEL, "(whole file)", "missing: Phi-3's vocabulary is SentencePiece"))?;
    let decoder = tc.and_then(|t| t.get("added_tokens_decoder"));
    vocab_spm::vocab_phi3(model, input.added_tokens, decoder, tok.map_or(&[][..], |t| &t.added_tokens[..]), n_vocab)
}

/// The metadata and tensor map of the checkpoint `input` describes.
pub fn build(input: &HfInput) -> Result<Metadata> {
    let mut cfg = Config::parse(input.config)?;
    let arch = hparams::arch_of(&cfg)?;
    // What convert sees: config.json through transformers' config class.
    class_defaults::fill(&mut cfg, arch);
    if cfg.get("text_config").is_some() {
        return Err(unsupported(CONFIG, "text_config", "a multimodal model: not supported"));
    }
    if arch.name.starts_with("qwen") && input.has_modules_json {
        // Qwen2Model._try_set_pooling_type: convert writes a pooling type.
        return Err(unsupported("modules.json", "(whole file)", "a sentence-transformers pooling model: not supported"));
    }
    if arch.name == "qwen3" && is_reranker(input, &cfg) {
        return Err(unsupported(CONFIG, "architectures", "a Qwen3 reranker (convert writes its classifier head): not supported"));
    }
    // Hyperparameters and tensors first (the name heuristics need the
    // parameter count), written after the general keys as convert orders them.
    let mut body = Metadata::default();
    // Phi-3's converter writes its own keys, not the common ones.
    let hp = if arch.name == "phi3" { phi3::hparams(&cfg, &mut body)? } else { hparams::hparams(&cfg, arch, &mut body)? };
    body.tensors = tensors::map(input.tensors, arch, &hp)?;
    if arch.name == "phi3" {
        body.unfused = tensors::unfused(&body.tensors, &hp);
        let factors = phi3::rope_factors(&cfg, &hp, &mut body)?;
        body.tensors.extend(factors);
    }
    let total = general::params(&body, &hp).0;
    let mut meta = Metadata::default();
    meta.set("general.architecture", Value::Str(arch.name.into()));
    // _name_or_path only when it is a model id, not a filesystem path.
    let name_or_path = cfg.str_of("_name_or_path").filter(|p| p.matches('/').count() <= 1);
    let card = card::Card::parse(input.readme.map(model_card::front_matter).transpose()?.flatten().as_ref(), total)?;
    if !general::write_head(&mut meta, &card, &[name_or_path, Some(input.dir_name)], total) {
        general::write_size_label(&mut meta, &hp, &body);
    }
    card.write(&mut meta);
    sampling::write(input.generation_config, &mut meta)?;
    for (k, v) in body.kv {
        meta.set(k, v);
    }
    meta.tensors = body.tensors;
    meta.unfused = body.unfused;
    // The vocabulary is the embedding's rows (config.json's vocab_size, where
    // given, was checked equal to them): nothing below is sized from an
    // unchecked value.
    let n_vocab = meta.tensor("token_embd.weight").and_then(|t| t.shape.first()).copied().unwrap_or(0);
    // Sixteen million tokens: 60 times the largest vocabulary in use, and a
    // bound on what the token table below allocates whatever the tensor list says.
    let n_vocab = u32::try_from(n_vocab).ok().filter(|&n| (1..=MAX_VOCAB).contains(&n)).ok_or_else(|| {
        error::format_err(tensors::TENSORS, "model.embed_tokens.weight", format!("{n_vocab} rows: a vocabulary of 1..={MAX_VOCAB} tokens"))
    })?;
    let llama = arch.name == "llama";
    if llama && matches!(n_vocab, 32016 | 49152) {
        // LlamaModel.set_vocab adds CodeLlama's infill tokens / Granite's add_bos.
        return Err(unsupported(CONFIG, "vocab_size", format!("{n_vocab} (CodeLlama or Granite small): not supported")));
    }
    let tc: Option<serde_json::Value> =
        input.tokenizer_config.map(|b| serde_json::from_slice(b).map_err(|e| error::json_err("tokenizer_config.json", e))).transpose()?;
    let tok = input.tokenizer_json.map(vocab_bpe::parse).transpose()?;
    if llama {
        if let Some(aps) = tc.as_ref().and_then(|t| t.get("add_prefix_space")).and_then(serde_json::Value::as_bool) {
            meta.set("tokenizer.ggml.add_space_prefix", Value::Bool(aps));
        }
    }
    let decoder = tc.as_ref().and_then(|t| t.get("added_tokens_decoder"));
    let vocab = if arch.name == "phi3" {
        phi3_vocab(input, tc.as_ref(), tok.as_ref(), n_vocab)?
    } else {
        // convert tries SentencePiece first, then tokenizer.json.
        match (input.tokenizer_model, &tok) {
            (Some(model), _) => vocab_spm::vocab(model, input.added_tokens, decoder, n_vocab)?,
            (None, Some(tok)) => vocab_bpe::vocab(tok, n_vocab)?,
            (None, None) => {
                return Err(not_found(
                    "tokenizer.json",
                    "(whole file)",
                    "no tokenizer.json or tokenizer.model: llama.cpp needs a vocabulary",
                ))
            }
        }
    };
    vocab.write(&mut meta)?;
    let jinja = input.chat_template_jinja.map(|b| utf8("chat_template.jinja", b)).transpose()?;
    let sources = special::Sources {
        post_processor: tok.as_ref().and_then(|t| t.post_processor.as_ref()),
        normalizer: tok.as_ref().and_then(|t| t.normalizer.as_ref()),
        added: tok.as_ref().map_or(&[][..], |t| &t.added_tokens[..]),
        tokenizer_config: tc.as_ref(),
        chat_template_jinja: jinja,
        config: &cfg,
        n_vocab,
        limit: vocab.special_limit,
    };
    special::write(&sources, &mut meta)?;
    Ok(meta)
}
