#!/usr/bin/env python3
"""End-to-end loads of Llama-7B-shaped checkpoints from a warm page cache,
against baselines measured in the same run:

- pinned H2D: a copy of the same number of bytes from pinned host memory
  (the PCIe ceiling for moving the file);
- safetensors.torch.load_file(device="cuda") of the BF16 checkpoint;
- gguf-py's dequantize on the CPU plus .to("cuda") for the Q4_0 file (for
  at most --gguf-py-seconds: the rate over the tensors done by then);
- weightstream load --device cuda for Q4_0, Q4_K_M (Q4_K + Q6_K), IQ4_XS (+ IQ4_NL), MXFP4, Q8_0,
  block-FP8 and BF16, through each of --sources;
- a sweep of staging slots, slot size and reader threads on Q4_0;
- in-process repeated loads of Q4_0 (issue 56 item 4): one Python process
  opens the checkpoint once and loads every tensor --reps + 1 times, at 4,
  8 and 12 readers: the first load pays the process's staging ring, the
  others show what a warm process pays per load.

    python3 bench/gpu/e2e.py --ws .gpu-carry/bin/weightstream --dir /tmp/ws-e2e --out e2e.json
    python3 bench/gpu/e2e.py ... --formats q4_0,bf16 --reps 2 --baselines h2d,safetensors --skip-sweep

The checkpoints are generated where missing (tests/fixtures/sample_model.py;
the 7B set is about 42 GB): with several --dir, in the one that already
holds them, else the disk-backed one with the most free space (tmpfs such
as /dev/shm only if no disk has room, never with --no-tmpfs); free space is
checked first and the script stops with a message if no directory has
room. --generate-only prints the directory used. Results are written to
--out after every phase (a later failure or timeout keeps what was
measured); a phase that fails is recorded under "errors" and the script
exits 1 after the rest. --budget stops starting new measurements after
that many seconds.

--dry-run runs the same steps on a tiny model on the CPU (no torch needed),
to check the script itself on a machine without a GPU.
"""
from __future__ import annotations

import argparse
import gc
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORMATS = {"q4_0": "{p}-llama-q4_0.gguf", "q4_k_m": "{p}-llama-q4_k_m.gguf", "q8_0": "{p}-llama-q8_0.gguf",
           "iq4_xs": "{p}-llama-iq4_xs.gguf", "mxfp4": "{p}-llama-mxfp4.gguf",
           "fp8": "{p}-llama-fp8", "bf16": "{p}-llama-bf16"}
# File bytes per weight element, rounded up (Q4_K_M: Q6_K's 210/256 for
# every tensor; FP8: one byte plus its share of a 128x128 block's f32 scale).
BYTES_PER_ELEMENT = {"q4_0": 18 / 32, "q4_k_m": 210 / 256, "q8_0": 34 / 32, "iq4_xs": 18 / 32, "mxfp4": 17 / 32,
                     "fp8": 1 + 4 / 128**2, "bf16": 2}
BASELINES = ("h2d", "safetensors", "gguf-py")
T0 = time.perf_counter()


def log(*a):
    print(*a, file=sys.stderr, flush=True)


class OutOfTime(Exception):
    pass


BUDGET = None  # seconds since T0 after which no new measurement starts


def check_budget(what: str):
    if BUDGET is not None and time.perf_counter() - T0 > BUDGET:
        raise OutOfTime(f"--budget {BUDGET:.0f} s spent before {what}")


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


def expected_bytes(preset: str, fmt: str) -> int:
    """An upper bound on the checkpoint's size, from the preset's shapes."""
    sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
    import sample_model

    n = sum(math.prod(shape) for _, _, shape in sample_model.hf_tensors(sample_model.PRESETS[preset]))
    return int(n * BYTES_PER_ELEMENT[fmt] * 1.01) + (1 << 20)


def fs_type(path: Path) -> str:
    """The file system type of the mount holding path (from /proc/mounts)."""
    path, best, kind = path.resolve(), "", "?"
    try:
        for line in open("/proc/mounts"):
            parts = line.split()
            mnt = parts[1].replace("\\040", " ")
            if (str(path) == mnt or str(path).startswith(mnt.rstrip("/") + "/")) and len(mnt) > len(best):
                best, kind = mnt, parts[2]
    except OSError:
        pass
    return kind


def existing_parent(path: Path) -> Path:
    while not path.exists():
        path = path.parent
    return path


def pick_dir(dirs: list[Path], preset: str, formats: list[str], tmpfs_ok: bool) -> Path:
    """The candidate that already holds every checkpoint; else the one with
    room for the missing ones: disk-backed before tmpfs, most free space
    first. Exits with every candidate's free space if none has room."""
    rows = []
    for d in dirs:
        missing = [f for f in formats if not (d / FORMATS[f].format(p=preset)).exists()]
        need = sum(expected_bytes(preset, f) for f in missing)
        free = shutil.disk_usage(existing_parent(d)).free
        tmpfs = fs_type(existing_parent(d)) in ("tmpfs", "ramfs")
        rows.append((d, missing, need, free, tmpfs))
        if not missing and (tmpfs_ok or not tmpfs):
            return d
    fits = [r for r in rows if r[3] >= r[2] + (1 << 30) and (tmpfs_ok or not r[4])]
    if not fits:
        lines = [f"  {d}: {free / 1e9:.1f} GB free{' (tmpfs)' if tmpfs else ''}, {need / 1e9:.1f} GB needed for {','.join(missing)}"
                 for d, missing, need, free, tmpfs in rows]
        sys.exit("e2e: no directory has room for the checkpoints (1 GB kept spare"
                 + ("" if tmpfs_ok else "; tmpfs not allowed here") + "):\n" + "\n".join(lines)
                 + "\npick fewer --formats or another --dir")
    d, missing, need, free, tmpfs = max(fits, key=lambda r: (not r[4], r[3]))
    log(f"e2e: checkpoints in {d} ({free / 1e9:.1f} GB free{', tmpfs' if tmpfs else ''}; {need / 1e9:.1f} GB to write)")
    return d


def generate(d: Path, preset: str, formats: list[str]):
    missing = [f for f in formats if not (d / FORMATS[f].format(p=preset)).exists()]
    if missing:
        d.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        subprocess.run([sys.executable, ROOT / "tests/fixtures/sample_model.py", "--out", d, "--preset", preset, "--formats", ",".join(missing)], check=True)
        log(f"generated {missing} in {time.perf_counter() - t:.0f} s")


def ws_load(ws: Path, path, device: str, extra=()) -> dict:
    check_budget(f"loading {path if isinstance(path, str) else path.name}")
    r = subprocess.run([ws, "load", path, "--device", device, "--json", *map(str, extra)], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"weightstream load {path} {' '.join(map(str, extra))} failed: {r.stderr}")
    return json.loads(r.stdout)


def ours(ws: Path, d: Path, preset: str, device: str, reps: int, formats: list[str], sources: list[str], save) -> dict:
    """weightstream per format and source; keyed by format (source auto) or
    'format (source)'; saved after each."""
    out = {}
    from range_server import Serving  # bench/gpu, beside this file

    with Serving(d) as base:
        for fmt in formats:
            for source in sources:
                p = d / FORMATS[fmt].format(p=preset)
                if source.startswith("http") and p.suffix != ".gguf":
                    log(f"weightstream {fmt} ({source}): skipped, an http:// URL names one file (this checkpoint is a directory)")
                    continue
                run_one(ws, base, p, fmt, source, device, reps, out)
                save(out)
    return out


def run_one(ws: Path, base: str, p: Path, fmt: str, source: str, device: str, reps: int, out: dict):
    """One format through one source: `http` reads the file over loopback
    HTTP (object storage's parallel ranged GETs) from range_server.py;
    `http-cached` the same URL through the local cache (docs/storage.md),
    filled by one untimed load first, so the timed loads read the cache
    (one HEAD each to check the version)."""
    if source == "http-cached":
        cache = p.parent / f"ws-cache-{p.stem}"
        shutil.rmtree(cache, ignore_errors=True)
        target, extra = f"{base}/{p.name}", ["--cache", cache]
        ws_load(ws, target, device, extra)
    else:
        target, extra = (f"{base}/{p.name}", []) if source == "http" else (p, ["--source", source])
    runs = [ws_load(ws, target, device, extra) for _ in range(reps)]
    if source == "http-cached":
        shutil.rmtree(cache, ignore_errors=True)
    secs = [r["seconds"] for r in runs]
    key = fmt if source == "auto" else f"{fmt} ({source})"
    out[key] = {"format": fmt, "source": source, "file_bytes": runs[0]["src_bytes"], "bf16_bytes": runs[0]["out_bytes"],
                "seconds": stats(secs), "file_gbps": runs[0]["src_bytes"] / statistics.median(secs) / 1e9,
                "bf16_gbps": runs[0]["out_bytes"] / statistics.median(secs) / 1e9, "detail": runs[0]["detail"],
                "phases": sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2]["phases"]}
    log(f"weightstream {key}: {statistics.median(secs):.3f} s, file {out[key]['file_gbps']:.1f} GB/s, BF16 {out[key]['bf16_gbps']:.1f} GB/s")


def staging_sweep(ws: Path, path: Path, device: str, reps: int, save) -> list[dict]:
    """Ring geometries and reader counts, each load its own process (so
    each pins its ring); on a GPU the default geometry also write-combined."""
    rows = []
    shapes = [(slots, mib, readers, False) for slots in (4, 8, 16) for mib in (4, 16, 64) for readers in (2, 4, 8, 12) if readers <= slots]
    # Write-combined pinning is a GPU ring's (the CPU dry run has none).
    shapes += [(8, 4, readers, True) for readers in (4, 8) if device != "cpu"]
    for slots, mib, readers, wc in shapes:
        extra = ["--staging-slots", slots, "--staging-mib", mib, "--readers", readers] + (["--write-combined"] if wc else [])
        r = [ws_load(ws, path, device, extra) for _ in range(reps)]
        best = min(r, key=lambda x: x["seconds"])
        secs = best["seconds"]
        rows.append({"slots": slots, "slot_mib": mib, "readers": readers, "write_combined": wc, "seconds": secs,
                     "file_gbps": r[0]["src_bytes"] / secs / 1e9, "phases": best["phases"]})
        log(f"staging {slots} x {mib} MiB, {readers} readers{', write-combined' if wc else ''}: {rows[-1]['file_gbps']:.1f} GB/s")
        save(rows)
    return rows


# One process, one open, repeated loads (the in_process phase).
IN_PROCESS = r"""
import json, sys, time
import weightstream
path, device, reps, readers = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
ck = weightstream.open(path, device=device, readers=readers)
sync = (lambda: __import__("torch").cuda.synchronize()) if device.startswith("cuda") else (lambda: None)
times = []
for _ in range(reps + 1):
    t = time.perf_counter()
    out = ck.load()
    sync()
    times.append(time.perf_counter() - t)
    del out
print(json.dumps({"first_s": times[0], "warm_s": times[1:], "file_bytes": ck.bytes_read // (reps + 1)}))
"""


def in_process(path: Path, device: str, reps: int, save) -> list[dict]:
    """Repeated loads in one process (IN_PROCESS), at 4, 8 and 12 readers."""
    rows = []
    for readers in (4, 8, 12):
        check_budget(f"in-process loads of {path.name} with {readers} readers")
        r = subprocess.run([sys.executable, "-c", IN_PROCESS, str(path), device, str(max(reps, 2)), str(readers)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"in-process loads of {path.name} failed: {r.stderr[-2000:]}")
        got = json.loads(r.stdout.strip().splitlines()[-1])
        rows.append({"readers": readers, "first_s": got["first_s"], "warm": stats(got["warm_s"]), "file_bytes": got["file_bytes"],
                     "warm_file_gbps": got["file_bytes"] / statistics.median(got["warm_s"]) / 1e9})
        log(f"in-process {path.name}, {readers} readers: first {got['first_s']:.3f} s, warm {statistics.median(got['warm_s']):.3f} s")
        save(rows)
    return rows


def torch_baselines(d: Path, preset: str, reps: int, formats: list[str], baselines: list[str], gguf_py_seconds: float, save) -> dict:
    import torch

    dev = torch.device("cuda")
    torch.zeros(1, device=dev)  # context up before any timing
    out = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}

    def timed(fn):
        torch.cuda.synchronize()
        t = time.perf_counter()
        r = fn()
        torch.cuda.synchronize()
        return time.perf_counter() - t, r

    if "h2d" in baselines:
        # Pinned H2D of each checkpoint's byte count.
        h2d = out["pinned_h2d"] = {}
        for fmt in formats:
            check_budget(f"pinned H2D of {fmt}")
            n = size_of(d / FORMATS[fmt].format(p=preset))
            host = torch.empty(n, dtype=torch.uint8, pin_memory=True)
            host.fill_(7)
            dst = torch.empty(n, dtype=torch.uint8, device=dev)
            dst.copy_(host, non_blocking=True)
            secs = [timed(lambda: dst.copy_(host, non_blocking=True))[0] for _ in range(reps)]
            h2d[fmt] = {"bytes": n, "seconds": stats(secs), "gbps": n / statistics.median(secs) / 1e9}
            log(f"pinned H2D {fmt} bytes: {h2d[fmt]['gbps']:.1f} GB/s")
            del host, dst
            torch.cuda.empty_cache()
            save(out)

    if "safetensors" in baselines and "bf16" in formats:
        from safetensors.torch import load_file

        bf16 = files_of(d / FORMATS["bf16"].format(p=preset))
        secs = []
        for _ in range(reps):
            check_budget("safetensors.torch.load_file")
            s, tensors = timed(lambda: {k: v for f in bf16 for k, v in load_file(str(f), device="cuda").items()})
            secs.append(s)
            del tensors
            gc.collect()
            torch.cuda.empty_cache()
        n = size_of(d / FORMATS["bf16"].format(p=preset))
        out["safetensors_bf16"] = {"bytes": n, "seconds": stats(secs), "gbps": n / statistics.median(secs) / 1e9}
        log(f"safetensors.torch.load_file BF16: {statistics.median(secs):.3f} s")
        save(out)

    if "gguf-py" in baselines and "q4_0" in formats:
        check_budget("gguf-py")
        import gguf
        import numpy as np

        q4 = d / FORMATS["q4_0"].format(p=preset)

        def gguf_py():
            # Tensor by tensor until gguf_py_seconds: the rate over those done.
            r = gguf.GGUFReader(q4)
            res, done, t = {}, 0, time.perf_counter()
            for t_ in r.tensors:
                x = gguf.quants.dequantize(t_.data, t_.tensor_type)
                res[t_.name] = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(torch.bfloat16).to(dev)
                done += int(t_.n_bytes)
                if time.perf_counter() - t > gguf_py_seconds:
                    break
            return done, len(res), len(r.tensors)

        s, (done, n_done, n_all) = timed(gguf_py)
        torch.cuda.empty_cache()
        out["gguf_py_q4_0"] = {"bytes": done, "seconds": stats([s]), "gbps": done / s / 1e9, "tensors": n_done,
                               "of_tensors": n_all, "complete": n_done == n_all}
        log(f"gguf-py dequantize + .to(cuda) Q4_0: {done / 1e9:.2f} GB ({n_done} of {n_all} tensors) in {s:.1f} s")
        save(out)
    return out


def csv_list(s: str, allowed, what: str) -> list[str]:
    xs = [x for x in s.split(",") if x]
    bad = [x for x in xs if allowed is not None and x not in allowed]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown {what} {bad}: choose from {','.join(allowed)}")
    return xs


def main():
    global BUDGET
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ws", type=Path, required=True, help="the weightstream binary")
    ap.add_argument("--dir", type=Path, action="append", required=True,
                    help="where the checkpoints are or go (generated if missing); repeat to let the script pick one with room")
    ap.add_argument("--out", type=Path, help="JSON results (required unless --generate-only)")
    ap.add_argument("--generate-only", action="store_true", help="only make sure the checkpoints exist; print their directory")
    ap.add_argument("--no-tmpfs", action="store_true", help="never put the checkpoints on tmpfs (O_DIRECT, cold reads)")
    ap.add_argument("--preset", default="7b")
    ap.add_argument("--formats", default=",".join(FORMATS), type=lambda s: csv_list(s, FORMATS, "format"),
                    help=f"comma-separated, of {','.join(FORMATS)} (default all)")
    ap.add_argument("--sources", default="auto", type=lambda s: csv_list(s, ("auto", "read", "mmap", "direct", "gds", "http", "http-cached"), "source"),
                    help="weightstream load --source values, comma-separated (default auto); http: the GGUF files "
                         "over loopback HTTP (bench/gpu/range_server.py), through the object-storage source; "
                         "http-cached: the same through the local cache, filled by one untimed load first")
    ap.add_argument("--baselines", default=",".join(BASELINES), type=lambda s: csv_list(s, (*BASELINES, "none"), "baseline"),
                    help=f"comma-separated, of {','.join(BASELINES)}, or none (default all)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of each load and baseline")
    ap.add_argument("--sweep-reps", type=int, default=2, help="repetitions of each staging configuration (the best one counts)")
    ap.add_argument("--gguf-py-seconds", type=float, default=60.0, help="stop gguf-py after the tensor that passes this")
    ap.add_argument("--budget", type=float, help="seconds after which no new measurement starts (what is done is kept)")
    ap.add_argument("--dry-run", action="store_true", help="tiny model, CPU only: checks this script")
    ap.add_argument("--skip-sweep", action="store_true")
    args = ap.parse_args()
    BUDGET = args.budget
    preset, device = ("tiny", "cpu") if args.dry_run else (args.preset, "cuda")
    formats = args.formats
    if not formats:
        ap.error("--formats is empty")
    if args.out is None and not args.generate_only:
        ap.error("--out is required")
    d = pick_dir(args.dir, preset, formats, tmpfs_ok=not args.no_tmpfs)
    generate(d, preset, formats)
    if args.generate_only:
        print(d)
        return 0
    result = {"preset": preset, "device": device, "date": time.strftime("%Y-%m-%d %H:%M:%S"), "dir": str(d),
              "dir_fs": fs_type(d), "formats": formats, "sources": args.sources, "reps": args.reps, "phases": [], "errors": {}}

    def save(phase=None, value=None):
        if phase is not None:
            result[phase] = value
        tmp = args.out.with_name(args.out.name + ".tmp")
        tmp.write_text(json.dumps(result, indent=1))
        os.replace(tmp, args.out)

    def phase(name, fn):
        t = time.perf_counter()
        try:
            fn(lambda v: save(name, v))
            result["phases"].append(name)
            log(f"e2e: {name} done in {time.perf_counter() - t:.0f} s")
        except OutOfTime as e:
            result["errors"][name] = f"stopped: {e}"
            log(f"e2e: {name}: {e}")
        except Exception as e:  # noqa: BLE001 (recorded, the next phase runs)
            result["errors"][name] = f"{type(e).__name__}: {e}"
            log(f"e2e: {name} failed: {type(e).__name__}: {e}")
        save()

    for f in formats:
        warm(d / FORMATS[f].format(p=preset))
    save()
    baselines = [b for b in args.baselines if b != "none"]
    if not args.dry_run and baselines:
        phase("baselines", lambda save_: save_(torch_baselines(d, preset, args.reps, formats, baselines, args.gguf_py_seconds, save_)))
    phase("weightstream", lambda save_: save_(ours(args.ws, d, preset, device, args.reps, formats, args.sources, save_)))
    if "q4_0" in formats:
        phase("in_process", lambda save_: save_(in_process(d / FORMATS["q4_0"].format(p=preset), device, args.reps, save_)))
    if not args.skip_sweep:
        if "q4_0" in formats:
            phase("staging_sweep", lambda save_: save_(staging_sweep(args.ws, d / FORMATS["q4_0"].format(p=preset), device, args.sweep_reps, save_)))
        else:
            log("e2e: no staging sweep: it runs on q4_0, not in --formats")
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
