#!/usr/bin/env python3
"""Hugging Face checkpoints for the llama.cpp adapter test, each with its
reference GGUF:

    python plugins/llamacpp/tests/make_hf_models.py OUT_DIR LLAMA_CPP_SRC

(needs torch, transformers, tokenizers and compressed-tensors: run it with
the vLLM venv's python, scripts/setup_vllm.sh.)

For each architecture (llama, qwen2 with tied embeddings, qwen3, qwen3moe
with 4 experts; and llama again with Llama 3.1's rope scaling,
llama3rope-bf16/) a tiny random model
with a small byte-level BPE tokenizer (tokenizer.json,
tokenizer_config.json), saved as

- ARCH-bf16/: the transformers checkpoint itself;
- ARCH-fp8/, ARCH-nvfp4-modelopt/, ARCH-nvfp4-ct/, ARCH-int4-ct/: its
  linear layers in block FP8, NVFP4 (ModelOpt and compressed-tensors) and
  compressed-tensors INT4 (tests/fixtures/hf_models.py writes them and the BF16
  checkpoints of their reference dequantizations);

and a tiny Mistral with a SentencePiece tokenizer.model (mistral-bf16/,
mistral-fp8/); a tiny Phi-3 (fused qkv_proj, gate_up_proj) with a
SentencePiece tokenizer.model and Phi-3's added tokens (phi3-bf16/,
phi3-fp8/), its longrope variant (phi3longrope-bf16/: factor tensors
and attention factor) and Phi-4's byte-level BPE tokenizer
(phi4bpe-bf16/: tokenizer_class GPT2Tokenizer);

qwen3's config.json leaves out max_position_embeddings, rms_norm_eps and
rope_theta (convert writes Qwen3Config's defaults); llama, qwen2 and phi3
carry README.md model cards (general.license, .tags, .base_model.*, ...);
llama and qwen3 carry generation_config.json sampling defaults
(general.sampling.*);

and for each of those, NAME.ref-bf16.gguf: what the vendored llama.cpp's
convert_hf_to_gguf.py --outtype bf16 writes from the reference BF16
checkpoint. Those are what llama.cpp loads normally; the adapter, given
the quantized directory, must produce the same logits bit for bit.

Checkpoints the adapter must refuse, naming what it cannot convert:
unsupported-arch/ (qwen2-bf16 declared Gemma2ForCausalLM),
unsupported-tensor/ (llama-bf16 with a tensor llama.cpp has no name for,
model.layers.0.mlp.extra_proj.weight), unsupported-reranker/ (qwen3-bf16
whose README says Qwen3-Reranker) and unsupported-pooling/ (qwen2-bf16
with a sentence-transformers modules.json); and hostile ones the adapter
must refuse instead of letting llama.cpp abort: hostile-heads/
(num_attention_heads 0), hostile-vocab/ (an added token repeating a
vocabulary token's text), hostile-experts/ (a dense Qwen2 declaring
4294967295 experts, which llama.cpp asserts are at most 512).

convert_hf_to_gguf.py names the BPE pre-tokenizer by hashing the token ids
the tokenizer gives for a test text: a tokenizer made up here matches no
known hash, so the test pins the name the adapter uses for the architecture
(llama-bpe for llama, qwen2 for the Qwen models) instead.
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

COMMON = dict(vocab_size=384, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-5, tie_word_embeddings=False)
ARCHS = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
    # tied embeddings (no lm_head.weight), as Qwen2.5-0.5B/1.5B have
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {"rope_theta": 1000000.0, "tie_word_embeddings": True}),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {"head_dim": 48}),
    "qwen3moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                 {"head_dim": 32, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64,
                  "decoder_sparse_step": 1, "mlp_only_layers": [], "norm_topk_prob": True}),
}
# Mistral (the llama architecture) with a SentencePiece tokenizer.model, as
# Llama 2 and Mistral up to v0.3 have: convert reads it with sentencepiece.
ARCHS["mistral"] = ("MistralConfig", "MistralForCausalLM", {"head_dim": 32, "sliding_window": None})
# Phi-3 (fused qkv_proj and gate_up_proj) with a SentencePiece tokenizer.model
# and Phi-3's added tokens; config.json as Phi-3-mini-4k writes it (phi3_config).
ARCHS["phi3"] = ("Phi3Config", "Phi3ForCausalLM", {"sliding_window": 255})
PRE = {"llama": "llama-bpe", "qwen2": "qwen2", "qwen3": "qwen2", "qwen3moe": "qwen2"}
FORMATS = ("bf16", "fp8", "nvfp4-modelopt", "nvfp4-ct", "int4-ct")
# CI time: the SentencePiece model in two formats only (its weights take the same paths as llama's).
ARCH_FORMATS = {"mistral": ("bf16", "fp8"), "phi3": ("bf16", "fp8")}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "added_tokens.json", "README.md")
# generation_config.json's sampling defaults, as Llama 3.1 Instruct's and
# Qwen3's are (gguf-py writes them as general.sampling.*; "do_sample" and
# the token ids it ignores).
GENERATION = {
    "llama": {"do_sample": True, "temperature": 0.6, "top_p": 0.9},
    "qwen3": {"do_sample": True, "temperature": 0.6, "top_k": 20, "top_p": 0.95, "repetition_penalty": 1.05},
}
# Model cards as real ones begin (gguf-py's Metadata.load reads their YAML
# front matter into general.license, .tags, .languages, .base_model.*,
# .dataset.*, and the name fields): a base model as an id, a list of ids
# and URLs, datasets by id and URL, a license list and link, a pipeline
# tag, Norway's "no", a model_name that becomes general.name, keys convert
# ignores (library_name, widget).
README = {
    "llama": """---
license: llama3.1
language:
- en
- de
- no
pipeline_tag: text-generation
tags:
- facebook
- meta
- llama-3
base_model: meta-llama/Llama-3.1-8B
datasets:
- HuggingFaceFW/fineweb-edu
- https://huggingface.co/datasets/allenai/c4
extra_gated_prompt: "### LLAMA 3.1 COMMUNITY LICENSE AGREEMENT"
---

# Tiny Llama
""",
    "qwen2": """---
license: other
license_name: qwen-research
license_link: https://huggingface.co/Qwen/Qwen2.5-3B/blob/main/LICENSE
language: en
base_model:
- Qwen/Qwen2.5-0.5B
- https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct
- unsloth/Qwen2.5-0.5B-v2.1-bnb-4bit
- name: Qwen2.5 Math
  organization: Qwen
  repo_url: https://huggingface.co/Qwen/Qwen2.5-Math-1.5B
tags: chat
library_name: transformers
---
# Qwen2.5-0.5B (tiny)
""",
    "phi3": """---
license:
- mit
- apache-2.0
license_link: https://huggingface.co/microsoft/Phi-3-mini-4k-instruct/resolve/main/LICENSE
language:
- en
pipeline_tag: text-generation
tags:
- nlp
- code
inference:
  parameters:
    temperature: 0.0
widget:
  - messages:
      - role: user
        content: Can you provide ways to eat combinations of bananas and dragonfruits?
model_name: Phi 3 Tiny Instruct
base_model: microsoft/Phi-3-mini-4k-instruct
dataset: https://huggingface.co/microsoft/orca-agentinstruct-1M-v1
---
""",
}


# The split regexes of Llama 3's and Qwen2's tokenizer.json (the adapter
# recognizes the pre-tokenizer by them).
REGEX = {
    "llama-bpe": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "qwen2": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
}


def tokenizer(out: Path, pre: str) -> None:
    """A byte-level BPE of 300 tokens trained on a few sentences, with the
    pre-tokenizer of the real ones (regex split, then ByteLevel) and two
    special tokens; the model's vocab_size (384) leaves ids with no token,
    which the GGUF pads."""
    from tokenizers import Regex, Tokenizer, decoders, models as tmodels, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(tmodels.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(REGEX[pre]), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>", "<|im_start|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    text = ["the quick brown fox jumps over the lazy dog", "weightstream streams quantized checkpoints",
            "llama.cpp loads GGUF files; Hugging Face writes safetensors", "a b c d e f g hello world 12345"] * 4
    tok.train_from_iterator(text, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", bos_token="<|endoftext|>")
    fast.save_pretrained(out)


def spm_tokenizer(out: Path) -> None:
    """A SentencePiece BPE of 320 pieces with byte fallback (<0x00>...),
    <unk> <s> </s> and a user-defined <extra> (which convert types NORMAL),
    and a tokenizer_config.json naming them, as Llama 2's has."""
    import io

    import sentencepiece as spm

    text = ["the quick brown fox jumps over the lazy dog", "weightstream streams quantized checkpoints",
            "llama.cpp loads GGUF files; Hugging Face writes safetensors", "a b c d e f g hello world 12345"] * 4
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(text), model_writer=model, vocab_size=320, model_type="bpe",
                                   byte_fallback=True, character_coverage=1.0, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
                                   user_defined_symbols=["<extra>"], minloglevel=2)
    (out / "tokenizer.model").write_bytes(model.getvalue())
    special = {str(i): {"content": c, "special": True, "normalized": False, "lstrip": False, "rstrip": False}
               for i, c in enumerate(["<unk>", "<s>", "</s>"])}
    (out / "tokenizer_config.json").write_text(json.dumps({
        "add_bos_token": True, "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
        "added_tokens_decoder": special, "tokenizer_class": "LlamaTokenizer", "chat_template": "{{ bos_token }}{{ messages }}"}))


def phi3_tokenizer(out: Path) -> None:
    """The SentencePiece model of spm_tokenizer with Phi-3's added tokens
    past its 320 pieces: in added_tokens.json (one past vocab_size, which
    convert skips), tokenizer_config.json's added_tokens_decoder and
    tokenizer.json's added_tokens, special or not, as Phi-3-mini's files
    list them; convert's Phi-3 path types them CONTROL or USER_DEFINED."""
    spm_tokenizer(out)
    added = [("<unk>", 0, True), ("<s>", 1, True), ("</s>", 2, True), ("<|endoftext|>", 320, True),
             ("<|assistant|>", 321, True), ("<|placeholder1|>", 322, False), ("<|end|>", 323, True), ("<|user|>", 324, True)]
    (out / "added_tokens.json").write_text(json.dumps({"<|endoftext|>": 320, "<|assistant|>": 321, "<|placeholder1|>": 322,
                                                        "<|end|>": 323, "<|system|>": 325, "<|beyond|>": 400}))
    tc = json.loads((out / "tokenizer_config.json").read_text())
    tc["added_tokens_decoder"] = {str(i): {"content": c, "special": sp, "normalized": False, "lstrip": False, "rstrip": not sp}
                                  for c, i, sp in added[:-1]}
    tc.update(add_bos_token=False, eos_token="<|endoftext|>", pad_token="<|endoftext|>", tokenizer_class="LlamaTokenizer",
              chat_template="{% for m in messages %}{{ '<|' + m['role'] + '|>' + m['content'] + '<|end|>' }}{% endfor %}")
    (out / "tokenizer_config.json").write_text(json.dumps(tc))
    (out / "tokenizer.json").write_text(json.dumps({
        "version": "1.0", "added_tokens": [{"id": i, "content": c, "special": sp, "single_word": False, "lstrip": False,
                                            "rstrip": not sp, "normalized": False} for c, i, sp in added],
        "normalizer": None, "pre_tokenizer": None, "post_processor": None, "decoder": None,
        "model": {"type": "BPE", "vocab": {}, "merges": []}}))


def phi3_config(d: Path) -> None:
    """config.json as Phi-3-mini-4k-instruct's reads (rope_scaling null,
    rope_theta and original_max_position_embeddings at the top)."""
    config = json.loads((d / "config.json").read_text())
    config.pop("rope_parameters", None)
    config.update(rope_scaling=None, rope_theta=10000.0, original_max_position_embeddings=256)
    (d / "config.json").write_text(json.dumps(config))


def class_defaults_config(d: Path) -> None:
    """config.json without the fields transformers' Qwen3Config fills
    (max_position_embeddings 32768, rms_norm_eps 1e-6, rope_theta 10000),
    which convert writes as the class's defaults."""
    config = json.loads((d / "config.json").read_text())
    for k in ("max_position_embeddings", "rms_norm_eps", "rope_parameters", "rope_theta"):
        config.pop(k, None)
    (d / "config.json").write_text(json.dumps(config))


def hf_model(arch: str, out: Path, seed: int) -> dict[str, np.ndarray]:
    import torch
    import transformers

    config_cls, model_cls, extra = ARCHS[arch]
    torch.manual_seed(seed)
    ids = {"bos_token_id": 1, "eos_token_id": 2} if arch == "mistral" else {"bos_token_id": 0, "eos_token_id": 0}
    if arch == "phi3":
        ids = {"bos_token_id": 1, "eos_token_id": 320, "pad_token_id": 320}
    config = getattr(transformers, config_cls)(**{**COMMON, **extra}, **ids)
    model = getattr(transformers, model_cls)(config).to(torch.bfloat16)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(4.0)  # larger than the default init, so that quantization changes the logits
    model.save_pretrained(out, safe_serialization=True)
    from safetensors import safe_open

    # What was saved (transformers 5 holds experts fused but saves them one by one), as float32.
    with safe_open(str(out / "model.safetensors"), "pt") as f:
        return {k: f.get_tensor(k).float().numpy() for k in f.keys()}


def convert(src: Path, out: Path, pre: str) -> None:
    """convert_hf_to_gguf.py --outtype bf16 in this process (torch imported once)."""
    import convert_hf_to_gguf
    from conversion import base

    base.TextModel.get_vocab_base_pre = lambda self, tokenizer: pre
    argv = sys.argv
    sys.argv = ["convert_hf_to_gguf.py", str(src), "--outtype", "bf16", "--outfile", str(out)]
    try:
        convert_hf_to_gguf.main()
    finally:
        sys.argv = argv


def main(out: Path, llama_src: Path) -> None:
    import logging

    logging.disable(logging.WARNING)
    # The vendored gguf-py, which convert_hf_to_gguf.py is written against,
    # before anything imports the venv's gguf.
    sys.path[:0] = [str(llama_src / "gguf-py"), str(llama_src), str(HERE.parents[2] / "tests" / "fixtures")]
    import hf_models as models  # tests/fixtures/hf_models.py: the quantized variants
    out.mkdir(parents=True, exist_ok=True)
    for seed, arch in enumerate(ARCHS):
        root = out / arch
        hf_dir = out / f"{arch}-bf16"
        weights = hf_model(arch, hf_dir, seed)
        if arch == "mistral":
            spm_tokenizer(hf_dir)
        elif arch == "phi3":
            phi3_tokenizer(hf_dir)
            phi3_config(hf_dir)
        else:
            tokenizer(hf_dir, PRE[arch])
        if arch == "qwen3":
            class_defaults_config(hf_dir)
        if arch in README:
            (hf_dir / "README.md").write_text(README[arch])
        if arch in GENERATION:
            gen = hf_dir / "generation_config.json"
            gen.write_text(json.dumps({**(json.loads(gen.read_text()) if gen.exists() else {}), **GENERATION[arch]}, indent=2))
        formats = ARCH_FORMATS.get(arch, FORMATS)
        pairs = {f"{arch}-bf16": (hf_dir, hf_dir)}
        models.fp8_variant(root / "fp8", root / "fp8-ref", hf_dir, weights)
        pairs[f"{arch}-fp8"] = (root / "fp8", root / "fp8-ref")
        if "nvfp4-ct" in formats:
            for kind, pair in models.nvfp4_variants(root, hf_dir, weights).items():
                pairs[f"{arch}-{kind}"] = pair
        if "int4-ct" in formats:
            pairs[f"{arch}-int4-ct"] = models.int4_variant(root, hf_dir, weights)
        converted: dict[Path, Path] = {}
        for name, (d, ref) in pairs.items():
            for f in TOKENIZER_FILES:
                for target in (d, ref):
                    if (hf_dir / f).exists() and not (target / f).exists():
                        shutil.copy(hf_dir / f, target / f)
            if d != hf_dir:
                (out / name).symlink_to(d.relative_to(out))
            gguf = out / f"{name}.ref-bf16.gguf"
            if ref in converted:  # the two NVFP4 layouts share one reference
                gguf.symlink_to(converted[ref].name)
            else:
                convert(ref, gguf, PRE.get(arch, ""))  # the BPE models' pre-tokenizer name
                converted[ref] = gguf
            print(out / name)  # the list scripts/test_c.sh runs
        if arch == "llama":
            print(llama3_rope(out, hf_dir))
        if arch == "phi3":
            print(phi3_longrope(out, hf_dir))
            print(phi4_bpe(out, hf_dir))
    refusals(out)


def llama3_rope(out: Path, llama: Path) -> Path:
    """The llama checkpoint with Llama 3.1's rope scaling (rope_type llama3,
    theta 500000), its original context cut to 64 so that the head's
    frequencies span all three of convert's cases (kept, scaled, smoothed):
    convert writes the factors as a rope_freqs tensor."""
    d = out / "llama3rope-bf16"
    shutil.copytree(llama, d)
    config = json.loads((d / "config.json").read_text())
    config.pop("rope_parameters", None)
    config["rope_theta"] = 500000.0
    config["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                              "original_max_position_embeddings": 64}
    (d / "config.json").write_text(json.dumps(config))
    convert(d, out / "llama3rope-bf16.ref-bf16.gguf", PRE["llama"])
    return d


def phi3_longrope(out: Path, phi3: Path) -> Path:
    """The phi3 checkpoint as Phi-4-mini's config has it: longrope with
    long and short factors (of many digits, rounded to f32 by convert),
    partial_rotary_factor 0.75 at the top (24 of 32 dimensions rotated: 12
    factors each), a context 4x the original (convert's attention factor
    sqrt(1 + ln 4 / ln 256)) and no sliding window (convert writes 0)."""
    d = out / "phi3longrope-bf16"
    shutil.copytree(phi3, d)
    config = json.loads((d / "config.json").read_text())
    rng = np.random.default_rng(3)
    config.update(max_position_embeddings=1024, partial_rotary_factor=0.75, sliding_window=None, rope_scaling={
        "type": "longrope", "long_factor": [float(x) for x in 1.0 + 3.0 * rng.random(12)],
        "short_factor": [1.0, 1.0199999809265137] + [float(x) for x in 1.0 + 0.1 * rng.random(10)]})
    (d / "config.json").write_text(json.dumps(config))
    convert(d, out / "phi3longrope-bf16.ref-bf16.gguf", "")
    return d


def phi4_bpe(out: Path, phi3: Path) -> Path:
    """The phi3 checkpoint with Phi-4's tokenizer kind: a byte-level BPE
    tokenizer.json and tokenizer_config.json's tokenizer_class
    GPT2Tokenizer, which sends convert's Phi-3 set_vocab to _set_vocab_gpt2
    (no tokenizer.model, no added_tokens.json)."""
    d = out / "phi4bpe-bf16"
    shutil.copytree(phi3, d)
    for f in ("tokenizer.model", "added_tokens.json", "tokenizer.json", "tokenizer_config.json"):
        (d / f).unlink(missing_ok=True)
    tokenizer(d, "qwen2")
    tc = json.loads((d / "tokenizer_config.json").read_text())
    tc["tokenizer_class"] = "GPT2Tokenizer"
    (d / "tokenizer_config.json").write_text(json.dumps(tc))
    config = json.loads((d / "config.json").read_text())
    config.update(bos_token_id=0, eos_token_id=0, pad_token_id=0)  # <|endoftext|> in this tokenizer
    (d / "config.json").write_text(json.dumps(config))
    convert(d, out / "phi4bpe-bf16.ref-bf16.gguf", "qwen2")
    return d


def refusals(out: Path) -> None:
    import ml_dtypes
    from safetensors.numpy import load_file, save_file

    d = out / "unsupported-arch"
    shutil.copytree(out / "qwen2-bf16", d)
    config = json.loads((d / "config.json").read_text())
    config["architectures"] = ["Gemma2ForCausalLM"]
    (d / "config.json").write_text(json.dumps(config))
    d = out / "unsupported-reranker"  # Qwen3-Reranker: convert writes a classifier head
    shutil.copytree(out / "qwen3-bf16", d)
    (d / "README.md").write_text("---\nlicense: apache-2.0\n---\n\n# Qwen3-Reranker-0.6B\n")
    d = out / "unsupported-pooling"  # a sentence-transformers embedding model: convert writes a pooling type
    shutil.copytree(out / "qwen2-bf16", d)
    (d / "modules.json").write_text(json.dumps([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                                                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    # Hostile configs the adapter's former C builder handed to llama.cpp,
    # which aborted the host process: refused now, naming the field.
    d = out / "hostile-heads"
    shutil.copytree(out / "qwen2-bf16", d)
    config = json.loads((d / "config.json").read_text())
    config["num_attention_heads"] = 0
    (d / "config.json").write_text(json.dumps(config))
    d = out / "hostile-experts"  # a dense Qwen2 declaring 2^32 - 1 experts (issue 55: llama.cpp takes 512)
    shutil.copytree(out / "qwen2-bf16", d)
    config = json.loads((d / "config.json").read_text())
    config["num_experts"] = 4294967295
    config["num_experts_per_tok"] = 1
    (d / "config.json").write_text(json.dumps(config))
    d = out / "hostile-vocab"  # an added token repeating another id's text
    shutil.copytree(out / "llama-bf16", d)
    tok = json.loads((d / "tokenizer.json").read_text())
    tok["added_tokens"].append({"id": 383, "content": next(iter(tok["model"]["vocab"])), "special": True})
    (d / "tokenizer.json").write_text(json.dumps(tok))
    d = out / "unsupported-tensor"
    shutil.copytree(out / "llama-bf16", d)
    tensors = load_file(str(d / "model.safetensors"))
    tensors["model.layers.0.mlp.extra_proj.weight"] = np.ones((8, 128), dtype=ml_dtypes.bfloat16)
    save_file(tensors, str(d / "model.safetensors"))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
