#!/usr/bin/env python3
"""The fronts benchmark's models: Llama-shaped checkpoints with real
vocabularies, as users have them.

    python bench/fronts/models.py OUT [--presets 32k-0.3gb,128k-1.8gb]

Each preset is one model in three checkpoints, under OUT/PRESET/:

- q4_k_m/model.gguf and q8_0/model.gguf: random valid blocks (sample_model.py's
  writer; Q4_K_M with llama-quantize's per-tensor type choice), F32 norms,
  and the tokenizer of a real model: llama.cpp's own vocabulary files
  (models/ggml-vocab-llama-spm.gguf: Llama 2's 32000 SentencePiece tokens,
  scores and types; ggml-vocab-llama-bpe.gguf: Llama 3's 128256 BPE tokens
  and 280147 merges), copied key by key. Each directory also holds the
  config.json vLLM needs (weightstream.serving.hf_config's, from the file).
- bf16/model.safetensors + config.json: the same shapes in BF16 with Hugging
  Face names (random finite values), what vLLM's and transformers' default
  loaders read; bf16-gguf/model.gguf: the same as a BF16 GGUF with the
  tokenizer (what llama.cpp loads without weightstream).

The vocabulary files come from the llama.cpp source scripts/build_llama_cpp.sh
fetches (its pinned version, under $WS_CACHE/llama.cpp); this script runs
that fetch if the source is not there yet. Files that exist are kept.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests/fixtures"))

import gguf  # noqa: E402

import sample_model  # noqa: E402
from sample_model import Shape  # noqa: E402

# (shape, llama.cpp vocabulary file, rope theta): a Llama-2-like 0.3 GB model
# with Llama 2's tokenizer, and a Llama-3.2-1B-like 1.8 GB one (untied, fewer
# layers) with Llama 3's.
PRESETS = {
    "32k-0.3gb": (Shape(hidden=1024, layers=8, ff=2816, vocab=32000, heads=16, kv_heads=8), "llama-spm", 10000.0),
    "128k-1.8gb": (Shape(hidden=2048, layers=8, ff=5632, vocab=128256, heads=16, kv_heads=8), "llama-bpe", 500000.0),
}
FORMATS = ("q4_k_m", "q8_0")


def vocab_file(name: str) -> Path:
    cache = Path(os.environ.get("WEIGHTSTREAM_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "weightstream")
    found = sorted(glob.glob(str(cache / "llama.cpp" / "*" / "src" / "models" / f"ggml-vocab-{name}.gguf")))
    if not found:
        print("models: fetching llama.cpp's source for its vocabulary files (scripts/build_llama_cpp.sh)", file=sys.stderr)
        subprocess.run(["bash", str(ROOT / "scripts/build_llama_cpp.sh")], check=True, stdout=sys.stderr)
        found = sorted(glob.glob(str(cache / "llama.cpp" / "*" / "src" / "models" / f"ggml-vocab-{name}.gguf")))
    if not found:
        raise SystemExit(f"models: no ggml-vocab-{name}.gguf under {cache}/llama.cpp/*/src/models")
    return Path(found[-1])


def copy_tokenizer(w: gguf.GGUFWriter, path: Path, vocab: int) -> None:
    """Every tokenizer.* key of llama.cpp's vocabulary file, with its type."""
    r = gguf.GGUFReader(str(path))
    tokens = r.fields["tokenizer.ggml.tokens"]
    if len(tokens.data) != vocab:
        raise SystemExit(f"{path}: {len(tokens.data)} tokens, the preset says {vocab}")
    for key, f in r.fields.items():
        if not key.startswith("tokenizer."):
            continue
        value = f.contents()
        if f.types[0] == gguf.GGUFValueType.ARRAY:
            w.add_key_value(key, value, gguf.GGUFValueType.ARRAY, sub_type=f.types[-1])
        else:
            w.add_key_value(key, value, f.types[0])


def write_gguf(path: Path, s: Shape, fmt: str, vocab: Path, rope_theta: float) -> None:
    """sample_model.write_gguf's model, with a real tokenizer in place of none."""
    rng = np.random.default_rng(0)
    real_writer = gguf.GGUFWriter

    class WithVocab(real_writer):
        def add_tokenizer_model(self, model: str) -> None:  # sample_model writes "none"
            copy_tokenizer(self, vocab, s.vocab)
            self.add_rope_freq_base(rope_theta)

    gguf.GGUFWriter = WithVocab
    try:
        sample_model.write_gguf(path, s, fmt, rng, real=False)
    finally:
        gguf.GGUFWriter = real_writer


def write_bf16_gguf(path: Path, s: Shape, vocab: Path, rope_theta: float) -> None:
    """The model as llama.cpp's BF16 GGUF: the GGUF format's metadata of
    write_gguf, BF16 weights (random finite values), F32 norms."""
    rng = np.random.default_rng(0)
    w = gguf.GGUFWriter(str(path), arch="llama")
    w.add_name("weightstream fronts bench bf16")
    for add, v in ((w.add_context_length, 2048), (w.add_embedding_length, s.hidden), (w.add_block_count, s.layers),
                   (w.add_feed_forward_length, s.ff), (w.add_head_count, s.heads), (w.add_head_count_kv, s.kv_heads),
                   (w.add_rope_dimension_count, s.hidden // s.heads), (w.add_layer_norm_rms_eps, 1e-5),
                   (w.add_vocab_size, s.vocab), (w.add_rope_freq_base, rope_theta), (w.add_file_type, 32)):
        add(v)
    copy_tokenizer(w, vocab, s.vocab)
    for _, name, shape in sample_model.hf_tensors(s):
        if len(shape) == 1:
            w.add_tensor(name, rng.uniform(0.5, 1.5, shape).astype(np.float32))
        else:
            bits = sample_model.random_bf16(rng, shape).view(np.uint16)
            w.add_tensor(name, bits.view(np.uint8).reshape(*shape[:-1], shape[-1] * 2), raw_dtype=gguf.GGMLQuantizationType.BF16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_config(model_dir: Path, gguf_file: Path) -> None:
    sys.path.insert(0, str(ROOT / "plugins/vllm"))
    from weightstream.serving import hf_config

    hf_config.write(gguf_file, model_dir)


def write_preset(out: Path, name: str) -> None:
    s, vocab_name, rope_theta = PRESETS[name]
    vocab = vocab_file(vocab_name)
    for fmt in FORMATS:
        d = out / name / fmt
        f = d / "model.gguf"
        if not f.exists():
            d.mkdir(parents=True, exist_ok=True)
            t0 = time.perf_counter()
            tmp = d / "model.gguf.partial"
            write_gguf(tmp, s, fmt, vocab, rope_theta)
            tmp.rename(f)
            print(f"wrote {f} ({f.stat().st_size / 1e9:.2f} GB) in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        if not (d / "config.json").exists():
            write_config(d, f)
    f = out / name / "bf16-gguf" / "model.gguf"
    if not f.exists():
        f.parent.mkdir(parents=True, exist_ok=True)
        write_bf16_gguf(f.with_suffix(".partial"), s, vocab, rope_theta)
        f.with_suffix(".partial").rename(f)
        print(f"wrote {f}", file=sys.stderr)
    d = out / name / "bf16"
    if not (d / "model.safetensors").exists():
        sample_model.write_safetensors(d, s, "bf16", np.random.default_rng(0), real=False)
        config = json.loads((d / "config.json").read_text())
        config["rope_theta"] = rope_theta
        (d / "config.json").write_text(json.dumps(config, indent=1))
        print(f"wrote {d / 'model.safetensors'}", file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--presets", default=",".join(PRESETS), help=f"comma-separated, of: {', '.join(PRESETS)}")
    a = ap.parse_args()
    for name in a.presets.split(","):
        write_preset(a.out, name)


if __name__ == "__main__":
    main()
