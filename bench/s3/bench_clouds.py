#!/usr/bin/env python3
"""Loads from the Google Cloud Storage and Azure Blob Storage emulators
(issue 42, part 3): the bench_s3.py model (hidden 2048, 16 layers, FFN
5632, vocabulary 32000; 1.77 GB as BF16) in fake-gcs-server and in
Azurite on loopback, unshaped, each loaded by

- weightstream from its Q4_K_M GGUF, its Q4_0 GGUF and its BF16
  safetensors (`weightstream.load_file("gs://..." / "az://...")`, to BF16
  tensors in host memory);
- the cloud's own Python SDK downloading the BF16 safetensors bytes in
  parallel, as boto3's transfer manager does in bench_s3.py (16 workers, 8
  MiB chunks): google-cloud-storage's
  `transfer_manager.download_chunks_concurrently` (threads) into a file on
  /dev/shm, azure-storage-blob's `download_blob(max_concurrency=16)
  .readall()` into memory.

What is measured is the emulators' throughput on this machine more than a
cloud's: the emulator, the client and everything else share the cores.
Runs are interleaved (every method once per repetition and store, order
rotated), each in its own process, timed from the first request to the
last byte or tensor in memory, imports excluded (torch's included, as in
bench_s3.py). The SDKs live in their own pinned venv, made by
bench/s3/setup_clients.sh; weightstream runs in .venv-vllm (it has torch:
scripts/setup_vllm.sh), and this script in .venv (it has the emulators:
scripts/setup.sh).

    bench/s3/setup_clients.sh
    .venv/bin/python bench/s3/bench_clouds.py --work /tmp/wsb-clouds --reps 3
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "tests" / "s3"))
sys.path.insert(0, str(HERE))

BUCKET = "bench"
METHODS = ["ws-q4_k_m", "ws-q4_0", "ws-bf16", "sdk-bf16"]
KEYS = {"ws-q4_k_m": "bench-q4_k_m.gguf", "ws-q4_0": "bench-q4_0.gguf", "ws-bf16": "bench-bf16/",
        "sdk-bf16": "bench-bf16/model.safetensors"}
CHUNK, WORKERS = 8 << 20, 16
PYTHONS = {"ws": ROOT / ".venv-vllm" / "bin" / "python", "sdk": ROOT / ".venv-bench-clients" / "bin" / "python"}
SETUP = {"ws": "scripts/setup.sh and scripts/setup_vllm.sh", "sdk": "bench/s3/setup_clients.sh"}


def one(store: str, method: str, key: str) -> float:
    """Run in a child process: seconds from start to every byte or tensor in memory."""
    if method.startswith("ws-"):
        import torch  # noqa: F401  (imported by the load otherwise, inside the clock)

        import weightstream
        url = f"{'gs' if store == 'gcs' else 'az'}://{BUCKET}/{key}"
        t = time.perf_counter()
        tensors = weightstream.load_file(url)
        took = time.perf_counter() - t
        assert tensors
    elif store == "gcs":
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage
        from google.cloud.storage import transfer_manager
        client = storage.Client(project="bench", credentials=AnonymousCredentials())
        out = Path("/dev/shm") / f"wsbench-{os.getpid()}"
        t = time.perf_counter()
        blob = client.bucket(BUCKET).blob(key)
        blob.reload()  # the size, which the chunks need
        transfer_manager.download_chunks_concurrently(blob, str(out), chunk_size=CHUNK, max_workers=WORKERS,
                                                      worker_type=transfer_manager.THREAD)
        took = time.perf_counter() - t
        assert out.stat().st_size == blob.size
        out.unlink()
    else:
        from azure.storage.blob import BlobClient
        endpoint = os.environ["AZURITE_BLOB_STORAGE_URL"]
        account, account_key = os.environ["AZURE_STORAGE_ACCOUNT"], os.environ["AZURE_STORAGE_KEY"]
        conn = (f"DefaultEndpointsProtocol=http;AccountName={account};AccountKey={account_key};"
                f"BlobEndpoint={endpoint}/{account};")
        c = BlobClient.from_connection_string(conn, BUCKET, key, max_chunk_get_size=CHUNK, max_single_get_size=CHUNK)
        t = time.perf_counter()
        data = c.download_blob(max_concurrency=WORKERS).readall()
        took = time.perf_counter() - t
        assert len(data) > 0
    return took


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=Path("/tmp/ws-bench-clouds"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--one", nargs=3, metavar=("STORE", "METHOD", "KEY"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print("SECONDS", one(*a.one), flush=True)
        return
    for who, py in PYTHONS.items():
        if not py.exists():
            raise SystemExit(f"{py} is missing: run {SETUP[who]}")
    import bench_s3
    from emulators import Azurite, FakeGCS

    a.work.mkdir(parents=True, exist_ok=True)
    models = bench_s3.make_model(a.work / "model")
    bf16_file = models["bf16"] / "model.safetensors"
    sizes = {"ws-q4_k_m": models["q4_k_m"].stat().st_size, "ws-q4_0": models["q4_0"].stat().st_size,
             "ws-bf16": bf16_file.stat().st_size, "sdk-bf16": bf16_file.stat().st_size}
    results: dict[tuple[str, str], list[float]] = {}
    load_before = os.getloadavg()
    for store, server_class in (("gcs", FakeGCS), ("azure", Azurite)):
        with server_class(a.work / store) as server:
            server.make_bucket(BUCKET)
            server.put_file(BUCKET, KEYS["ws-q4_k_m"], models["q4_k_m"])
            server.put_file(BUCKET, KEYS["ws-q4_0"], models["q4_0"])
            server.put_tree(BUCKET, KEYS["ws-bf16"], models["bf16"])
            env = server.env()
            for rep in range(a.reps):
                order = METHODS[rep % len(METHODS):] + METHODS[:rep % len(METHODS)]
                for m in order:
                    py = str(PYTHONS["sdk" if m == "sdk-bf16" else "ws"])
                    r = subprocess.run([py, __file__, "--one", store, m, KEYS[m]], capture_output=True, text=True, env=env,
                                       timeout=900)
                    line = next((x for x in r.stdout.splitlines() if x.startswith("SECONDS ")), None)
                    if line is None:
                        raise SystemExit(f"{store} {m} failed:\n{r.stderr[-3000:]}")
                    results.setdefault((store, m), []).append(float(line.split()[1]))
                    print(f"rep {rep} {store:6} {m:10} {results[(store, m)][-1]:.2f} s", file=sys.stderr, flush=True)
    load_after = os.getloadavg()
    print(f"\n{a.reps} interleaved repetitions; load average (1, 5, 15 min) before "
          f"{load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
          f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}\n")
    print("| store | method | bytes moved | median s | min-max s | bytes moved GB/s | BF16 GB/s | vs SDK BF16 |")
    print("|---|---|---|---|---|---|---|---|")
    for store in ("gcs", "azure"):
        sdk = statistics.median(results[(store, "sdk-bf16")])
        for m in METHODS:
            xs = results[(store, m)]
            med = statistics.median(xs)
            print(f"| {store} | {m} | {sizes[m] / 1e9:.3f} GB | {med:.2f} | {min(xs):.2f}-{max(xs):.2f} | "
                  f"{sizes[m] / 1e9 / med:.2f} | {sizes['sdk-bf16'] / 1e9 / med:.2f} | {med / sdk:.2f}x |")
    print("\nraw:", {f"{k[0]}/{k[1]}": v for k, v in results.items()})


if __name__ == "__main__":
    main()
