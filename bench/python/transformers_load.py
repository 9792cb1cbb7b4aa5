#!/usr/bin/env python3
"""A transformers model from a GGUF: weightstream.transformers.load_model
against transformers' own AutoModelForCausalLM.from_pretrained(gguf_file=...).

    python bench/python/transformers_load.py --dir /tmp/ws-bench --formats q8_0 --reps 3

Writes (once) a Llama-shaped GGUF of random valid blocks (sample_model.py's
writer; 2048 hidden, 12 layers, FFN 5632, vocab 32000: 1.39 GB as BF16),
reads it once so the page cache holds it for every run, then loads it
`--reps` times with each loader, interleaved (the order alternating), each
load in a fresh subprocess. Per load: wall time of the call, and peak RSS
growth (VmHWM after the load, reset through /proc/self/clear_refs just
before it, minus VmRSS before it). gguf-py and transformers' Llama and
GGUF modules, which both loaders import on first use, are imported before
the clock starts. Both loaders are asked for BF16 on the CPU. Medians, min..max, ratios.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHAPE = dict(hidden=2048, layers=12, ff=5632, vocab=32000, heads=16, kv_heads=8)


def status(field: str) -> int:
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def child(loader: str, path: str) -> None:
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    import weightstream.transformers as wst

    # What both loaders import on first use, imported before the clock starts.
    import gguf  # noqa: F401
    import transformers.modeling_gguf_pytorch_utils  # noqa: F401
    from transformers import LlamaForCausalLM  # noqa: F401

    transformers.logging.set_verbosity_error()
    p = Path(path)
    before = status("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS
    t0 = time.perf_counter()
    if loader == "weightstream":
        model = wst.load_model(p, device="cpu", dtype=torch.bfloat16)
    else:
        model = AutoModelForCausalLM.from_pretrained(p.parent, gguf_file=p.name, dtype=torch.bfloat16)
    seconds = time.perf_counter() - t0
    peak = status("VmHWM")
    nbytes = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    print("RESULT " + json.dumps({"seconds": seconds, "peak_growth": peak - before, "model_bytes": nbytes}))


def make(d: Path, fmt: str) -> Path:
    sys.path.insert(0, str(ROOT / "tests/fixtures"))
    import numpy as np
    import sample_model

    path = d / f"bench-llama-{fmt}" / f"bench-llama-{fmt}.gguf"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        sample_model.write_gguf(path, sample_model.Shape(**SHAPE), fmt, np.random.default_rng(0), real=False)
        print(f"wrote {path} ({path.stat().st_size / 1e9:.2f} GB) in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return path


def run(loader: str, path: Path) -> dict:
    r = subprocess.run([sys.executable, __file__, "--child", loader, str(path)], capture_output=True, text=True)
    lines = [line for line in r.stdout.splitlines() if line.startswith("RESULT ")]
    if r.returncode != 0 or not lines:
        raise SystemExit(f"{loader} failed:\n{r.stderr[-3000:]}")
    return json.loads(lines[0][7:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/ws-bench"))
    ap.add_argument("--formats", default="q8_0", help="comma-separated sample_model.py GGUF formats: q8_0,q4_0,q4_k_m")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(*a.child)
        return
    loaders = ["weightstream", "transformers"]
    print("| file | loader | load s (median, min..max) | peak RSS growth GB (median, min..max) | growth / BF16 model |")
    print("|---|---|---|---|---|")
    for fmt in a.formats.split(","):
        path = make(a.dir, fmt)
        with open(path, "rb") as f:  # into the page cache: every run reads it warm
            while f.read(64 << 20):
                pass
        results = {k: [] for k in loaders}
        for rep in range(a.reps):
            for loader in loaders if rep % 2 == 0 else loaders[::-1]:
                results[loader].append(run(loader, path))
                print(f"# {fmt} rep {rep} {loader}: {results[loader][-1]}", file=sys.stderr, flush=True)
        med = {}
        for loader in loaders:
            s = [r["seconds"] for r in results[loader]]
            g = [r["peak_growth"] / 1e9 for r in results[loader]]
            model = results[loader][0]["model_bytes"] / 1e9
            med[loader] = statistics.median(s)
            print(f"| {path.name} ({path.stat().st_size / 1e9:.2f} GB, BF16 {model:.2f} GB) | {loader} | "
                  f"{statistics.median(s):.2f} ({min(s):.2f}..{max(s):.2f}) | {statistics.median(g):.2f} "
                  f"({min(g):.2f}..{max(g):.2f}) | {statistics.median(g) / model:.2f}x |")
        print(f"| | speed-up | {med['transformers'] / med['weightstream']:.1f}x | | |")


if __name__ == "__main__":
    main()
