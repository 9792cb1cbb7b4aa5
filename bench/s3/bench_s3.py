#!/usr/bin/env python3
"""Time to all BF16 in host memory, for one model kept in S3 (issue 34,
item 5; issue 42, part 3): weightstream on its Q4_K_M GGUF, its Q4_0 GGUF
and its BF16 safetensors; the Run:ai Model Streamer on the BF16
safetensors; and a plain parallel download of the BF16 bytes (boto3's
transfer manager).

The server is a SeaweedFS (tests/s3/seaweed.py) in its own network
namespace, reached over a veth pair whose server side is shaped with `tc
tbf` to each of --rates in turn (default 1gbit and 2gbit: rates this
2-core machine can fill, so the link, not the CPU, decides) and left bare
for the "unshaped" round; the namespace and the pair are made and removed
here (root needed; without it the script says so and stops). Runs are
interleaved (every method once per repetition and link, order rotated)
and each is its own process, timed from the first request to the last
tensor in memory; imports are excluded, torch's included (every method
that makes tensors needs it; weightstream imports it only when a load
starts, which would otherwise be timed). Prints a Markdown table of median
and spread, with each shaped run's share of the link: (bytes moved /
rate) / time, and the load average before and after.

    .venv-vllm/bin/python bench/s3/bench_s3.py --work /tmp/wsb --reps 3

The model is generated (bench shape: hidden 2048, 16 layers, FFN 5632,
vocabulary 32000: 886 M parameters, 1.77 GB as BF16) with random blocks of
each type: the byte counts and the kernels' work are those of a real
checkpoint of that shape.
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

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "s3"))
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))

NS, HOST_IF, NS_IF = "wsbench", "wsb-host", "wsb-ns"
HOST_IP, NS_IP = "10.231.0.1", "10.231.0.2"
BUCKET = "bench"
METHODS = ["ws-q4_k_m", "ws-q4_0", "ws-bf16", "runai-bf16", "boto3-bf16"]


def sh(*cmd, check=True):
    return subprocess.run(list(map(str, cmd)), check=check, capture_output=True, text=True)


def make_link():
    sh("ip", "netns", "del", NS, check=False)
    sh("ip", "netns", "add", NS)
    sh("ip", "link", "add", HOST_IF, "type", "veth", "peer", "name", NS_IF)
    sh("ip", "link", "set", NS_IF, "netns", NS)
    sh("ip", "addr", "add", f"{HOST_IP}/24", "dev", HOST_IF)
    sh("ip", "link", "set", HOST_IF, "up")
    sh("ip", "netns", "exec", NS, "ip", "addr", "add", f"{NS_IP}/24", "dev", NS_IF)
    sh("ip", "netns", "exec", NS, "ip", "link", "set", NS_IF, "up")
    sh("ip", "netns", "exec", NS, "ip", "link", "set", "lo", "up")


def shape(rate: str | None):
    """Server -> client direction: the server side's egress."""
    sh("ip", "netns", "exec", NS, "tc", "qdisc", "del", "dev", NS_IF, "root", check=False)
    if rate:
        sh("ip", "netns", "exec", NS, "tc", "qdisc", "add", "dev", NS_IF, "root", "tbf", "rate", rate,
           "burst", "4mb", "latency", "50ms")


def remove_link():
    sh("ip", "link", "del", HOST_IF, check=False)
    sh("ip", "netns", "del", NS, check=False)


def bits_per_second(rate: str) -> float:
    """A tc rate ("1gbit", "500mbit") in bits per second."""
    units = {"gbit": 1e9, "mbit": 1e6, "kbit": 1e3, "bit": 1.0}
    for u, f in units.items():
        if rate.endswith(u):
            return float(rate[: -len(u)]) * f
    raise SystemExit(f"--rates: {rate!r}: give gbit, mbit or kbit")


def make_model(d: Path) -> dict[str, Path]:
    import numpy as np
    import sample_model as sm

    s = sm.Shape(hidden=2048, layers=16, ff=5632, vocab=32000, heads=16, kv_heads=8)
    out = {"q4_k_m": d / "bench-q4_k_m.gguf", "q4_0": d / "bench-q4_0.gguf", "bf16": d / "bench-bf16"}
    rng = np.random.default_rng(0)
    for fmt, p in out.items():
        if not p.exists():
            t = time.perf_counter()
            if fmt == "bf16":
                sm.write_safetensors(p, s, "bf16", rng, real=False)
            else:
                sm.write_gguf(p, s, fmt, rng, real=False)
            print(f"wrote {p} in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    return out


def one(method: str, url: str) -> float:
    """Run in a child process: seconds from start to all BF16 in memory."""
    if method.startswith("ws-"):
        import torch  # noqa: F401  (imported by the load otherwise, inside the clock)

        import weightstream
        t = time.perf_counter()
        tensors = weightstream.load_file(url)
        took = time.perf_counter() - t
        assert tensors
    elif method == "runai-bf16":
        from runai_model_streamer import SafetensorsStreamer
        t = time.perf_counter()
        tensors = {}
        with SafetensorsStreamer() as s:
            s.stream_file(url)
            for name, tensor in s.get_tensors():
                tensors[name] = tensor  # owned=True (0.17's default): the caller's to keep
        took = time.perf_counter() - t
    elif method == "boto3-bf16":
        import io

        import boto3
        from boto3.s3.transfer import TransferConfig
        from botocore.config import Config
        bucket, key = url[len("s3://"):].split("/", 1)
        c = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], config=Config(s3={"addressing_style": "path"}, max_pool_connections=16))
        t = time.perf_counter()
        buf = io.BytesIO()
        c.download_fileobj(bucket, key, buf, Config=TransferConfig(max_concurrency=16, multipart_chunksize=8 << 20))
        took = time.perf_counter() - t
        assert buf.tell() > 0
    else:
        raise SystemExit(f"unknown method {method}")
    return took


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=Path("/tmp/ws-bench-s3"))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rates", default="1gbit,2gbit", help="tc tbf rates of the shaped links, comma-separated")
    ap.add_argument("--one", nargs=2, metavar=("METHOD", "URL"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print("SECONDS", one(*a.one), flush=True)
        return
    if os.geteuid() != 0:
        raise SystemExit("bench_s3.py makes a network namespace and a tc qdisc: run it as root")
    from seaweed import SeaweedS3

    a.work.mkdir(parents=True, exist_ok=True)
    models = make_model(a.work / "model")
    bf16_file = models["bf16"] / "model.safetensors"
    sizes = {"q4_k_m": models["q4_k_m"].stat().st_size, "q4_0": models["q4_0"].stat().st_size, "bf16": bf16_file.stat().st_size}
    urls = {"ws-q4_k_m": f"s3://{BUCKET}/bench-q4_k_m.gguf", "ws-q4_0": f"s3://{BUCKET}/bench-q4_0.gguf",
            "ws-bf16": f"s3://{BUCKET}/bench-bf16/", "runai-bf16": f"s3://{BUCKET}/bench-bf16/model.safetensors",
            "boto3-bf16": f"s3://{BUCKET}/bench-bf16/model.safetensors"}
    # A fresh server: data of an earlier run would be in the way.
    import shutil
    shutil.rmtree(a.work / "seaweed", ignore_errors=True)
    make_link()
    results: dict[tuple[str, str], list[float]] = {}
    rates = [r for r in a.rates.split(",") if r]
    links = [*rates, "unshaped"]
    load_before = os.getloadavg()
    try:
        with SeaweedS3(a.work / "seaweed", ip=NS_IP, netns=NS) as server:
            server.make_bucket(BUCKET)
            server.put_file(BUCKET, "bench-q4_k_m.gguf", models["q4_k_m"])
            server.put_file(BUCKET, "bench-q4_0.gguf", models["q4_0"])
            server.put_tree(BUCKET, "bench-bf16/", models["bf16"])
            env = server.env()
            env["RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING"] = "0"
            for rep in range(a.reps):
                for link in links:
                    shape(None if link == "unshaped" else link)
                    order = METHODS[rep % len(METHODS):] + METHODS[:rep % len(METHODS)]
                    for m in order:
                        r = subprocess.run([sys.executable, __file__, "--one", m, urls[m]], capture_output=True, text=True,
                                           env=env, timeout=900)
                        line = next((l for l in r.stdout.splitlines() if l.startswith("SECONDS ")), None)
                        if line is None:
                            raise SystemExit(f"{m} failed:\n{r.stderr[-3000:]}")
                        results.setdefault((link, m), []).append(float(line.split()[1]))
                        print(f"rep {rep} {link:8} {m:11} {results[(link, m)][-1]:.2f} s", file=sys.stderr, flush=True)
    finally:
        remove_link()
    load_after = os.getloadavg()
    fmt_of = {"ws-q4_k_m": "q4_k_m", "ws-q4_0": "q4_0"}
    print(f"\n{a.reps} interleaved repetitions; model bytes: Q4_K_M {sizes['q4_k_m'] / 1e9:.3f} GB, "
          f"Q4_0 {sizes['q4_0'] / 1e9:.3f} GB, BF16 {sizes['bf16'] / 1e9:.3f} GB; load average (1, 5, 15 min) "
          f"before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
          f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}\n")
    print("| link | method | bytes moved | median s | min-max s | BF16 GB/s | share of the link | vs boto3 BF16 |")
    print("|---|---|---|---|---|---|---|---|")
    for link in links:
        boto = statistics.median(results[(link, "boto3-bf16")])
        for m in METHODS:
            xs = results[(link, m)]
            med = statistics.median(xs)
            moved = sizes[fmt_of.get(m, "bf16")]
            share = "-" if link == "unshaped" else f"{moved * 8 / bits_per_second(link) / med:.2f}"
            print(f"| {link} | {m} | {moved / 1e9:.3f} GB | {med:.2f} | {min(xs):.2f}-{max(xs):.2f} | "
                  f"{sizes['bf16'] / 1e9 / med:.2f} | {share} | {med / boto:.2f}x |")
    print("\nraw:", json.dumps({f"{k[0]}/{k[1]}": v for k, v in results.items()}))


if __name__ == "__main__":
    main()
