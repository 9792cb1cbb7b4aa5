#!/usr/bin/env python3
"""A/B of the GGUF q/k un-permutation on the CPU (issue 45): every
attn_q/attn_k weight of a llama GGUF dequantized into its destination
(a) into a temporary, then one strided torch copy into place (what the
vLLM plugin did) against (b) by the library, rows written to their
un-permuted places on the way (`load_into(unpermute=)`). Fresh
destinations each rep, as a load's parameters are; alternating order.

    python bench/python/unpermute_ab.py MODEL.gguf [--reps 7] [--rank R/N]

--rank R/N: rank R's share of N tensor-parallel ranks (whole heads).
Prints median (min..max) seconds per way and their ratio.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

import weightstream

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins/vllm"))
from weightstream.serving.gguf_names import Unpermuter  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--rank", default="0/1")
    a = ap.parse_args()
    rank, ranks = (int(x) for x in a.rank.split("/"))
    ck = weightstream.open(a.model)
    md = ck.metadata(tokenizer=False)
    arch = md["general.architecture"]

    class Cfg:
        num_attention_heads = md[f"{arch}.attention.head_count"]
        num_key_value_heads = md.get(f"{arch}.attention.head_count_kv", num_attention_heads)

    un = Unpermuter(md, Cfg)
    names = [n for n in ck.keys() if un.rows_per_head(n, ck.matrix(n)[0])]
    per = {n: un.rows_per_head(n, ck.matrix(n)[0]) for n in names}
    slices = []
    for n in names:
        rows = ck.matrix(n)[0]
        share = rows // ranks
        slices.append(((rank * share, (rank + 1) * share), None))

    def dests():
        return [torch.empty(ck.slice_shape(n, *s), dtype=torch.bfloat16) for n, s in zip(names, slices)]

    def temp_and_copy() -> list:
        out, temps = dests(), dests()
        ck.load_into(names, temps, slices=slices)
        for n, t, d in zip(names, temps, out):
            un.into(n, t, d, ck.matrix(n)[0])
        return out

    def in_library() -> list:
        out = dests()
        ck.load_into(names, out, slices=slices, unpermute=[per[n] for n in names])
        return out

    ways = {"temporary + torch copy": temp_and_copy, "library (unpermute=)": in_library}
    first = [w() for w in ways.values()]
    assert all(torch.equal(x.view(torch.int16), y.view(torch.int16)) for x, y in zip(*first)), "the two ways differ"
    del first
    times: dict[str, list[float]] = {k: [] for k in ways}
    for rep in range(a.reps):
        for k in (list(ways) if rep % 2 == 0 else list(ways)[::-1]):
            t0 = time.perf_counter()
            ways[k]()
            times[k].append(time.perf_counter() - t0)
    mb = sum(d.numel() * 2 for d in dests()) / 1e6
    print(f"{a.model}: {len(names)} q/k tensors, {mb:.0f} MB of BF16 (rank {rank} of {ranks}), "
          f"{torch.get_num_threads()} torch threads, {a.reps} reps")
    for k, ts in times.items():
        print(f"  {k:26s} {statistics.median(ts):.4f} s ({min(ts):.4f}..{max(ts):.4f})")
    base, new = (statistics.median(times[k]) for k in ways)
    print(f"  library / temporary: {new / base:.2f}x")


if __name__ == "__main__":
    main()
