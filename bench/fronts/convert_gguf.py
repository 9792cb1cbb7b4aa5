#!/usr/bin/env python3
"""`weightstream convert --to gguf` against llama.cpp's convert_hf_to_gguf.py
on the same block-FP8 Hugging Face checkpoint, same output (a BF16 GGUF),
same machine, interleaved:

    python bench/fronts/convert_gguf.py MODELS/128k-1.8gb [--reps 3] [--json out.json]

(run it with the vLLM venv's python: convert_hf_to_gguf.py needs torch and
transformers.) MODELS is what bench/fronts/models.py wrote. Made once under
MODELS/fp8-hf/: the BF16 checkpoint's weights in block FP8 (128x128 scales,
DeepSeek's layout, tests/fixtures/hf_models.py's fp8_variant) with a
tokenizer.json holding Llama 3's real vocabulary (llama.cpp's
models/ggml-vocab-llama-bpe.gguf: 128256 tokens, 280147 merges). Each rep
runs both converters in a fresh process, in alternating order, from a warm
page cache, and times what a user waits for (the whole command, Python and
torch import included); the first rep's outputs are compared key for key
and tensor for tensor (plugins/llamacpp/tests/compare_gguf.py). Prints
medians and min..max and the ratio, with the load average.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
LLAMA = Path(os.environ.get("WS_CACHE", Path.home() / ".cache/weightstream")) / "llama.cpp/0.3.36/src"
LLAMA3_SPLIT = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"


def llama3_tokenizer(out: Path) -> None:
    """tokenizer.json and tokenizer_config.json with Llama 3's vocabulary,
    merges and special tokens, from llama.cpp's vocabulary file."""
    sys.path.insert(0, str(LLAMA / "gguf-py"))
    import gguf

    r = gguf.GGUFReader(str(LLAMA / "models/ggml-vocab-llama-bpe.gguf"))
    f = r.fields
    tokens = [bytes(f["tokenizer.ggml.tokens"].parts[i]).decode() for i in f["tokenizer.ggml.tokens"].data]
    types = [int(f["tokenizer.ggml.token_type"].parts[i][0]) for i in f["tokenizer.ggml.token_type"].data]
    merges = [bytes(f["tokenizer.ggml.merges"].parts[i]).decode() for i in f["tokenizer.ggml.merges"].data]
    vocab = {t: i for i, (t, ty) in enumerate(zip(tokens, types)) if ty == 1}
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}
             for i, (t, ty) in enumerate(zip(tokens, types)) if ty != 1]
    tok = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": LLAMA3_SPLIT}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": True, "vocab": vocab, "merges": merges},
    }
    (out / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False))
    (out / "tokenizer_config.json").write_text(json.dumps({
        "bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>", "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 131072}))


def make_fp8(models: Path) -> Path:
    config = json.loads((models / "bf16/config.json").read_text())
    if config.get("vocab_size") != 128256:
        sys.exit(f"convert_gguf: {models} has {config.get('vocab_size')} tokens; the benchmark gives the model Llama 3's "
                 "128256-token tokenizer (the 128k-1.8gb preset)")
    out = models / "fp8-hf"
    if (out / "model.safetensors").exists() and (out / "tokenizer.json").exists():
        return out
    sys.path.insert(0, str(ROOT / "tests/fixtures"))
    import hf_models
    from safetensors.numpy import load_file

    print(f"convert_gguf: writing {out} (block FP8 of {models / 'bf16'}, Llama 3's tokenizer)", flush=True)
    weights = {k: v.astype("float32") for k, v in load_file(str(models / "bf16/model.safetensors")).items()}
    with tempfile.TemporaryDirectory() as ref:
        hf_models.fp8_variant(out, Path(ref), models / "bf16", weights)
    llama3_tokenizer(out)
    return out


CONVERT = """
import sys
sys.path[:0] = [{llama!r} + "/gguf-py", {llama!r}]
import convert_hf_to_gguf
from conversion import base
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "llama-bpe"  # the hash of a made-up checkpoint is unknown
sys.argv = ["convert_hf_to_gguf.py", {src!r}, "--outtype", "bf16", "--outfile", {out!r}]
convert_hf_to_gguf.main()
"""


def run(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", type=Path)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--ws", type=Path, default=ROOT / "target/release/weightstream")
    args = ap.parse_args()
    src = make_fp8(args.models)
    out = Path(tempfile.mkdtemp(prefix="convert-gguf-"))
    ours, ref = out / "ours.gguf", out / "ref.gguf"
    tools = {
        "weightstream": lambda: run([str(args.ws), "convert", str(src), "-o", str(ours), "--force"]),
        "convert_hf_to_gguf.py": lambda: run([sys.executable, "-c", CONVERT.format(llama=str(LLAMA), src=str(src), out=str(ref))]),
    }
    subprocess.run(["cat", *map(str, src.iterdir())], stdout=subprocess.DEVNULL, check=True)  # warm the page cache
    load = os.getloadavg()
    times: dict[str, list[float]] = {k: [] for k in tools}
    for rep in range(args.reps):
        for name in (list(tools) if rep % 2 == 0 else list(reversed(tools))):
            times[name].append(tools[name]())
            print(f"rep {rep + 1}: {name} {times[name][-1]:.2f} s", flush=True)
        if rep == 0:
            same = subprocess.run([sys.executable, str(ROOT / "plugins/llamacpp/tests/compare_gguf.py"), str(ours), str(ref)],
                                  env={**os.environ, "PYTHONPATH": str(LLAMA / "gguf-py")}, capture_output=True, text=True)
            print("outputs: " + ("identical, key for key and tensor for tensor" if same.returncode == 0 else same.stdout[:2000]))
    summary = {k: {"median": statistics.median(v), "min": min(v), "max": max(v)} for k, v in times.items()}
    ratio = summary["weightstream"]["median"] / summary["convert_hf_to_gguf.py"]["median"]
    size = sum(f.stat().st_size for f in src.iterdir())
    print(f"{src} ({size / 1e9:.2f} GB), {args.reps} interleaved reps, warm cache; load average {load[0]:.2f} before, "
          f"{os.getloadavg()[0]:.2f} after")
    for k, s in summary.items():
        print(f"  {k:24s} median {s['median']:7.2f} s  ({s['min']:.2f}..{s['max']:.2f})")
    print(f"  weightstream / convert_hf_to_gguf.py: {ratio:.3f}x")
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "ratio": ratio, "times": times, "bytes": size}, indent=1))
    for f in (ours, ref):
        f.unlink(missing_ok=True)
    out.rmdir()


if __name__ == "__main__":
    main()
