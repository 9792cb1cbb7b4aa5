#!/usr/bin/env python3
"""The llama.cpp adapter against llama.cpp's own load and the C API.

    python bench/fronts/llama_load.py MODELS/32k-0.3gb [--formats q4_k_m,q8_0] [--reps 3]

MODELS is what bench/fronts/models.py wrote. Builds llama_load.c against
the pinned llama.cpp (scripts/build_llama_cpp.sh's cached build) and
target/release/libweightstream_c (scripts/setup.sh), then per rep, in an
order that rotates, each in a fresh process, on the CPU, page cache warm:

- adapter FMT: ws_llama_model_load of the GGUF (weightstream's BF16
  written into the buffers llama.cpp allocates);
- capi FMT: the C API's load of every tensor of the same GGUF as BF16;
- llama bf16: llama.cpp's llama_model_load_from_file of the BF16 GGUF of
  the same model, mmap off (read into its buffers, as the adapter fills
  them); llama-mmap bf16: with its default mmap (weights used in place
  from the page cache: pages are touched later, by inference).

Wall time of the call; median and min..max.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ADAPTER = ["ws_llama.c", "ws_llama_hf.c"]


def build(out: Path) -> Path:
    llama = Path(subprocess.run(["bash", str(ROOT / "scripts/build_llama_cpp.sh")], check=True, capture_output=True,
                                text=True).stdout.strip().splitlines()[-1])
    lib = ROOT / "target/release"
    if not (lib / "libweightstream_c.so").exists():
        sys.exit("llama_load: no target/release/libweightstream_c.so: run scripts/setup.sh first")
    exe = out / "llama_load"
    subprocess.run(["cc", "-std=c11", "-O2", "-o", str(exe), str(HERE / "llama_load.c"),
                    *(str(ROOT / "plugins/llamacpp" / f) for f in ADAPTER),
                    f"-I{ROOT}/crates/weightstream-capi/include", f"-I{ROOT}/plugins/llamacpp", f"-I{llama}/include",
                    f"-L{llama}/lib", f"-L{lib}", "-lllama", "-lggml", "-lggml-base", "-lweightstream_c",
                    "-Wl,--disable-new-dtags", f"-Wl,-rpath,{llama}/lib", f"-Wl,-rpath,{lib}"], check=True)
    return exe


def run(exe: Path, mode: str, path: Path) -> float:
    r = subprocess.run([str(exe), mode, str(path)], capture_output=True, text=True)
    lines = [line for line in r.stdout.splitlines() if line.startswith("RESULT ")]
    if r.returncode != 0 or not lines:
        sys.exit(f"{mode} {path}: failed (exit {r.returncode}):\n{r.stderr[-3000:]}")
    return float(lines[0].split()[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", type=Path)
    ap.add_argument("--formats", default="q4_k_m,q8_0")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    formats = a.formats.split(",")
    files = {fmt: a.model / fmt / "model.gguf" for fmt in formats} | {"bf16": a.model / "bf16-gguf" / "model.gguf"}
    for f in files.values():
        with open(f, "rb") as fh:  # warm the page cache
            while fh.read(1 << 24):
                pass
    with tempfile.TemporaryDirectory() as tmp:
        exe = build(Path(tmp))
        cases = [(m, fmt) for fmt in formats for m in ("adapter", "capi")] + [("llama", "bf16"), ("llama-mmap", "bf16")]
        results: dict = {c: [] for c in cases}
        load = os.getloadavg()
        for rep in range(a.reps):
            for mode, fmt in cases[rep % len(cases):] + cases[:rep % len(cases)]:
                results[(mode, fmt)].append(run(exe, mode, files[fmt]))
                print(f"rep {rep + 1} {mode} {fmt}: {results[(mode, fmt)][-1]:.3f} s", file=sys.stderr)
    print(f"{a.model.name}: seconds, median (min..max) of {a.reps}, fresh processes, warm page cache; "
          f"load average {load[0]:.2f} before, {os.getloadavg()[0]:.2f} after")
    for (mode, fmt), ts in results.items():
        print(f"  {mode:10s} {fmt:7s} {statistics.median(ts):7.3f}  ({min(ts):.3f}..{max(ts):.3f})")
    med = {k: statistics.median(v) for k, v in results.items()}
    for fmt in formats:
        print(f"  {fmt}: adapter / capi {med[('adapter', fmt)] / med[('capi', fmt)]:.2f}x, "
              f"adapter / llama.cpp bf16 (mmap off) {med[('adapter', fmt)] / med[('llama', 'bf16')]:.2f}x")


if __name__ == "__main__":
    main()
