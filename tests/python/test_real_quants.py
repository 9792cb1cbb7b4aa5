"""Files made by the real llama-quantize (the K-quant, legacy, IQ, ternary
and FP4 presets in real_quants.TYPES, from one F32 tiny Llama; the IQ1-IQ3
ones with an importance matrix from the real llama-imatrix): `inspect` reports every
tensor's type as gguf-py reads it, `load --verify` agrees with the CPU
reference, and `convert` gives gguf-py's dequantization bit for bit, with
every ISA and one or two threads."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import gguf
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
import real_quants  # noqa: E402
from harness import inspect_json, run_ws  # noqa: E402
from test_cpu_parity import ISAS, assert_bits_equal, convert, gguf_reference  # noqa: E402

# The types each llama-quantize preset must produce on the tiny model (its
# 704-wide FFN takes the fallback of the preset's main type).
EXPECTED_TYPES = {
    "Q4_K_M": {"Q4_K", "Q6_K"},
    "Q5_K_M": {"Q5_K", "Q6_K"},
    "Q6_K": {"Q6_K"},
    "Q2_K": {"Q2_K"},
    "Q3_K_M": {"Q3_K"},
    "Q4_1": {"Q4_1"},
    "Q5_0": {"Q5_0"},
    "Q5_1": {"Q5_1"},
    "IQ4_XS": {"IQ4_XS", "IQ4_NL"},
    "IQ4_NL": {"IQ4_NL"},
    "TQ1_0": {"TQ1_0"},
    "TQ2_0": {"TQ2_0"},
    "IQ3_XXS": {"IQ3_XXS", "IQ2_S"},
    "IQ3_S": {"IQ3_S"},
    "IQ2_XXS": {"IQ2_XXS"},
    "IQ2_XS": {"IQ2_XS"},
    "IQ2_S": {"IQ2_XS", "IQ3_S"},
    "IQ1_S": {"IQ1_S"},
    "IQ1_M": {"IQ1_M"},
    "MXFP4": {"MXFP4"},
    "NVFP4": {"NVFP4"},
}


def test_the_files_hold_every_type_gguf_py_dequantizes(real_files):
    """Every ggml type with a reference dequantization (gguf-py's
    quants classes) occurs in some file llama.cpp wrote here."""
    seen = {t.tensor_type.name for p in real_files.values() for t in gguf.GGUFReader(p).tensors}
    with_reference = {q.name for q in gguf.GGMLQuantizationType
                      if q.name in vars(gguf.quants) and q.name not in ("F32", "F16", "BF16")}
    assert with_reference - seen == set(), sorted(with_reference - seen)


@pytest.fixture(scope="module")
def real_files(tmp_path_factory):
    return real_quants.make(tmp_path_factory.mktemp("real_quants"))


@pytest.mark.parametrize("ftype", real_quants.TYPES)
def test_inspect_shows_the_types_gguf_py_reads(real_files, ftype):
    path = real_files[ftype]
    info = inspect_json(path)
    want = {t.name: t.tensor_type.name for t in gguf.GGUFReader(path).tensors}
    got = {t["name"]: t["dtype"] for t in info["tensors"]}
    assert got == want
    assert EXPECTED_TYPES[ftype] <= set(got.values()), (ftype, sorted(set(got.values())))
    assert all("unsupported" not in t for t in info["tensors"]), "every type llama-quantize wrote has a kernel"


@pytest.mark.parametrize("ftype", real_quants.TYPES)
def test_load_verify(real_files, ftype):
    r = json.loads(run_ws("load", real_files[ftype], "--device", "cpu", "--verify", "--json").stdout)
    assert r["verify"]["identical"], r["verify"]
    assert r["tensors"] == len(gguf.GGUFReader(real_files[ftype]).tensors)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("ftype", real_quants.TYPES)
def test_convert_matches_gguf_py(real_files, tmp_path, ftype, isa, threads):
    path = real_files[ftype]
    got = convert(path, tmp_path / "o.safetensors", isa, threads)
    want = gguf_reference(path)
    assert set(got) == set(want) == {t.name for t in gguf.GGUFReader(path).tensors}
    for name in want:
        assert_bits_equal(f"{ftype} {name}", got[name], want[name])
