#!/usr/bin/env python3
"""The CPU kernels path by path: one table, a column per ISA.

Runs `weightstream bench` for every ISA this CPU can run
(`WEIGHTSTREAM_ISA=...`), in interleaved rounds (round 1: scalar, avx2,
avx512, ...; round 2: the same again), so that a slow moment of a shared
machine falls on every path alike. Each run measures every kernel beside a
memcpy of the same output size, alternately; the table gives each path's
ratio to that same run's memcpy, median over the rounds with the range.
With --threads2, the best path also runs on two threads and the table adds
the two-thread / one-thread speedup of the kernel and of memcpy.

    python3 bench/cpu/paths.py                       # every format, 3 rounds
    python3 bench/cpu/paths.py --format q4_0 --format q4_k --rounds 5
    python3 bench/cpu/paths.py --threads2 > table.md  # and two-thread scaling
    python3 bench/cpu/paths.py --json > paths.json   # every run, raw
    python3 bench/cpu/paths.py --baseline /tmp/old-weightstream   # before/after

With --baseline BIN, each round also runs that binary on each path right
before or after the current one (alternating), and the table gives, per
path, the current kernel's ratio to memcpy over the baseline's from the
same round: median over the rounds (range). Above 1: the change is faster.

Needs the release CLI (target/release/weightstream, or --ws / $WEIGHTSTREAM_BIN).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ISAS = ["scalar", "avx2", "avx512-int", "avx512", "neon"]
# Every kernel `weightstream bench` has (its --help lists the same).
FORMATS = [
    "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k",
    "iq4_nl", "iq4_xs", "mxfp4", "nvfp4", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s",
    "iq1_s", "iq1_m", "tq1_0", "tq2_0", "q1_0", "q2_0",
    "fp8-tensor", "fp8-channel", "fp8-block", "e5m2-block",
    "nvfp4-st", "mxfp4-st", "int4-g128", "int4-g128-zp", "int8-channel-f16",
    "f16", "f32",
]


def cpu_description() -> str:
    """The CPU model and the SIMD flags that decide the paths."""
    info: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    model = info.get("model name", platform.machine())
    if "cpu family" in info:
        model += f" (family {info['cpu family']} model {info.get('model', '?')})"
    flags = (info.get("flags") or info.get("Features") or "").split()
    simd = sorted(f for f in flags if f.startswith(("avx", "f16c", "asimd", "sve", "bf16", "fphp")))
    return f"{model}; {os.cpu_count()} CPUs; SIMD flags: {' '.join(simd) or 'unknown'}"


def run_bench(ws: str, isa: str, threads: int, reps: int, formats: list[str], shape: str | None) -> dict | None:
    """One `weightstream bench --json` run on one path; None if the CPU lacks it."""
    cmd = [ws, "bench", "--json", "--threads", str(threads), "--reps", str(reps)]
    for f in formats:
        cmd += ["--format", f]
    if shape:
        cmd += ["--shape", shape]
    env = dict(os.environ, WEIGHTSTREAM_ISA=isa)
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    result = json.loads(out)
    # An ISA this CPU cannot run is ignored by the CLI (it runs the best
    # one instead): the report names the path that ran.
    return result if result["isa"] == isa else None


def ratios(runs: list[dict], kernel: str) -> list[float]:
    return [k["hot"]["ratio_to_memcpy"] for r in runs for k in r["kernels"] if k["kernel"] == kernel]


def gbps(runs: list[dict], kernel: str, which: str = "gbps_median") -> list[float]:
    return [k["hot"][which] for r in runs for k in r["kernels"] if k["kernel"] == kernel]


def cell(values: list[float], path: str, isa: str) -> str:
    if not values:
        return "-"
    text = f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"
    # A format without a kernel of this path runs another's (`path`).
    return text if path == isa else f"{text} [{path}]"


def path_of(runs: list[dict], kernel: str) -> str:
    return next(k.get("path", r["isa"]) for r in runs for k in r["kernels"] if k["kernel"] == kernel)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ws", default=os.environ.get("WEIGHTSTREAM_BIN", str(ROOT / "target/release/weightstream")))
    ap.add_argument("--format", action="append", help="kernels to run (repeatable; default: every one)")
    ap.add_argument("--isa", action="append", help=f"paths to run (default: every one the CPU has of {', '.join(ISAS)})")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=7, help="timed runs per measurement in each bench run")
    ap.add_argument("--shape", help="ROWSxCOLS (default: the CLI's 4096x11008)")
    ap.add_argument("--threads2", action="store_true", help="also run the best path on two threads")
    ap.add_argument("--json", action="store_true", help="print every run as JSON instead of the table")
    ap.add_argument("--save", type=Path, help="also write every run as JSON to this file")
    ap.add_argument("--baseline", help="another weightstream binary to compare with, path by path, in the same rounds")
    args = ap.parse_args()
    formats = args.format or FORMATS

    paths = list(args.isa or ISAS)
    runs: dict[str, list[dict]] = {p: [] for p in paths}
    base: dict[str, list[dict]] = {p: [] for p in paths}
    runs2: list[dict] = []
    for r in range(args.rounds):
        for isa in list(paths):
            print(f"round {r + 1}/{args.rounds}: {isa}, 1 thread", file=sys.stderr)
            baseline_first = args.baseline and r % 2 == 1
            if baseline_first:
                base[isa].append(run_bench(args.baseline, isa, 1, args.reps, formats, args.shape))
            res = run_bench(args.ws, isa, 1, args.reps, formats, args.shape)
            if res is None:
                print(f"  {isa}: not supported by this CPU, skipped", file=sys.stderr)
                paths.remove(isa)
                del runs[isa]
                continue
            runs[isa].append(res)
            if args.baseline and not baseline_first:
                base[isa].append(run_bench(args.baseline, isa, 1, args.reps, formats, args.shape))
        if args.threads2 and paths:
            print(f"round {r + 1}/{args.rounds}: {paths[-1]}, 2 threads", file=sys.stderr)
            runs2.append(run_bench(args.ws, paths[-1], 2, args.reps, formats, args.shape))
    raw = {"cpu": cpu_description(), "paths": runs, "two_threads": runs2, "baseline": base if args.baseline else None}
    if args.save:
        args.save.write_text(json.dumps(raw, indent=1))
    if args.json:
        json.dump(raw, sys.stdout, indent=1)
        return 0

    if not paths:
        print("no path ran", file=sys.stderr)
        return 1
    if args.baseline:
        return compare_table(args, formats, paths, runs, base)
    shape = "x".join(str(d) for d in runs[paths[0]][0]["shape"])
    print(f"CPU: {cpu_description()}")
    print(f"Shape {shape}, hot output, {args.rounds} interleaved rounds of --reps {args.reps}; "
          f"ratio to the same run's memcpy, median of the rounds (range); "
          f"[path]: the format has no kernel of that column's path and ran this one.\n")
    head = ["kernel"] + [f"{p}" for p in paths] + [f"{paths[-1]} GB/s"]
    if runs2:
        head += [f"{paths[-1]} 2T/1T", "memcpy 2T/1T"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    best = paths[-1]
    for f in formats:
        row = [f] + [cell(ratios(runs[p], f), path_of(runs[p], f), p) for p in paths]
        row.append(f"{statistics.median(gbps(runs[best], f)):.2f}")
        if runs2:
            one, two = statistics.median(gbps(runs[best], f)), statistics.median(gbps(runs2, f))
            m1 = statistics.median(gbps(runs[best], f, "memcpy_gbps_median"))
            m2 = statistics.median(gbps(runs2, f, "memcpy_gbps_median"))
            row += [f"{two / one:.2f}", f"{m2 / m1:.2f}"]
        print("| " + " | ".join(row) + " |")
    return 0


def compare_table(args, formats: list[str], paths: list[str], runs: dict, base: dict) -> int:
    """Per path: this binary's ratio to memcpy over the baseline's, round by round."""
    print(f"CPU: {cpu_description()}")
    print(f"{args.ws} over {args.baseline}: each kernel's ratio to memcpy divided by the baseline's from the same "
          f"round, median of {args.rounds} interleaved rounds (range); above 1 is faster.\n")
    head = ["kernel"] + paths
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for f in formats:
        row = [f]
        for p in paths:
            q = [a / b for a, b in zip(ratios(runs[p], f), ratios([x for x in base[p] if x], f))]
            row.append(f"{statistics.median(q):.3f} ({min(q):.3f}-{max(q):.3f})" if q else "-")
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
