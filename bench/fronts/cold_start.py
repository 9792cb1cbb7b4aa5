#!/usr/bin/env python3
"""Cold start from object storage (issue 59, item 5): seconds from an
engine's construction to its first generated token, with the model in S3
behind a shaped link, for

- `runai`: vLLM's own `--load-format runai_streamer` on the BF16
  safetensors (the model given as the s3:// prefix, config included);
- `ws-bf16`: the weightstream plugin on the same BF16 safetensors
  (`{"file": "s3://.../bf16/"}`, the config from a local directory);
- `ws-q4_k_m`: the weightstream plugin on a Q4_K_M GGUF of the same shapes
  (`{"file": "s3://.../q4_k_m/model.gguf"}`),

at each tensor-parallel size of --tp (vLLM's mp executor, one OpenMP
thread set per rank as the test suite runs them), each run a fresh
process (vLLM and torch imported before the clock: the same for every
loader), interleaved (every loader once per repetition, link and TP size,
order rotated). The server is SeaweedFS in its own network namespace
behind a veth pair shaped with `tc tbf` (bench/s3/bench_s3.py's link; root
needed). Prints a Markdown table: median and spread per case, bytes moved
and each case's ratio to runai's start at the same link and TP size.

    .venv-vllm/bin/python bench/fronts/models.py /tmp/wsm --presets 128k-1.8gb
    .venv-vllm/bin/python bench/fronts/cold_start.py /tmp/wsm/128k-1.8gb --rates 1gbit,10gbit --tp 1,2 --reps 3

MODELS/PRESET is what bench/fronts/models.py wrote: Llama-shaped, Llama 3's
128256-token vocabulary, random values; the Q4_K_M file is not a
quantization of the BF16 one (random valid blocks of llama-quantize's
per-tensor types), so tokens are not compared, only the time to the first
one. The engines take the test suite's settings (a 32 MiB KV cache, no
tokenizer: the prompt is token ids), so the start is the load plus
vLLM's own engine setup.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "bench" / "s3"))

import bench_s3  # noqa: E402  (the namespace, the veth pair, the shaping)

BUCKET = "cold"
LOADERS = ["runai", "ws-bf16", "ws-q4_k_m"]


def child(case: dict) -> None:
    """In a fresh process: construct the engine, generate one token, print
    the seconds."""
    sys.path.insert(0, str(ROOT / "plugins/vllm/tests"))
    from engine_runner import ENGINE, omp_binding
    from vllm import LLM, SamplingParams

    kwargs = dict(ENGINE)
    if case["tp"] > 1:
        kwargs.update(tensor_parallel_size=case["tp"], distributed_executor_backend="mp")
        os.environ["VLLM_CPU_OMP_THREADS_BIND"] = omp_binding(case["tp"])
    else:
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    if case["loader"] == "runai":
        kwargs.update(model=case["url"], load_format="runai_streamer")
    else:
        kwargs.update(model=case["config_dir"], load_format="weightstream", model_loader_extra_config={"file": case["url"]})
    t = time.perf_counter()
    llm = LLM(**kwargs)
    out = llm.generate([{"prompt_token_ids": [1, 2, 3, 4]}], SamplingParams(max_tokens=1, temperature=0.0), use_tqdm=False)
    took = time.perf_counter() - t
    assert out and out[0].outputs[0].token_ids, out
    print("SECONDS", took, flush=True)
    llm.llm_engine.engine_core.shutdown()


def run(case: dict, env: dict) -> float:
    p = subprocess.run([sys.executable, __file__, "--child", json.dumps(case)], env=env, capture_output=True, text=True, timeout=1800)
    line = next((l for l in p.stdout.splitlines() if l.startswith("SECONDS ")), None)
    if p.returncode != 0 or line is None:
        raise SystemExit(f"{case['loader']} tp{case['tp']} failed (exit {p.returncode}):\n{(p.stdout + p.stderr)[-4000:]}")
    return float(line.split()[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", type=Path, nargs="?", help="bench/fronts/models.py's MODELS/PRESET directory")
    ap.add_argument("--rates", default="1gbit,10gbit", help="tc tbf rates of the server's link, comma-separated")
    ap.add_argument("--tp", default="1,2", help="tensor-parallel sizes, comma-separated")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--loaders", default=",".join(LOADERS), help=f"a subset of {','.join(LOADERS)}")
    ap.add_argument("--work", type=Path, default=Path("/tmp/ws-cold-start"))
    ap.add_argument("--json", type=Path, help="write the raw seconds here too")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(json.loads(a.child))
        return
    if a.model is None:
        ap.error("the model directory (bench/fronts/models.py's MODELS/PRESET) is required")
    if os.geteuid() != 0:
        raise SystemExit("cold_start.py makes a network namespace and a tc qdisc: run it as root")
    # A kill (not only Ctrl-C) still stops the server and removes the link.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("cold_start: terminated"))
    loaders = [x for x in a.loaders.split(",") if x]
    if unknown := set(loaders) - set(LOADERS):
        ap.error(f"--loaders: unknown {sorted(unknown)}")
    bf16, gguf = a.model / "bf16", a.model / "q4_k_m" / "model.gguf"
    for f in (bf16 / "model.safetensors", bf16 / "config.json", gguf, gguf.parent / "config.json"):
        if not f.exists():
            ap.error(f"{f} is missing: run bench/fronts/models.py first")
    sizes = {"runai": (bf16 / "model.safetensors").stat().st_size, "ws-bf16": (bf16 / "model.safetensors").stat().st_size,
             "ws-q4_k_m": gguf.stat().st_size}
    # The weightstream engines' local directories: the config only (the
    # weights come from the store).
    a.work.mkdir(parents=True, exist_ok=True)
    configs = {}
    for loader, src in (("ws-bf16", bf16), ("ws-q4_k_m", gguf.parent)):
        d = a.work / f"config-{loader}"
        d.mkdir(exist_ok=True)
        shutil.copy(src / "config.json", d / "config.json")
        configs[loader] = str(d)
    urls = {"runai": f"s3://{BUCKET}/bf16/", "ws-bf16": f"s3://{BUCKET}/bf16/", "ws-q4_k_m": f"s3://{BUCKET}/q4_k_m/model.gguf"}
    from seaweed import SeaweedS3

    shutil.rmtree(a.work / "seaweed", ignore_errors=True)
    rates = [r for r in a.rates.split(",") if r]
    tps = [int(t) for t in a.tp.split(",") if t]
    results: dict[tuple[str, int, str], list[float]] = {}
    bench_s3.make_link()
    load_before = os.getloadavg()
    try:
        with SeaweedS3(a.work / "seaweed", ip=bench_s3.NS_IP, netns=bench_s3.NS) as server:
            server.make_bucket(BUCKET)
            server.put_tree(BUCKET, "bf16/", bf16)
            server.put_file(BUCKET, "q4_k_m/model.gguf", gguf)
            env = dict(server.env(), RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING="0", VLLM_LOGGING_LEVEL="WARNING", TQDM_DISABLE="1")
            # No local cache: every run fetches from the store.
            env.pop("WEIGHTSTREAM_CACHE_DIR", None)
            for rep in range(a.reps):
                for rate in rates:
                    bench_s3.shape(rate)
                    for tp in tps:
                        k = rep % len(loaders)
                        for loader in loaders[k:] + loaders[:k]:
                            case = {"loader": loader, "tp": tp, "url": urls[loader], "config_dir": configs.get(loader)}
                            results.setdefault((rate, tp, loader), []).append(run(case, env))
                            print(f"rep {rep} {rate:7} tp{tp} {loader:10} {results[(rate, tp, loader)][-1]:.2f} s", file=sys.stderr, flush=True)
    finally:
        bench_s3.remove_link()
    load_after = os.getloadavg()
    print(f"\n{a.reps} interleaved repetitions; bytes: BF16 {sizes['ws-bf16'] / 1e9:.3f} GB, Q4_K_M {sizes['ws-q4_k_m'] / 1e9:.3f} GB; "
          f"load average (1 min) before {load_before[0]:.2f}, after {load_after[0]:.2f}\n")
    print("| link | TP | loader | bytes moved | median s | min-max s | vs runai BF16 |")
    print("|---|---|---|---|---|---|---|")
    for rate in rates:
        for tp in tps:
            base = results.get((rate, tp, "runai"))
            for loader in loaders:
                xs = results[(rate, tp, loader)]
                med = statistics.median(xs)
                ratio = f"{med / statistics.median(base):.2f}x" if base else "-"
                print(f"| {rate} | {tp} | {loader} | {sizes[loader] / 1e9:.3f} GB | {med:.2f} | {min(xs):.2f}-{max(xs):.2f} | {ratio} |")
    raw = {f"{r}/tp{t}/{l}": v for (r, t, l), v in results.items()}
    print("\nraw:", json.dumps(raw))
    if a.json:
        a.json.write_text(json.dumps({"sizes": sizes, "raw": raw, "load_before": load_before, "load_after": load_after}, indent=1))


if __name__ == "__main__":
    main()
