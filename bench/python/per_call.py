#!/usr/bin/env python3
"""What one call of the Python package costs, beyond the work it asks for.

    python bench/python/per_call.py MODEL [--reps 200] [--device cpu]

Times, each `--reps` times after one warm-up call: `weightstream.load_file`
(open + load every tensor), `Checkpoint.load()` on one opened checkpoint,
and `Checkpoint.get_tensor` of its smallest (1-D) tensor, whose work is
tiny, so what it shows is the per-call overhead (threads started, waits,
allocations). Median and range in milliseconds.
"""
import argparse
import math
import statistics
import time

import weightstream


def timed(f, reps: int) -> str:
    f()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return f"median {statistics.median(ts) * 1e3:.2f} ms ({min(ts) * 1e3:.2f}..{max(ts) * 1e3:.2f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    print("load_file           ", timed(lambda: weightstream.load_file(a.model, device=a.device), a.reps))
    ck = weightstream.open(a.model, device=a.device)
    print("open once, .load()  ", timed(lambda: ck.load(), a.reps))
    smallest = min(ck.keys(), key=lambda k: math.prod(ck.shape(k)))
    print(f"get_tensor {smallest!r}", timed(lambda: ck.get_tensor(smallest), a.reps))


if __name__ == "__main__":
    main()
