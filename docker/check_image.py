#!/usr/bin/env python3
"""Checks run inside an image's test stage (docker/Dockerfile, docker/Dockerfile.cpu).

- The installed weightstream wheel has its GPU kernels: without a GPU,
  cuda_status() must blame the missing driver, not a kernel-less build.
- Its Python loader gives the same BF16 bits as the CLI's `convert` (which the
  test stage has already run with `load --verify` against the CPU reference).
- With --plugin: the vLLM plugin is installed and registered under vLLM's
  `vllm.general_plugins` entry point. vLLM itself (and torch) are not in the
  test stage's base image, so only the modules that import neither are
  imported; `weightstream_vllm.loader` needs vLLM and is left out.

Needs only the standard library and numpy (the loader returns numpy arrays,
BF16 as uint16 bit patterns, when neither torch nor ml_dtypes is installed).
"""
from __future__ import annotations

import argparse
import importlib
import importlib.metadata as md
import json
import struct
import subprocess
import sys
import tempfile
from pathlib import Path


def read_safetensors(path: Path) -> dict[str, bytes]:
    """name -> raw bytes of each tensor (no dependency on the safetensors package)."""
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        assert meta["dtype"] == "BF16", (name, meta["dtype"])
        a, b = meta["data_offsets"]
        out[name] = raw[base + a : base + b]
    return out


def check_kernels() -> None:
    import weightstream

    ok, why = weightstream.cuda_status()
    print(f"weightstream {weightstream.__version__}: cuda_status() = ({ok}, {why!r})")
    if "no GPU kernels" in why:
        sys.exit("FAIL: the installed wheel was built without GPU kernels")


def check_bits(cli: str, model: Path) -> None:
    import weightstream

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bf16.safetensors"
        subprocess.run([cli, "convert", str(model), "-o", str(out)], check=True, stdout=subprocess.DEVNULL)
        want = read_safetensors(out)
    got = weightstream.load_file(str(model), device="cpu")
    if sorted(got) != sorted(want):
        sys.exit(f"FAIL: tensor names differ: {sorted(set(got) ^ set(want))[:5]}")
    bad = [name for name, arr in got.items() if arr.tobytes() != want[name]]
    if bad:
        sys.exit(f"FAIL: {len(bad)} tensors differ between the Python package and the CLI, e.g. {bad[:3]}")
    print(f"python load_file == CLI convert: {len(got)} tensors, bit for bit ({model.name})")


def check_plugin() -> None:
    eps = [ep for ep in md.entry_points(group="vllm.general_plugins") if ep.name == "weightstream"]
    if [ep.value for ep in eps] != ["weightstream_vllm:register"]:
        sys.exit(f"FAIL: vllm.general_plugins entry point: {eps}")
    dist = md.distribution("weightstream-vllm")
    for mod in ("weightstream_vllm", "weightstream.serving.options", "weightstream.serving.gguf_names"):
        importlib.import_module(mod)
    import weightstream_vllm

    assert weightstream_vllm.LOAD_FORMAT == "weightstream"
    print(f"plugin weightstream-vllm {dist.version}: entry point {eps[0].value}; modules import "
          "(the loader module needs vLLM, which this test base lacks)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model", type=Path, help="a sample checkpoint")
    ap.add_argument("--cli", default="weightstream", help="the weightstream CLI")
    ap.add_argument("--plugin", action="store_true", help="also check the vLLM plugin")
    args = ap.parse_args()
    check_kernels()
    check_bits(args.cli, args.model)
    if args.plugin:
        check_plugin()
    print("image checks passed")


if __name__ == "__main__":
    main()
