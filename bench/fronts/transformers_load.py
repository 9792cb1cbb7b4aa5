#!/usr/bin/env python3
"""The transformers front against the core and against transformers' own
GGUF loader (run in .venv-vllm: torch, transformers, gguf-py, weightstream).

    python bench/fronts/transformers_load.py MODELS/32k-0.3gb [--formats q4_k_m,q8_0] [--reps 3]
    python bench/fronts/transformers_load.py MODELS/32k-0.3gb --profile q4_k_m     # load_model under cProfile

MODELS is what bench/fronts/models.py wrote (real vocabularies). Per rep, in
an order that rotates, each in a fresh process, BF16 on the CPU:

- load_model: weightstream.transformers.load_model(file);
- patch: AutoModelForCausalLM.from_pretrained(dir, gguf_file=...) under
  weightstream.transformers.patch();
- transformers: the same from_pretrained without weightstream (gguf-py
  parses the file and dequantizes in numpy);
- load_file: weightstream.load_file(file), the core.

torch and transformers (and AutoModelForCausalLM) are imported before the
clock starts, as in any program that uses them; everything else a loader
imports (weightstream.transformers, gguf-py, the model's module) is inside
it. Page cache warm. Wall time of the call; median and min..max.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

LOADERS = ("load_model", "patch", "transformers", "load_file")


def child(loader: str, path: str, profile: str | None) -> None:
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    transformers.logging.set_verbosity_error()
    p = Path(path)
    prof = None
    if profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    t0 = time.perf_counter()
    if loader == "load_model":
        import weightstream.transformers as wst

        model = wst.load_model(p, device="cpu", dtype=torch.bfloat16)
    elif loader == "patch":
        import weightstream.transformers as wst

        with wst.patch():
            model = AutoModelForCausalLM.from_pretrained(p.parent, gguf_file=p.name, dtype=torch.bfloat16)
    elif loader == "transformers":
        model = AutoModelForCausalLM.from_pretrained(p.parent, gguf_file=p.name, dtype=torch.bfloat16)
    else:
        import weightstream

        model = weightstream.load_file(p)
    seconds = time.perf_counter() - t0
    if prof is not None:
        prof.disable()
        prof.dump_stats(profile)
    print("RESULT " + json.dumps({"seconds": seconds, "tensors": len(model) if isinstance(model, dict) else None}))


def run(loader: str, path: Path, profile: str | None = None) -> float:
    args = [sys.executable, __file__, "--child", loader, str(path)] + (["--profile-to", profile] if profile else [])
    r = subprocess.run(args, capture_output=True, text=True, env=dict(os.environ, TQDM_DISABLE="1"))
    lines = [line for line in r.stdout.splitlines() if line.startswith("RESULT ")]
    if r.returncode != 0 or not lines:
        sys.exit(f"{loader} {path}: failed (exit {r.returncode}):\n{r.stderr[-3000:]}")
    return json.loads(lines[0][7:])["seconds"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", type=Path, nargs="?")
    ap.add_argument("--formats", default="q4_k_m,q8_0")
    ap.add_argument("--loaders", default=",".join(LOADERS))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--profile", metavar="FORMAT", help="load_model of FORMAT under cProfile; print its top")
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--profile-to", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(*a.child, a.profile_to)
        return
    if a.model is None:
        ap.error("the model directory (bench/fronts/models.py's) is required")
    formats = a.formats.split(",")
    for fmt in formats:
        with open(a.model / fmt / "model.gguf", "rb") as fh:  # warm the page cache
            while fh.read(1 << 24):
                pass
    if a.profile:
        import pstats
        import tempfile

        prof = str(Path(tempfile.mkdtemp()) / "load_model.prof")
        print(f"load_model {run('load_model', a.model / a.profile / 'model.gguf', prof):.3f} s under cProfile")
        pstats.Stats(prof).sort_stats("cumulative").print_stats(40)
        return
    cases = [(loader, fmt) for fmt in formats for loader in a.loaders.split(",")]
    results: dict = {c: [] for c in cases}
    load = os.getloadavg()
    for rep in range(a.reps):
        for loader, fmt in cases[rep % len(cases):] + cases[:rep % len(cases)]:
            results[(loader, fmt)].append(run(loader, a.model / fmt / "model.gguf"))
            print(f"rep {rep + 1} {loader} {fmt}: {results[(loader, fmt)][-1]:.3f} s", file=sys.stderr)
    print(f"{a.model.name}: seconds, median (min..max) of {a.reps}, fresh processes, warm page cache; "
          f"load average {load[0]:.2f} before, {os.getloadavg()[0]:.2f} after")
    out = {"model": str(a.model), "load_before": load, "load_after": os.getloadavg(), "cases": {}}
    for (loader, fmt), ts in results.items():
        out["cases"][f"{loader} {fmt}"] = {"median": statistics.median(ts), "min": min(ts), "max": max(ts), "all": ts}
        print(f"  {loader:13s} {fmt:7s} {statistics.median(ts):7.3f}  ({min(ts):.3f}..{max(ts):.3f})")
    med = {k: statistics.median(v) for k, v in results.items()}
    for fmt in formats:
        if ("load_model", fmt) in med and ("transformers", fmt) in med:
            print(f"  {fmt}: transformers / load_model {med[('transformers', fmt)] / med[('load_model', fmt)]:.1f}x", end="")
            if ("load_file", fmt) in med:
                print(f", load_model - load_file {med[('load_model', fmt)] - med[('load_file', fmt)]:+.2f} s", end="")
            print()
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
