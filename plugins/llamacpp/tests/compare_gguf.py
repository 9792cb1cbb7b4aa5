#!/usr/bin/env python3
"""Compare two GGUF files key for key (type and value) and tensor for
tensor (name, type, shape, bytes): `weightstream convert --to gguf`'s output
against convert_hf_to_gguf.py's, as scripts/test_c.sh runs it:

    python plugins/llamacpp/tests/compare_gguf.py OURS.gguf REFERENCE.gguf [--ignore KEY ...]
    python plugins/llamacpp/tests/compare_gguf.py --pairs LIST   # a line each: OURS REFERENCE [KEY to ignore ...]

Prints each difference (with --pairs, after the pair's file) and exits 1
if there is any. --pairs compares many in one process (gguf-py imported
once: the test command's time). The tensor order may
differ (llama.cpp looks tensors up by name); the key order may too.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np


def fields(reader) -> dict:
    out = {}
    for k, f in reader.fields.items():
        if k.startswith("GGUF."):
            continue
        types = [t.name for t in f.types]
        if types[0] == "ARRAY":
            vals = [bytes(f.parts[i]).decode("utf-8", "surrogateescape") if types[1] == "STRING" else f.parts[i].tolist()
                    for i in f.data]
            if types[1] == "FLOAT32":
                vals = [np.float32(v[0] if isinstance(v, list) else v).tobytes() for v in vals]
        elif types[0] == "STRING":
            vals = bytes(f.parts[f.data[0]]).decode("utf-8", "surrogateescape")
        else:
            vals = f.parts[f.data[0]].tobytes()  # bit patterns: 0.1 and NaN compare exactly
        out[k] = (types, vals)
    return out


def compare(ours: str, reference: str, ignore: list[str]) -> list[str]:
    """Every difference of `ours` from `reference`, keys in `ignore` aside."""
    import gguf

    a, b = gguf.GGUFReader(ours), gguf.GGUFReader(reference)
    fa, fb = fields(a), fields(b)
    diffs = []
    for k in sorted(set(fa) | set(fb)):
        if k in ignore:
            continue
        if k not in fa:
            diffs.append(f"key {k}: missing (reference: {fb[k][0]} {str(fb[k][1])[:80]})")
        elif k not in fb:
            diffs.append(f"key {k}: not in the reference (ours: {fa[k][0]} {str(fa[k][1])[:80]})")
        elif fa[k] != fb[k]:
            ta, va = fa[k]
            tb, vb = fb[k]
            if ta != tb:
                diffs.append(f"key {k}: type {ta}, reference {tb}")
            elif isinstance(va, list) and len(va) == len(vb):
                i = next(i for i in range(len(va)) if va[i] != vb[i])
                diffs.append(f"key {k}: element {i} is {va[i]!r}, reference {vb[i]!r}")
            else:
                diffs.append(f"key {k}: {str(va)[:80]}, reference {str(vb)[:80]}")
    ta = {t.name: t for t in a.tensors}
    tb = {t.name: t for t in b.tensors}
    for n in sorted(set(ta) | set(tb)):
        if n not in ta or n not in tb:
            diffs.append(f"tensor {n}: only in {'ours' if n in ta else 'the reference'}")
            continue
        x, y = ta[n], tb[n]
        if x.tensor_type != y.tensor_type or list(x.shape) != list(y.shape):
            diffs.append(f"tensor {n}: {x.tensor_type.name} {list(x.shape)}, reference {y.tensor_type.name} {list(y.shape)}")
        elif bytes(x.data.view(np.uint8)) != bytes(y.data.view(np.uint8)):
            xb, yb = x.data.view(np.uint8).ravel(), y.data.view(np.uint8).ravel()
            i = int(np.nonzero(xb != yb)[0][0])
            diffs.append(f"tensor {n}: bytes differ from byte {i}")
    return diffs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ours", nargs="?")
    ap.add_argument("reference", nargs="?")
    ap.add_argument("--ignore", action="append", default=[], help="a key to leave out of the comparison")
    ap.add_argument("--pairs", help="a file of lines OURS REFERENCE [KEY to ignore ...]")
    args = ap.parse_args()
    if args.pairs:
        pairs = [line.split() for line in open(args.pairs) if line.strip()]
        if not pairs or args.ours or any(len(p) < 2 for p in pairs):
            ap.error("--pairs takes a non-empty file of OURS REFERENCE [KEY ...] lines, and no files of its own")
    elif args.ours and args.reference:
        pairs = [[args.ours, args.reference]]
    else:
        ap.error("give OURS and REFERENCE, or --pairs LIST")
    failed = 0
    for ours, reference, *ignore in pairs:
        diffs = compare(ours, reference, args.ignore + ignore)
        for d in diffs:
            print(f"{ours}: {d}" if args.pairs else d)
        failed += bool(diffs)
    if args.pairs:
        print(f"compare_gguf: {len(pairs) - failed} of {len(pairs)} pairs identical")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
