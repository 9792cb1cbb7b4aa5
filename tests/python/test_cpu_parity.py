"""The CPU kernels, through `weightstream convert`, against independent
references: gguf-py (+ ml_dtypes rounding) for Q4_0/Q8_0, numpy for FP8,
ml_dtypes for F16/F32. Every ISA is forced, with one and two threads."""
from __future__ import annotations

import json
import os
from pathlib import Path

import gguf
import numpy as np
import pytest
import safetensors
from safetensors import safe_open

import edge_cases
import reference
from harness import SEED, inspect_json, run_ws

ISAS = ["scalar", "avx2", "avx512-int", "avx512"]


def cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    return {f for line in text.splitlines() if line.startswith("flags") for f in line.split(":", 1)[1].split()}


def cpu_has_avx2() -> bool:
    return {"avx2", "f16c"} <= cpu_flags()


def cpu_has_avx512() -> bool:
    """What `Isa::Avx512.supported()` asks for."""
    return {"avx512f", "avx512bw", "avx512vl", "f16c", "avx2"} <= cpu_flags()


@pytest.fixture(scope="module")
def edges(tmp_path_factory):
    out = tmp_path_factory.mktemp("edges")
    edge_cases.generate(out, SEED)
    return out


def convert(src: Path, out: Path, isa: str, threads: int) -> dict[str, np.ndarray]:
    if isa == "avx2" and not cpu_has_avx2():
        pytest.skip("this CPU has no AVX2+F16C")
    if isa.startswith("avx512") and not cpu_has_avx512():
        pytest.skip("this CPU has no AVX-512 F/BW/VL + F16C")
    env = {**os.environ, "WEIGHTSTREAM_ISA": isa}
    run_ws("convert", src, "-o", out, "--threads", threads, "--skip-unsupported", env=env)
    files = [out] if out.suffix == ".safetensors" else sorted(out.glob("*.safetensors"))
    result = {}
    for f in files:
        with safe_open(f, framework="numpy") as h:  # the real package opens it
            keys = set(h.keys())
        for name, t in safetensors.deserialize(f.read_bytes()):
            assert t["dtype"] == "BF16" and name in keys
            result[name] = np.frombuffer(bytes(t["data"]), dtype=np.uint16).reshape(t["shape"])
    return result


def assert_bits_equal(name, got: np.ndarray, want: np.ndarray):
    got, want = got.ravel(), want.ravel()
    assert got.shape == want.shape, name
    diff = np.flatnonzero(got != want)
    assert diff.size == 0, f"{name}: {diff.size} elements differ, first at {diff[0]}: {got[diff[0]]:#06x} != {want[diff[0]]:#06x}"


def gguf_reference(path: Path, out_dtype: str = "BF16") -> dict[str, np.ndarray]:
    out = {}
    for t in gguf.GGUFReader(path).tensors:
        raw = t.data.tobytes()
        name = t.tensor_type.name
        if t.tensor_type in edge_cases.BLOCK_TYPES:
            out[t.name] = reference.gguf_quant(raw, t.tensor_type, out=out_dtype)
        elif name in ("F32", "F16", "BF16"):
            out[t.name] = reference.floats(raw, name, out=out_dtype)
    return out


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("isa", ISAS)
def test_gguf_edges_match_gguf_py(edges, tmp_path, isa, threads):
    got = convert(edges / "edges.gguf", tmp_path / "o.safetensors", isa, threads)
    want = gguf_reference(edges / "edges.gguf")
    assert set(got) == set(want)
    for name in want:
        assert_bits_equal(name, got[name], want[name])


@pytest.mark.parametrize("name", ["all_types.gguf", "v2.gguf"])
def test_fixture_gguf_matches_gguf_py(fixtures, tmp_path, name):
    out, _ = fixtures
    got = convert(out / name, tmp_path / "o.safetensors", "avx2" if cpu_has_avx2() else "scalar", 2)
    want = gguf_reference(out / name)
    assert set(got) == set(want)  # q8_k left out by --skip-unsupported
    for n in want:
        assert_bits_equal(n, got[n], want[n])


def fp8_reference(path: Path, out_dtype: str = "BF16") -> dict[str, np.ndarray]:
    info = inspect_json(path)
    files = [Path(f["path"]) for f in info["files"]]
    raw = {}
    for f in files:
        for name, t in safetensors.deserialize(f.read_bytes()):
            raw[name] = t
    out = {}
    for t in info["tensors"]:
        if t["role"] != "data":
            continue
        r = raw[t["name"]]
        if t["dtype"] in reference.FP8:
            s = t.get("scale")
            scales = None if s is None else reference.scale_values(bytes(raw[s["tensor"]]["data"]), raw[s["tensor"]]["dtype"])
            block = None if s is None else s["block"]
            out[t["name"]] = reference.fp8(bytes(r["data"]), t["dtype"], t["shape"], scales, block, out=out_dtype)
        elif t["dtype"] in ("F32", "F16", "BF16"):
            out[t["name"]] = reference.floats(bytes(r["data"]), t["dtype"], out=out_dtype)
    return out


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("isa", ISAS)
def test_fp8_edges_match_numpy(edges, tmp_path, isa, threads):
    got = convert(edges / "fp8_edges", tmp_path / "out", isa, threads)
    want = fp8_reference(edges / "fp8_edges")
    assert set(got) == set(want)
    assert not any(k.endswith(("_scale", "_scale_inv")) for k in got), "scales are consumed"
    for name in want:
        assert_bits_equal(name, got[name], want[name])


@pytest.mark.parametrize("name", ["fp8_deepseek", "fp8_compressed_tensors", "fp8_single", "fp8_groupwise"])
def test_fixture_fp8_matches_numpy(fixtures, tmp_path, name):
    out, _ = fixtures
    got = convert(out / name, tmp_path / "out", "avx2" if cpu_has_avx2() else "scalar", 2)
    want = fp8_reference(out / name)
    assert set(got) == set(want)
    assert not any(k.endswith((".input_scale", ".k_scale")) for k in got), "activation scales are dropped"
    for n in want:
        assert_bits_equal(n, got[n], want[n])


def test_load_verify_passes_on_every_fixture(fixtures, edges):
    out, _ = fixtures
    for p in [out / "all_types.gguf", out / "v2.gguf", out / "plain.safetensors", out / "sharded", out / "unindexed",
              out / "fp8_deepseek", out / "fp8_compressed_tensors", out / "fp8_single", out / "fp8_groupwise", edges / "edges.gguf", edges / "fp8_edges"]:
        r = json.loads(run_ws("load", p, "--device", "cpu", "--verify", "--skip-unsupported", "--json").stdout)
        assert r["verify"]["identical"], (p, r["verify"])
        assert r["tensors"] > 0


@pytest.mark.parametrize("isa", ISAS)
def test_bench_reports_the_path_each_kernel_took(isa):
    """`bench` names the ISA it was given and, per kernel, whose kernel
    ran: the same ISA where the format has one, AVX2 for the table-lookup
    formats under AVX-512, the portable copy for BF16."""
    if isa == "avx2" and not cpu_has_avx2():
        pytest.skip("this CPU has no AVX2+F16C")
    if isa.startswith("avx512") and not cpu_has_avx512():
        pytest.skip("this CPU has no AVX-512 F/BW/VL + F16C")
    env = {**os.environ, "WEIGHTSTREAM_ISA": isa}
    r = run_ws("bench", "--json", "--threads", "1", "--reps", "1", "--shape", "256x256",
               "--format", "q4_k", "--format", "iq4_xs", "--format", "fp8-block", "--format", "bf16", env=env)
    report = json.loads(r.stdout)
    assert report["isa"] == isa
    paths = {k["kernel"]: k["path"] for k in report["kernels"]}
    table_lookup = "avx2" if isa.startswith("avx512") else isa
    assert paths == {"q4_k": isa, "iq4_xs": table_lookup, "fp8-block": isa, "bf16": "scalar"}, paths
