#!/usr/bin/env python3
"""SGLang: weightstream's load_weights against SGLang's default loader, on
a fronts-benchmark model (bench/fronts/models.py: real vocabulary).

    .venv-sglang/bin/python bench/fronts/sglang_load.py /work/bench/128k-1.8gb --reps 3

One CPU engine (plugins/sglang/tests/sglang_run.py's settings) starts on
the BF16 safetensors with SGLang's default loader; then, REPS times in an
order that rotates, `update_weights_from_disk` reloads the BF16 safetensors
(SGLang's default loader, "auto") and the Q4_K_M and Q8_0 GGUFs
(weightstream) into it: the same model, the same engine, only the loader
and the checkpoint change. Each reload is timed around the call (its IPC
to the scheduler included, a few ms). Prints medians (min..max), and the
default loader's "Load weight end" of the engine start (model build
included) from SGLang's log.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

RUNNER = Path(__file__).resolve().parents[2] / "plugins/sglang/tests/sglang_run.py"
CASES = [("q4_k_m", "weightstream"), ("bf16", "auto"), ("q8_0", "weightstream")]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model", type=Path, help="a preset directory of bench/fronts/models.py (bf16/, q4_k_m/, q8_0/)")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    reloads = []
    for i in range(a.reps):
        order = CASES[i % len(CASES):] + CASES[:i % len(CASES)]
        reloads += [{"model": str(a.model / d), "load_format": f} for d, f in order]
    spec = [{"model": str(a.model / "bf16"), "load_format": "auto", "reload": reloads}]
    r = subprocess.run([sys.executable, str(RUNNER), json.dumps(spec)], capture_output=True, text=True,
                       env={**os.environ, "SGLANG_USE_CPU_ENGINE": "1"})
    line = next((l for l in r.stdout.splitlines() if l.startswith("RESULT 0 ")), None)
    if line is None or "error" in json.loads(line.split(" ", 2)[2]):
        sys.exit(f"failed:\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}")
    res = json.loads(line.split(" ", 2)[2])
    times: dict = {}
    for spec_i, s in zip(reloads, res["reload_s"]):
        times.setdefault((Path(spec_i["model"]).name, spec_i["load_format"]), []).append(s)
    start = re.search(r"Load weight end\. elapsed=([\d.]+) s", r.stderr + r.stdout)
    print(f"engine start: {res['start_s']} s; default loader's load_model at the start (model build included): "
          f"{start.group(1) if start else '?'} s")
    print("| checkpoint | loader | update_weights_from_disk s (median, min..max) |")
    print("|---|---|---|")
    for (name, fmt), ts in times.items():
        print(f"| {name} | {'SGLang default' if fmt == 'auto' else 'weightstream'} | "
              f"{statistics.median(ts):.3f} ({min(ts):.3f}..{max(ts):.3f}) |")


if __name__ == "__main__":
    main()
