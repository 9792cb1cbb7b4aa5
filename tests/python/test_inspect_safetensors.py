"""`inspect --json` on safetensors checkpoints reports exactly what the
safetensors package reads, and pairs FP8 weights with their scales."""
from __future__ import annotations

from pathlib import Path

import pytest
import safetensors
from safetensors import safe_open
from harness import inspect_json


def reference(paths: list[Path]) -> tuple[dict, dict]:
    tensors, metadata = {}, {}
    for p in paths:
        for name, t in safetensors.deserialize(p.read_bytes()):
            tensors[name] = (p, t)
        with safe_open(p, framework="numpy") as f:
            for k, v in (f.metadata() or {}).items():
                metadata.setdefault(k, v)
    return tensors, metadata


CHECKPOINTS = ["plain.safetensors", "sharded", "unindexed", "fp8_deepseek", "fp8_compressed_tensors", "fp8_single", "fp8_groupwise"]


@pytest.mark.parametrize("name", CHECKPOINTS)
def test_tensors_match_safetensors_package(fixtures, name):
    out, _ = fixtures
    path = out / name
    ours = inspect_json(path)
    files = sorted(path.glob("*.safetensors")) if path.is_dir() else [path]
    ref, ref_meta = reference(files)

    assert ours["format"] == "safetensors"
    assert [Path(f["path"]).name for f in ours["files"]] == [f.name for f in files]
    assert ours["metadata"] == ref_meta
    assert sorted(t["name"] for t in ours["tensors"]) == sorted(ref)
    for t in ours["tensors"]:
        file, r = ref[t["name"]]
        assert t["dtype"] == r["dtype"]
        assert t["shape"] == r["shape"]
        assert t["nbytes"] == len(r["data"])
        our_file = Path(ours["files"][t["file"]]["path"])
        assert our_file == file
        with open(our_file, "rb") as fh:
            fh.seek(t["offset"])
            assert fh.read(t["nbytes"]) == bytes(r["data"])


@pytest.mark.parametrize("name", ["fp8_deepseek", "fp8_compressed_tensors", "fp8_single"])
def test_fp8_scale_pairing(fixtures, name):
    out, manifest = fixtures
    expected = manifest["fp8"][name]
    ours = {t["name"]: t for t in inspect_json(out / name)["tensors"]}
    for weight, exp in expected.items():
        if weight == "__activation__":
            for a in exp:
                assert ours[a]["role"] == "activation_scale"
            continue
        t = ours[weight]
        if exp is None:
            assert "scale" not in t and t["role"] == "data"
            continue
        s = t["scale"]
        assert s["tensor"] == exp["scale"]
        assert s["layout"] == exp["layout"]
        assert s["dtype"] == exp["dtype"]
        if "block" in exp:
            assert s["block"] == exp["block"] and s["grid"] == exp["grid"]
        assert ours[exp["scale"]]["role"] == {"scale_of": weight}
