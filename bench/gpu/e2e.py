#!/usr/bin/env python3
"""End-to-end loads of Llama-7B-shaped checkpoints from a warm page cache,
against baselines measured in the same run:

- pinned H2D: a copy of the same number of bytes from pinned host memory
  (the PCIe ceiling for moving the file);
- safetensors.torch.load_file(device="cuda") of the BF16 checkpoint;
- gguf-py's dequantize on the CPU plus .to("cuda") for the Q4_0 file;
- weightstream load --device cuda for Q4_0, Q4_K_M (Q4_K + Q6_K), IQ4_XS (+ IQ4_NL), MXFP4, Q8_0,
  block-FP8 and BF16;
- a sweep of staging slots, slot size and reader threads on Q4_0.

    python3 bench/gpu/e2e.py --ws .gpu-carry/bin/weightstream --dir /tmp/ws-e2e --out e2e.json

--dry-run runs the same steps on a tiny model on the CPU (no torch needed),
to check the script itself on a machine without a GPU.
"""
from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORMATS = {"q4_0": "{p}-llama-q4_0.gguf", "q4_k_m": "{p}-llama-q4_k_m.gguf", "q8_0": "{p}-llama-q8_0.gguf",
           "iq4_xs": "{p}-llama-iq4_xs.gguf", "mxfp4": "{p}-llama-mxfp4.gguf",
           "fp8": "{p}-llama-fp8", "bf16": "{p}-llama-bf16"}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def files_of(path: Path) -> list[Path]:
    return sorted(path.glob("*.safetensors")) if path.is_dir() else [path]


def size_of(path: Path) -> int:
    return sum(f.stat().st_size for f in files_of(path))


def warm(path: Path):
    for f in files_of(path):
        with open(f, "rb") as fh:
            while fh.read(64 << 20):
                pass


def stats(xs: list[float]) -> dict:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "runs": xs}


def generate(d: Path, preset: str):
    missing = [f for f, pat in FORMATS.items() if not (d / pat.format(p=preset)).exists()]
    if missing:
        t = time.perf_counter()
        subprocess.run([sys.executable, ROOT / "tests/fixtures/sample_model.py", "--out", d, "--preset", preset, "--formats", ",".join(missing)], check=True)
        log(f"generated {missing} in {time.perf_counter() - t:.0f} s")


def ws_load(ws: Path, path: Path, device: str, extra=()) -> dict:
    r = subprocess.run([ws, "load", path, "--device", device, "--json", *map(str, extra)], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"weightstream load {path} failed: {r.stderr}")
    return json.loads(r.stdout)


def ours(ws: Path, d: Path, preset: str, device: str, reps: int) -> dict:
    out = {}
    for fmt, pat in FORMATS.items():
        p = d / pat.format(p=preset)
        runs = [ws_load(ws, p, device) for _ in range(reps)]
        secs = [r["seconds"] for r in runs]
        out[fmt] = {"file_bytes": runs[0]["src_bytes"], "bf16_bytes": runs[0]["out_bytes"], "seconds": stats(secs),
                    "file_gbps": runs[0]["src_bytes"] / statistics.median(secs) / 1e9,
                    "bf16_gbps": runs[0]["out_bytes"] / statistics.median(secs) / 1e9, "detail": runs[0]["detail"]}
        log(f"weightstream {fmt}: {statistics.median(secs):.3f} s, file {out[fmt]['file_gbps']:.1f} GB/s, BF16 {out[fmt]['bf16_gbps']:.1f} GB/s")
    return out


def staging_sweep(ws: Path, path: Path, device: str) -> list[dict]:
    rows = []
    for slots in (4, 8, 16):
        for mib in (4, 16, 64):
            for readers in (2, 4, 8):
                if readers > slots:
                    continue
                r = [ws_load(ws, path, device, ["--staging-slots", slots, "--staging-mib", mib, "--readers", readers]) for _ in range(2)]
                secs = min(x["seconds"] for x in r)
                rows.append({"slots": slots, "slot_mib": mib, "readers": readers, "seconds": secs, "file_gbps": r[0]["src_bytes"] / secs / 1e9})
                log(f"staging {slots} x {mib} MiB, {readers} readers: {rows[-1]['file_gbps']:.1f} GB/s")
    return rows


def torch_baselines(d: Path, preset: str, reps: int) -> dict:
    import torch
    from safetensors.torch import load_file

    dev = torch.device("cuda")
    torch.zeros(1, device=dev)  # context up before any timing
    out = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}

    def timed(fn):
        torch.cuda.synchronize()
        t = time.perf_counter()
        r = fn()
        torch.cuda.synchronize()
        return time.perf_counter() - t, r

    # Pinned H2D of each checkpoint's byte count.
    h2d = {}
    for fmt, pat in FORMATS.items():
        n = size_of(d / pat.format(p=preset))
        host = torch.empty(n, dtype=torch.uint8, pin_memory=True)
        host.fill_(7)
        dst = torch.empty(n, dtype=torch.uint8, device=dev)
        dst.copy_(host, non_blocking=True)
        secs = [timed(lambda: dst.copy_(host, non_blocking=True))[0] for _ in range(reps)]
        h2d[fmt] = {"bytes": n, "seconds": stats(secs), "gbps": n / statistics.median(secs) / 1e9}
        log(f"pinned H2D {fmt} bytes: {h2d[fmt]['gbps']:.1f} GB/s")
        del host, dst
        torch.cuda.empty_cache()
    out["pinned_h2d"] = h2d

    bf16 = files_of(d / FORMATS["bf16"].format(p=preset))
    secs = []
    for _ in range(reps):
        s, tensors = timed(lambda: {k: v for f in bf16 for k, v in load_file(str(f), device="cuda").items()})
        secs.append(s)
        del tensors
        gc.collect()
        torch.cuda.empty_cache()
    n = size_of(d / FORMATS["bf16"].format(p=preset))
    out["safetensors_bf16"] = {"bytes": n, "seconds": stats(secs), "gbps": n / statistics.median(secs) / 1e9}
    log(f"safetensors.torch.load_file BF16: {statistics.median(secs):.3f} s")

    import gguf
    import numpy as np

    q4 = d / FORMATS["q4_0"].format(p=preset)

    def gguf_py():
        r = gguf.GGUFReader(q4)
        res = {}
        for t in r.tensors:
            x = gguf.quants.dequantize(t.data, t.tensor_type)
            res[t.name] = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(torch.bfloat16).to(dev)
        return res

    s, tensors = timed(gguf_py)
    del tensors
    torch.cuda.empty_cache()
    out["gguf_py_q4_0"] = {"bytes": size_of(q4), "seconds": stats([s]), "gbps": size_of(q4) / s / 1e9}
    log(f"gguf-py dequantize + .to(cuda) Q4_0: {s:.1f} s")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ws", type=Path, required=True, help="the weightstream binary")
    ap.add_argument("--dir", type=Path, required=True, help="where the checkpoints are (generated if missing)")
    ap.add_argument("--out", type=Path, help="JSON results (required unless --generate-only)")
    ap.add_argument("--generate-only", action="store_true", help="only make sure the checkpoints exist")
    ap.add_argument("--preset", default="7b")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dry-run", action="store_true", help="tiny model, CPU only: checks this script")
    ap.add_argument("--skip-sweep", action="store_true")
    args = ap.parse_args()
    preset, device = ("tiny", "cpu") if args.dry_run else (args.preset, "cuda")
    args.dir.mkdir(parents=True, exist_ok=True)
    generate(args.dir, preset)
    if args.generate_only:
        return
    if args.out is None:
        ap.error("--out is required")
    for pat in FORMATS.values():
        warm(args.dir / pat.format(p=preset))
    result = {"preset": preset, "device": device, "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    if not args.dry_run:
        result["baselines"] = torch_baselines(args.dir, preset, args.reps)
    result["weightstream"] = ours(args.ws, args.dir, preset, device, args.reps)
    if not args.skip_sweep:
        result["staging_sweep"] = staging_sweep(args.ws, args.dir / FORMATS["q4_0"].format(p=preset), device)
    args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
