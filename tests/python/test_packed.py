"""Packed 4-bit safetensors checkpoints (NVFP4 ModelOpt and compressed-tensors,
MXFP4 compressed-tensors and gpt-oss): inspect names the scheme and scale
layout, convert matches an independent numpy implementation bit for bit
on every ISA and thread count, and every malformed pairing is refused with
a typed error naming the tensor. (The producers' own decompression is
checked in plugins/vllm/tests/test_packed_references.py, where torch is.)"""
from __future__ import annotations

import json

import numpy as np
import pytest
import safetensors
from safetensors.numpy import save_file

import packed
import reference
from harness import SEED, inspect_json, run_ws
from test_cpu_parity import ISAS, assert_bits_equal, convert


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    out = tmp_path_factory.mktemp("packed")
    packed.generate(out, SEED)
    return out


def expected(d) -> dict[str, np.ndarray]:
    """The numpy reference for every tensor a load produces from `d`."""
    wsuf, ssuf, group, kind, gsuf, op = packed.SCHEMES[d.name]
    out = {}
    # Raw bytes and shapes (numpy has no float8 dtype for safe_open).
    raw = {n: (bytes(t["data"]), t["shape"]) for n, t in safetensors.deserialize((d / "model.safetensors").read_bytes())}
    for n, (data, shape) in raw.items():
        if n.endswith(wsuf) and n[: -len(wsuf)] + ssuf in raw:
            base = n[: -len(wsuf)]
            cols = shape[-1] * 2 if d.name != "mxfp4_gptoss" else shape[-2] * 32
            rows = len(data) * 2 // cols
            scales = reference.packed_scales(raw[base + ssuf][0], kind)
            g = float(np.frombuffer(raw[base + gsuf][0], np.float32)[0]) if gsuf else None
            out_name = base if d.name == "mxfp4_gptoss" else base + ".weight"
            out[out_name] = reference.e2m1(data, rows, cols, scales, group, g, op)
        elif n == "model.norm.weight":
            out[n] = np.frombuffer(data, np.uint16)
    return out


@pytest.mark.parametrize("scheme", list(packed.SCHEMES))
def test_inspect_names_scheme_scales_and_bf16_name(checkpoints, scheme):
    info = inspect_json(checkpoints / scheme)
    weights = [t for t in info["tensors"] if t.get("packed")]
    assert len(weights) == len(packed.LAYERS)
    for t in weights:
        assert t["packed"]["scheme"] == scheme.replace("nvfp4_ct", "nvfp4_compressed_tensors").replace(
            "mxfp4_ct", "mxfp4_compressed_tensors").replace("gptoss", "gpt_oss")
        assert t["scale"]["layout"] == "group" and t["scale"]["block"] == [1, packed.SCHEMES[scheme][2]]
        assert t["encoding"] == "E2M1"
    roles = {t["name"]: t["role"] for t in info["tensors"]}
    for n, r in roles.items():
        if n.endswith(("input_scale", "input_global_scale")):
            assert r == "activation_scale", (n, r)
    text = run_ws("inspect", checkpoints / scheme).stdout
    assert "groups of" in text and "->" in text, text


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("scheme", list(packed.SCHEMES))
def test_convert_matches_numpy_reference(checkpoints, tmp_path, scheme, isa, threads):
    got = convert(checkpoints / scheme, tmp_path / "o.safetensors", isa, threads)
    want = expected(checkpoints / scheme)
    assert set(got) == set(want)
    for name in want:
        assert_bits_equal(name, got[name], want[name])


@pytest.mark.parametrize("scheme", list(packed.SCHEMES))
def test_load_verify_and_json(checkpoints, scheme):
    r = run_ws("load", checkpoints / scheme, "--verify", "--json")
    report = json.loads(r.stdout)
    assert report["tensors"] == len(packed.LAYERS) + 1, report


def write(tmp_path, tensors: dict, config: dict | None = None):
    d = tmp_path / "ck"
    d.mkdir()
    save_file(tensors, str(d / "model.safetensors"))
    if config:
        (d / "config.json").write_text(json.dumps(config))
    return d


def e4m3(shape):
    return np.full(shape, 1.0, dtype=np.float32).astype(packed.ml_dtypes.float8_e4m3fn)


MALFORMED = {
    "missing_group_scale": ({"x.weight_packed": np.zeros((4, 8), np.uint8), "x.weight_global_scale": np.ones(1, np.float32)},
                            "bad_packed", "x.weight_packed"),
    "missing_global_scale": ({"x.weight_packed": np.zeros((4, 8), np.uint8), "x.weight_scale": e4m3((4, 1))},
                             "bad_packed", "x.weight_packed"),
    "scale_wrong_shape": ({"x.weight_packed": np.zeros((4, 8), np.uint8), "x.weight_scale": e4m3((4, 2)),
                           "x.weight_global_scale": np.ones(1, np.float32)}, "scale_mismatch", "x.weight_scale"),
    "scale_wrong_dtype": ({"x.weight_packed": np.zeros((4, 8), np.uint8), "x.weight_scale": np.ones((4, 1), np.float32)},
                          "scale_mismatch", "x.weight_scale"),
    "global_zero": ({"x.weight": np.zeros((4, 8), np.uint8), "x.weight_scale": e4m3((4, 1)),
                     "x.weight_scale_2": np.zeros(1, np.float32)}, "scale_mismatch", "x.weight_scale_2"),
    "global_nan": ({"x.weight_packed": np.zeros((4, 8), np.uint8), "x.weight_scale": e4m3((4, 1)),
                    "x.weight_global_scale": np.full(1, np.nan, np.float32)}, "scale_mismatch", "x.weight_global_scale"),
    "global_inf": ({"x.weight_packed": np.zeros((4, 8), np.uint8), "x.weight_scale": e4m3((4, 1)),
                    "x.weight_global_scale": np.full(1, np.inf, np.float32)}, "scale_mismatch", "x.weight_global_scale"),
    "ct_global_0_dim": ({"x.weight_packed": np.zeros((4, 8), np.uint8), "x.weight_scale": e4m3((4, 1)),
                        "x.weight_global_scale": np.array(2.0, np.float32)}, "scale_mismatch", "x.weight_global_scale"),
    "global_two_values": ({"x.weight": np.zeros((4, 8), np.uint8), "x.weight_scale": e4m3((4, 1)),
                           "x.weight_scale_2": np.ones(2, np.float32)}, "scale_mismatch", "x.weight_scale_2"),
    "gptoss_blocks_not_16_bytes": ({"e_blocks": np.zeros((2, 4, 8), np.uint8), "e_scales": np.zeros((2, 4), np.uint8)},
                                   "bad_packed", "e_blocks"),
    "gptoss_scales_wrong_shape": ({"e_blocks": np.zeros((2, 4, 16), np.uint8), "e_scales": np.zeros((2, 5), np.uint8)},
                                  "scale_mismatch", "e_scales"),
    "int_without_shape": ({"x.weight_packed": np.zeros((4, 2), np.int32), "x.weight_scale": np.ones((4, 1), np.float16)},
                          "bad_packed", "x.weight_packed"),
    "int_padded_rows": ({"x.weight_packed": np.zeros((4, 2), np.int32), "x.weight_shape": np.array([4, 13]),
                         "x.weight_scale": np.ones((4, 1), np.float16)}, "bad_packed", "x.weight_packed"),
    "int_scale_groups_do_not_divide": ({"x.weight_packed": np.zeros((4, 2), np.int32), "x.weight_shape": np.array([4, 16]),
                                        "x.weight_scale": np.ones((4, 3), np.float16)}, "scale_mismatch", "x.weight_scale"),
    "int_zero_point_wrong_shape": ({"x.weight_packed": np.zeros((4, 2), np.int32), "x.weight_shape": np.array([4, 16]),
                                    "x.weight_scale": np.ones((4, 2), np.float16), "x.weight_zero_point": np.zeros((4, 2), np.int32)},
                                   "scale_mismatch", "x.weight_zero_point"),
    "int_g_idx": ({"x.weight_packed": np.zeros((4, 2), np.int32), "x.weight_shape": np.array([4, 16]),
                   "x.weight_scale": np.ones((4, 2), np.float16), "x.weight_g_idx": np.zeros(16, np.int32)}, "bad_packed", "x.weight_packed"),
    "bf16_name_taken": ({"x.weight_packed": np.zeros((4, 16), np.uint8), "x.weight_scale": np.zeros((4, 1), np.uint8),
                         "x.weight": np.zeros((4, 32), np.float32)}, "bad_packed", "x.weight_packed"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_pairings_are_refused(tmp_path, case):
    tensors, kind, tensor = MALFORMED[case]
    d = write(tmp_path, tensors)
    for cmd in (["inspect", "--json", d], ["load", d, "--json"], ["convert", d, "-o", tmp_path / "out.safetensors", "--json"]):
        r = run_ws(*cmd, check=False)
        assert r.returncode == 1, (cmd, r.stdout, r.stderr)
        err = json.loads(r.stderr)["error"]
        assert err["kind"] == kind and err["tensor"] == tensor, err
    assert not (tmp_path / "out.safetensors").exists()


def test_byte_count_that_does_not_match_the_shape_is_refused(tmp_path):
    """A packed weight whose data range is not its shape's bytes: the
    safetensors header check refuses it before any pairing."""
    d = write(tmp_path, {"x.weight_packed": np.zeros((4, 8), np.uint8), "x.weight_scale": e4m3((4, 1)),
                         "x.weight_global_scale": np.ones(1, np.float32)})
    f = d / "model.safetensors"
    raw = f.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    header["x.weight_packed"]["shape"] = [4, 9]
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (n - len(text)) if len(text) <= n else b""
    assert len(text) == n
    f.write_bytes(raw[:8] + text + raw[8 + n:])
    r = run_ws("inspect", "--json", d, check=False)
    assert r.returncode == 1 and json.loads(r.stderr)["error"]["tensor"] == "x.weight_packed", r.stderr


@pytest.mark.parametrize("scheme", ["mxfp4_ct", "mxfp4_gptoss"])
def test_exponent_255_is_refused_at_load(tmp_path, scheme):
    """E8M0's NaN code: compressed-tensors decodes it as 2^128 = inf,
    transformers' ldexp as a finite power for |x| < 1; no result would be
    the reference's, so the load fails naming the tensor."""
    if scheme == "mxfp4_ct":
        tensors = {"x.weight_packed": np.full((4, 16), 0x11, np.uint8), "x.weight_scale": np.array([[127]] * 3 + [[255]], np.uint8)}
        name = "x.weight"
    else:
        tensors = {"x_blocks": np.full((4, 1, 16), 0x11, np.uint8), "x_scales": np.array([[127]] * 3 + [[255]], np.uint8)}
        name = "x"
    d = write(tmp_path, tensors)
    assert run_ws("inspect", d).returncode == 0
    for cmd in (["load", d, "--json"], ["convert", d, "-o", tmp_path / "out.safetensors", "--json"]):
        r = run_ws(*cmd, check=False)
        assert r.returncode == 1, r.stdout
        err = json.loads(r.stderr)["error"]
        assert err["kind"] == "bad_scale" and err["tensor"] == name and "255" in err["message"], err
    assert not (tmp_path / "out.safetensors").exists()


def test_int_packs_match_numpy_reference(checkpoints, tmp_path):
    """compressed-tensors pack-quantized INT4/INT8 (every combination in
    packed.INT_LAYERS) on every ISA: bitwise equal to numpy."""
    d = checkpoints / "int_ct"
    raw = {n: (bytes(t["data"]), t["dtype"], t["shape"]) for n, t in safetensors.deserialize((d / "model.safetensors").read_bytes())}
    np_dtype = {"F32": np.float32, "F16": np.float16, "BF16": packed.ml_dtypes.bfloat16}
    want = {"model.norm.weight": np.frombuffer(raw["model.norm.weight"][0], np.uint16)}
    for name, bits, rows, cols, group, sdt, asym in packed.INT_LAYERS:
        sdata, sdtype, sshape = raw[name + ".weight_scale"]
        scales = np.frombuffer(sdata, np_dtype[sdtype]).reshape(sshape)
        zeros = raw[name + ".weight_zero_point"][0] if asym else None
        want[name + ".weight"] = reference.packed_int(raw[name + ".weight_packed"][0], bits, rows, cols, scales, sdtype, zeros)
    info = {t["name"]: t for t in inspect_json(d)["tensors"]}
    assert info[packed.INT_LAYERS[0][0] + ".weight_packed"]["encoding"] == "INT4"
    assert info[packed.INT_LAYERS[2][0] + ".weight_packed"]["encoding"] == "INT8"
    for isa in ISAS:
        got = convert(d, tmp_path / f"{isa}.safetensors", isa, 2)
        assert set(got) == set(want)
        for name in want:
            assert_bits_equal(name, got[name], want[name])


@pytest.mark.parametrize("scale_dtype", ["F32", "F8_E8M0"])
def test_fp8_ue8m0_block_scales(tmp_path, scale_dtype):
    """DeepSeek-V3.1-style FP8 (`scale_fmt: ue8m0`): 128x128 block scales
    that are powers of two, stored as F32 or as F8_E8M0 exponents; every
    FP8 code; odd edges (partial blocks). Bitwise equal to numpy."""
    rng = np.random.default_rng(SEED)
    rows, cols = 300, 200
    codes = np.concatenate([np.arange(256, dtype=np.uint8), rng.integers(0, 256, rows * cols - 256, dtype=np.uint8)])
    w = codes.reshape(rows, cols).view(packed.ml_dtypes.float8_e4m3fn)
    exps = rng.integers(-20, 5, (3, 2)).astype(np.int32)
    scales = np.ldexp(np.float32(1.0), exps).astype(np.float32)
    stored = scales if scale_dtype == "F32" else (exps + 127).astype(np.uint8).view(packed.ml_dtypes.float8_e8m0fnu)
    d = write(tmp_path, {"x.weight": w, "x.weight_scale_inv": stored},
              {"quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128], "scale_fmt": "ue8m0"}})
    info = {t["name"]: t for t in inspect_json(d)["tensors"]}
    assert info["x.weight"]["scale"]["layout"] == "block" and info["x.weight"]["scale"]["dtype"] == ("F32" if scale_dtype == "F32" else "E8M0")
    got = convert(d, tmp_path / "o.safetensors", "scalar", 1)
    want = reference.fp8(codes.tobytes(), "F8_E4M3", [rows, cols], scales, (128, 128))
    assert_bits_equal("x.weight", got["x.weight"], want)
