#!/usr/bin/env python3
"""`weightstream convert` against the time the disk needs for its output.

    python3 bench/io/convert.py --ws target/release/weightstream [--reps 7] [--shape 4096x11008] [--format q4_0]

Writes a GGUF holding one random matrix of the given format, then, run by
run and interleaved, times (a) `weightstream convert` of it to a BF16
safetensors file (dequantize, write, fsync) and (b) `dd conv=fsync` writing
the same number of bytes from /dev/zero to the same directory. Reports the
median and range of each and the ratio of the medians: 1.0x means convert
runs at the speed of its output. Both outputs are deleted after each run.
`--json` prints the figures for scripts.
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

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests/fixtures"))


def make_gguf(path: Path, rows: int, cols: int, fmt: str, seed: int) -> None:
    import gguf
    import sample_model

    q = gguf.GGMLQuantizationType[fmt.upper()]
    w = gguf.GGUFWriter(str(path), arch="llama")
    w.add_tensor("w", sample_model.random_blocks(np.random.default_rng(seed), (rows, cols), q), raw_dtype=q)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def timed(cmd: list, env=None) -> float:
    t0 = time.perf_counter()
    subprocess.run([str(c) for c in cmd], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ws", type=Path, required=True, help="the weightstream CLI")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--shape", default="4096x11008")
    ap.add_argument("--format", default="q4_0", help="a GGUF block format gguf-py knows (q4_0, q8_0, q4_k, ...)")
    ap.add_argument("--threads", type=int, default=None, help="convert --threads (default: all cores)")
    ap.add_argument("--dir", type=Path, default=None, help="where to write (default: a temporary directory)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows, cols = (int(x) for x in args.shape.lower().split("x"))
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        d = Path(d)
        src = d / "src.gguf"
        make_gguf(src, rows, cols, args.format, 0)
        out = d / "out.safetensors"
        extra = ["--threads", args.threads] if args.threads else []
        convert_cmd = [args.ws, "convert", src, "-o", out, "--force", *extra]
        subprocess.run([str(c) for c in convert_cmd], check=True, capture_output=True)  # warm: page cache, binary
        nbytes = out.stat().st_size
        out.unlink()
        dd_cmd = ["dd", "if=/dev/zero", f"of={d / 'dd.bin'}", "bs=4M", f"count={-(-nbytes // (4 << 20))}", "conv=fsync", "status=none"]
        conv, dd = [], []
        for _ in range(args.reps):
            conv.append(timed(convert_cmd))
            out.unlink()
            dd.append(timed(dd_cmd))
            (d / "dd.bin").unlink()
    r = {
        "shape": [rows, cols], "format": args.format, "out_bytes": nbytes, "reps": args.reps,
        "convert_s": {"median": statistics.median(conv), "min": min(conv), "max": max(conv)},
        "dd_fsync_s": {"median": statistics.median(dd), "min": min(dd), "max": max(dd)},
        "ratio": statistics.median(conv) / statistics.median(dd),
        "cpus": os.cpu_count(),
    }
    if args.json:
        print(json.dumps(r, indent=1))
    else:
        c, k = r["convert_s"], r["dd_fsync_s"]
        print(f"{args.format} {rows}x{cols} -> {nbytes / 1e6:.1f} MB BF16, {args.reps} interleaved runs")
        print(f"  convert        {c['median'] * 1e3:7.1f} ms  ({c['min'] * 1e3:.1f}..{c['max'] * 1e3:.1f})")
        print(f"  dd conv=fsync  {k['median'] * 1e3:7.1f} ms  ({k['min'] * 1e3:.1f}..{k['max'] * 1e3:.1f})")
        print(f"  ratio {r['ratio']:.2f}x (convert / dd)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
