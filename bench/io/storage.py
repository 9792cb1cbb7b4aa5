#!/usr/bin/env python3
"""Cold- and warm-cache loads through each byte source, against a plain
sequential read of the same files measured in the same run.

    python3 bench/io/storage.py --ws target/release/weightstream --device cpu \\
        --model /data/7b-llama-bf16 --model /data/7b-llama-q4_0.gguf --reps 3 --out storage.json

For every model and repetition, in an order that rotates between
repetitions (so drift in the drive or the host does not favour one entry):

- baseline: `dd if=FILE of=/dev/null bs=16M iflag=direct` over the files
  (the device's sequential read bandwidth; page cache dropped first);
- cold: `weightstream load --source S --discard` for each source, the page
  cache dropped before each run (with --read-only: `load --read-only`, the
  bytes read through the source and the read-ahead exactly as a load does,
  not dequantized, so the storage path is measured alone);
- warm: the same with the files read into the page cache first.

The page cache is dropped with posix_fadvise(DONTNEED) on every file (no
root needed), and also through /proc/sys/vm/drop_caches where that is
writable. Reported per entry: median seconds and GB/s of file bytes, and the
ratio of its throughput to the baseline's in the same repetition (median,
min, max); warm entries are compared with warm mmap. JSON to --out, a
markdown table to stdout.
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


def files_of(path: Path) -> list[Path]:
    return sorted(path.glob("*.safetensors")) if path.is_dir() else [path]


def drop_cache(path: Path, system: bool = True) -> str:
    """Drop the files' pages from the page cache: fsync (dirty pages stay
    cached) and posix_fadvise(DONTNEED) on each file; with `system`, also
    /proc/sys/vm/drop_caches where that is writable (root). Returns how."""
    for f in files_of(path):
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    if not system:
        return "fadvise"
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return "fadvise+drop_caches"
    except OSError:
        return "fadvise"


def warm_up(path: Path) -> None:
    for f in files_of(path):
        with open(f, "rb") as fh:
            while fh.read(64 << 20):
                pass


def dd(path: Path) -> float:
    t = time.perf_counter()
    for f in files_of(path):
        subprocess.run(["dd", f"if={f}", "of=/dev/null", "bs=16M", "iflag=direct"], check=True, capture_output=True)
    return time.perf_counter() - t


def load(ws: str, path: Path, device: str, source: str, extra: list[str]) -> dict:
    r = subprocess.run([ws, "load", str(path), "--device", device, "--source", source, "--discard", "--json", *extra],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"weightstream load --source {source} {path} failed: {r.stderr.strip()}")
    return json.loads(r.stdout)


def summary(xs: list[float]) -> dict:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "runs": xs}


def render(results: list[dict]) -> list[str]:
    """Markdown tables of storage.py's JSON results."""
    out = []
    for r in results:
        out += ["", f"{Path(r['model']).name}: {r['bytes'] / 1e9:.2f} GB on {r['device']}, page cache dropped with {r['evict']}"
                + (f", extra arguments {' '.join(r['extra'])}" if r["extra"] else ""), "",
                "| run | source used | median s | GB/s | ratio (median, min-max) | compared with |", "|---|---|---|---|---|---|"]
        for e, v in r["entries"].items():
            rt = v["ratio"]
            rs = f"{rt['median']:.2f} ({rt['min']:.2f}-{rt['max']:.2f})" if rt else "-"
            against = "dd iflag=direct, same rep" if e.startswith("cold:") else ("warm mmap, same rep" if e.startswith("warm:") else "")
            out.append(f"| {e} | {v['source_used']} | {v['seconds']['median']:.2f} | {v['gbps']:.2f} | {rs} | {against} |")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ws", required=True, help="the weightstream binary")
    ap.add_argument("--model", action="append", required=True, type=Path, help="a checkpoint (repeatable)")
    ap.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    ap.add_argument("--sources", default="auto,read,mmap,direct", help="comma-separated; add gds on a GPU")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--no-warm", action="store_true", help="cold runs only")
    ap.add_argument("--files-only", action="store_true",
                    help="evict only the model's own pages (posix_fadvise), never the machine's whole page cache "
                         "(for checks on a machine other work shares: scripts/gpu_round.sh check)")
    ap.add_argument("--read-only", action="store_true",
                    help="CPU: read the bytes through each source as a load does, without dequantizing (the storage path alone)")
    ap.add_argument("--extra", default="", help="more arguments for weightstream load, e.g. '--readers 8'")
    ap.add_argument("--out", type=Path, help="JSON results")
    a = ap.parse_args()
    sources = [s for s in a.sources.split(",") if s]
    extra = a.extra.split() + (["--read-only"] if a.read_only else [])
    results = []
    for model in a.model:
        size = sum(f.stat().st_size for f in files_of(model))
        entries = ["baseline"] + [f"cold:{s}" for s in sources] + ([] if a.no_warm else [f"warm:{s}" for s in sources])
        secs: dict[str, list[float]] = {e: [] for e in entries}
        ratio: dict[str, list[float]] = {e: [] for e in entries}
        chosen: dict[str, str] = {}
        evict = ""
        for rep in range(a.reps):
            k = rep % (len(sources) + 1)
            cold_order = (["baseline"] + [f"cold:{s}" for s in sources])
            cold_order = cold_order[k:] + cold_order[:k]
            for e in cold_order:
                evict = drop_cache(model, system=not a.files_only)
                if e == "baseline":
                    secs[e].append(dd(model))
                else:
                    r = load(a.ws, model, a.device, e[5:], extra)
                    secs[e].append(r["seconds"])
                    chosen[e] = ", ".join(sorted({s["source"] for s in r["sources"]}))
                print(f"{model.name} rep {rep}: {e}: {secs[e][-1]:.2f} s", file=sys.stderr, flush=True)
            base = secs["baseline"][-1]
            for s in sources:
                ratio[f"cold:{s}"].append(base / secs[f"cold:{s}"][-1])
            if not a.no_warm:
                warm_up(model)
                warm_order = sources[k % len(sources):] + sources[:k % len(sources)]
                for s in warm_order:
                    r = load(a.ws, model, a.device, s, extra)
                    secs[f"warm:{s}"].append(r["seconds"])
                    chosen[f"warm:{s}"] = ", ".join(sorted({x["source"] for x in r["sources"]}))
                    print(f"{model.name} rep {rep}: warm:{s}: {r['seconds']:.2f} s", file=sys.stderr, flush=True)
                if "mmap" in sources:
                    for s in sources:
                        ratio[f"warm:{s}"].append(secs["warm:mmap"][-1] / secs[f"warm:{s}"][-1])
        results.append({
            "model": str(model), "bytes": size, "device": a.device, "evict": evict, "extra": extra,
            "entries": {e: {"seconds": summary(secs[e]), "gbps": size / statistics.median(secs[e]) / 1e9,
                            "ratio": summary(ratio[e]) if ratio[e] else None, "source_used": chosen.get(e, "dd")}
                        for e in entries},
        })
    if a.out:
        a.out.write_text(json.dumps(results, indent=1))
    print("\n".join(render(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
