"""`inspect --json` on GGUF files reports exactly what gguf-py reads."""
from __future__ import annotations

import math

import gguf
import numpy as np
import pytest
from harness import inspect_json, run_ws

VT = gguf.GGUFValueType
FLOAT_TYPES = {VT.FLOAT32: np.float32, VT.FLOAT64: np.float64}


def same_value(ours, ref, vtype, sub_type=None) -> bool:
    if vtype == VT.ARRAY:
        return len(ours) == len(ref) and all(same_value(a, b, sub_type) for a, b in zip(ours, ref))
    if vtype in FLOAT_TYPES:
        t = FLOAT_TYPES[vtype]
        if ours is None:  # JSON has no NaN or infinity
            return not math.isfinite(float(ref))
        return t(ours) == t(ref) and math.copysign(1, ours) == math.copysign(1, float(ref))
    return ours == ref and type(ours) is type(ref)


@pytest.mark.parametrize("name", ["all_types.gguf", "v2.gguf"])
def test_metadata_and_tensors_match_gguf_py(fixtures, name):
    out, manifest = fixtures
    path = out / name
    ours = inspect_json(path)
    ref = gguf.GGUFReader(path)

    assert ours["format"] == "gguf"
    assert ours["gguf"]["version"] == (2 if name == "v2.gguf" else 3)
    assert ours["gguf"]["alignment"] == ref.alignment == manifest["gguf"]["alignment"]

    ref_fields = {k: f for k, f in ref.fields.items() if not k.startswith("GGUF.")}
    assert list(ours["metadata"]) == list(ref_fields)
    nested = manifest["gguf"]["nested"]
    for key, field in ref_fields.items():
        value = ours["metadata"][key]
        if key in nested:  # gguf-py's contents() does not read arrays of arrays
            assert value == nested[key]
            continue
        vtype, sub_type = field.types[0], field.types[-1]
        assert same_value(value, field.contents(), vtype, sub_type), (key, value, field.contents())

    ref_tensors = sorted(ref.tensors, key=lambda t: t.data_offset)
    assert [t["name"] for t in ours["tensors"]] == [t.name for t in ref_tensors]
    raw = path.read_bytes()
    for o, r in zip(ours["tensors"], ref_tensors):
        assert o["dtype"] == r.tensor_type.name
        assert o["shape"] == list(reversed(r.shape.tolist())), "shape is outermost first"
        assert o["nbytes"] == r.n_bytes
        assert o["offset"] == r.data_offset
        assert raw[o["offset"]:o["offset"] + o["nbytes"]] == r.data.tobytes()
        if o["name"] in manifest["gguf"]["unsupported"]:
            assert "unsupported" in o and "encoding" not in o
        else:
            assert o["encoding"] == o["dtype"]


def test_totals_and_table(fixtures):
    out, _ = fixtures
    j = inspect_json(out / "all_types.gguf")
    for dtype, tot in j["totals"].items():
        ts = [t for t in j["tensors"] if t["dtype"] == dtype]
        assert tot["tensors"] == len(ts)
        assert tot["nbytes"] == sum(t["nbytes"] for t in ts)
        assert tot["elements"] == sum(int(np.prod(t["shape"])) for t in ts)
    text = run_ws("inspect", out / "all_types.gguf").stdout
    assert "general.architecture" in text and "llama" in text
    assert "q4_0_4d" in text and "[1, 2, 3, 32]" in text
    assert "Q8_K" in text and "cannot be dequantized" in text
