"""Float16 output (issue 57): `convert --dtype f16` of every format against
the same independent references as BF16 (tests/python/reference.py), the
reference's exact f32 value rounded once to float16 by numpy
(`astype(np.float16)`: nearest even, subnormals, infinities past 65504),
every NaN the canonical 0x7E00; F16 tensors copied as stored, NaN payloads
included. GGUF blocks (gguf-py; Q1_0/Q2_0 against ggml's C code in
test_ggml_lowbit.py), FP8
(numpy), NVFP4/MXFP4 and INT packs (numpy), floats: edge data included
(edges.gguf, fp8_edges: NaN, infinities, subnormals, ties), on the
scalar path and the machine's best ISA, one and two threads."""
from __future__ import annotations

import json

import numpy as np
import pytest
import safetensors

import edge_cases
import packed
import reference
from harness import SEED, run_ws
from test_cpu_parity import assert_bits_equal, cpu_has_avx2, cpu_has_avx512, fp8_reference, gguf_reference

BEST = "avx512" if cpu_has_avx512() else "avx2" if cpu_has_avx2() else "scalar"


def convert_f16(src, out, isa: str = "scalar", threads: int = 2) -> dict[str, np.ndarray]:
    run_ws("convert", src, "-o", out, "--dtype", "f16", "--threads", threads, "--skip-unsupported",
           env={"PATH": "/usr/bin:/bin", "WEIGHTSTREAM_ISA": isa})
    files = [out] if out.suffix == ".safetensors" else sorted(out.glob("*.safetensors"))
    result = {}
    for f in files:
        for name, t in safetensors.deserialize(f.read_bytes()):
            assert t["dtype"] == "F16", (name, t["dtype"])
            result[name] = np.frombuffer(bytes(t["data"]), dtype=np.uint16).reshape(t["shape"])
    return result


@pytest.fixture(scope="module")
def edges(tmp_path_factory):
    out = tmp_path_factory.mktemp("edges16")
    edge_cases.generate(out, SEED)
    return out


@pytest.mark.parametrize("isa, threads", [("scalar", 1), (BEST, 2)])
def test_gguf_blocks_and_floats_round_once_to_f16(edges, fixtures, tmp_path, isa, threads):
    out, _ = fixtures
    checked = 0
    for src in (edges / "edges.gguf", out / "all_types.gguf"):
        got = convert_f16(src, tmp_path / f"{src.stem}.safetensors", isa, threads)
        want = gguf_reference(src, "F16")
        assert set(got) == set(want)
        for name in want:
            assert_bits_equal(name, got[name], want[name])
            checked += 1
    assert checked > 30


def test_f16_tensors_come_back_as_stored_and_overflow_is_infinity(tmp_path):
    """F16 bit for bit (NaN payloads, -0, subnormals); F32 and BF16 past
    65504 become infinities, 65519.996 stays finite, ties go to even."""
    import gguf

    h = np.array([0x7C01, 0xFE33, 0x8000, 0x0001, 0x03FF, 0x7BFF, 0x3C00, 0xFC00], np.uint16)
    f = np.array([65504, 65519.996, 65520, -1e9, 1 + 2**-11, 1 + 3 * 2**-11, 2**-25, 2**-24 * 1.5, np.nan], np.float32)
    b = np.array([0x7F7F, 0x477F, 0x4780, 0x3380, 0x7FC1, 0x0001], np.uint16)
    w = gguf.GGUFWriter(str(tmp_path / "f.gguf"), arch="llama")
    w.add_tensor("h", h.view(np.float16))
    w.add_tensor("f", f)
    w.add_tensor("b", b, raw_dtype=gguf.GGMLQuantizationType.BF16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    got = convert_f16(tmp_path / "f.gguf", tmp_path / "o.safetensors")
    assert got["h"].tolist() == h.tolist()
    assert got["f"].tolist() == [0x7BFF, 0x7BFF, 0x7C00, 0xFC00, 0x3C00, 0x3C02, 0x0000, 0x0002, 0x7E00]
    assert got["b"].tolist() == [0x7C00, 0x7BF8, 0x7C00, 0x0001, 0x7E00, 0x0000]
    assert_bits_equal("f", got["f"], reference.floats(f.tobytes(), "F32", out="F16"))
    assert_bits_equal("b", got["b"], reference.floats(b.tobytes(), "BF16", out="F16"))


@pytest.mark.parametrize("isa", ["scalar", BEST])
def test_fp8_rounds_once_to_f16(edges, fixtures, tmp_path, isa):
    out, _ = fixtures
    for src in (edges / "fp8_edges", out / "fp8_deepseek", out / "fp8_compressed_tensors"):
        got = convert_f16(src, tmp_path / src.name, isa)
        want = fp8_reference(src, "F16")
        assert set(got) == set(want)
        for name in want:
            assert_bits_equal(name, got[name], want[name])


@pytest.fixture(scope="module")
def packed_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("packed16")
    packed.generate(out, SEED)
    return out


@pytest.mark.parametrize("scheme", list(packed.SCHEMES))
def test_fp4_packs_round_once_to_f16(packed_dir, tmp_path, scheme):
    d = packed_dir / scheme
    wsuf, ssuf, group, kind, gsuf, op = packed.SCHEMES[scheme]
    raw = {n: (bytes(t["data"]), t["shape"], t["dtype"]) for n, t in safetensors.deserialize((d / "model.safetensors").read_bytes())}
    want = {}
    for n, (data, shape, dtype) in raw.items():
        if n.endswith(wsuf) and n[: -len(wsuf)] + ssuf in raw:
            base = n[: -len(wsuf)]
            cols = shape[-1] * 2 if scheme != "mxfp4_gptoss" else shape[-2] * 32
            scales = reference.packed_scales(raw[base + ssuf][0], kind)
            g = float(np.frombuffer(raw[base + gsuf][0], np.float32)[0]) if gsuf else None
            want[base if scheme == "mxfp4_gptoss" else base + ".weight"] = reference.e2m1(
                data, len(data) * 2 // cols, cols, scales, group, g, op, out="F16")
        elif n == "model.norm.weight":
            want[n] = reference.floats(data, dtype, out="F16")
    got = convert_f16(d, tmp_path / "o.safetensors", BEST)
    assert set(got) == set(want)
    for name in want:
        assert_bits_equal(name, got[name], want[name])


def test_int_packs_round_once_to_f16(packed_dir, tmp_path):
    d = packed_dir / "int_ct"
    raw = {n: (bytes(t["data"]), t["dtype"], t["shape"]) for n, t in safetensors.deserialize((d / "model.safetensors").read_bytes())}
    np_dtype = {"F32": np.float32, "F16": np.float16, "BF16": packed.ml_dtypes.bfloat16}
    want = {"model.norm.weight": reference.floats(raw["model.norm.weight"][0], raw["model.norm.weight"][1], out="F16")}
    for name, bits, rows, cols, group, sdt, asym in packed.INT_LAYERS:
        sdata, sdtype, sshape = raw[name + ".weight_scale"]
        scales = np.frombuffer(sdata, np_dtype[sdtype]).reshape(sshape)
        zeros = raw[name + ".weight_zero_point"][0] if asym else None
        want[name + ".weight"] = reference.packed_int(raw[name + ".weight_packed"][0], bits, rows, cols, scales, sdtype, zeros,
                                                      out="F16")
    got = convert_f16(d, tmp_path / "o.safetensors", BEST)
    assert set(got) == set(want)
    for name in want:
        assert_bits_equal(name, got[name], want[name])


def test_load_verify_and_json_name_the_dtype(fixtures):
    out, _ = fixtures
    r = json.loads(run_ws("load", out / "all_types.gguf", "--device", "cpu", "--dtype", "f16", "--verify",
                          "--skip-unsupported", "--json").stdout)
    assert r["dtype"] == "F16" and r["verify"]["identical"], r
    bad = run_ws("load", out / "all_types.gguf", "--dtype", "f8", check=False)
    assert bad.returncode != 0 and "use bf16 or f16" in bad.stderr
