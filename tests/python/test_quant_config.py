"""Issue 40, quantization-config items: safetensors checkpoints written
here (numpy + `safetensors`), each with a config.json that either decides
the decoding (item 3, bitwise against numpy) or contradicts its tensors
(items 4-8, 13: refused through the CLI and the Python package, naming
config.json, the tensor and the field)."""
from __future__ import annotations

import json

import numpy as np
import pytest

import packed
import reference
import weightstream
from harness import SEED, run_ws
from test_packed import convert, write
from test_cpu_parity import assert_bits_equal

E4M3 = packed.ml_dtypes.float8_e4m3fn


def refused(d, kind, *needles):
    """The CLI's `inspect --json` and `weightstream.open` both refuse `d`."""
    r = run_ws("inspect", "--json", d, check=False)
    assert r.returncode == 1, r.stdout
    err = json.loads(r.stderr)["error"]
    assert err["kind"] == kind, err
    with pytest.raises(weightstream.WeightstreamError) as e:
        weightstream.open(str(d))
    assert e.value.kind == kind, str(e.value)
    for n in needles:
        assert n in str(e.value) and n in err["message"], (n, str(e.value))
    return e.value


def int_pack(rng, name, bits, rows, cols, groups, zeros=False):
    """A compressed-tensors pack-quantized weight with `groups` scales per row."""
    q = rng.integers(0, 1 << bits, (rows, cols), dtype=np.uint32)
    t = {name + ".weight_packed": packed.pack_int32(q, bits, 1),
         name + ".weight_shape": np.array([rows, cols], dtype=np.int64),
         name + ".weight_scale": (np.abs(rng.standard_normal((rows, groups))) * 0.05).astype(np.float32)}
    if zeros:
        t[name + ".weight_zero_point"] = packed.pack_int32(rng.integers(0, 1 << bits, (rows, groups), dtype=np.uint32), bits, 0)
    return t


def ct(weights: dict, **extra):
    q = {"quant_method": "compressed-tensors", "format": "pack-quantized",
         "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights}}, **extra}
    return {"quantization_config": q}


def fp8_codes(rng, rows, cols):
    return rng.integers(0, 256, rows * cols, dtype=np.uint8).reshape(rows, cols)


def test_fp8_weights_take_their_own_groups_block_size(tmp_path):
    """Item 3: two groups, 128x128 and 100x100 blocks. A [200, 200] weight's
    [2, 2] grid fits both sizes; it was read with the first group's."""
    rng = np.random.default_rng(SEED)
    rows = cols = 200
    codes = {n: fp8_codes(rng, rows, cols) for n in ["m.a", "m.b"]}
    scales = {n: (rng.random((2, 2)) * 4 + 0.01).astype(np.float32) for n in codes}
    tensors = {}
    for n in codes:
        tensors[n + ".weight"] = codes[n].view(E4M3)
        tensors[n + ".weight_scale"] = scales[n]
    group = lambda targets, block: {"targets": targets, "weights": {  # noqa: E731
        "num_bits": 8, "type": "float", "strategy": "block", "block_structure": block}}
    q = {"quant_method": "compressed-tensors", "format": "float-quantized",
         "config_groups": {"group_0": group(["Linear"], [128, 128]), "group_1": group(["re:.*\\.b$"], [100, 100])}}
    d = write(tmp_path, tensors, {"quantization_config": q})
    got = convert(d, tmp_path / "o.safetensors", "scalar", 1)
    for n, block in [("m.a", (128, 128)), ("m.b", (100, 100))]:
        want = reference.fp8(codes[n].tobytes(), "F8_E4M3", [rows, cols], scales[n], block)
        assert_bits_equal(n + ".weight", got[n + ".weight"], want)


def test_int_group_size_that_does_not_divide_the_columns_is_refused(tmp_path):
    """Item 4: 384 columns, group_size 256, scales [R, 2]: read as two groups
    of 192 before. compressed-tensors quantizes no such weight (its
    `_process_group` requires the group size to divide the columns) and its
    decompress would read groups of 192 from the scale's shape: refused."""
    t = int_pack(np.random.default_rng(SEED), "m.up", 8, 4, 384, 2)
    d = write(tmp_path, t, ct({"num_bits": 8, "type": "int", "strategy": "group", "group_size": 256}))
    e = refused(d, "config_mismatch", "group_size 256", "m.up.weight_scale", "groups of 192", "config.json")
    assert e.tensor == "m.up.weight_packed"


@pytest.mark.parametrize("case", ["group_size", "channel_over_groups", "fp8_blocks_over_channel"])
def test_declared_layout_contradicting_the_scale_is_refused(tmp_path, case):
    """Item 5: each producer fails on these; they loaded by the tensors."""
    rng = np.random.default_rng(SEED)
    if case == "group_size":
        t = int_pack(rng, "m.up", 4, 4, 256, 2)  # groups of 128
        cfg, needles = ct({"num_bits": 4, "type": "int", "strategy": "group", "group_size": 64}), ["group_size 64", "groups of 128"]
    elif case == "channel_over_groups":
        t = int_pack(rng, "m.up", 4, 4, 256, 2)
        cfg, needles = ct({"num_bits": 4, "type": "int", "strategy": "channel"}), ["strategy channel", "groups of 128"]
    else:
        t = {"m.up.weight": fp8_codes(rng, 256, 256).view(E4M3), "m.up.weight_scale_inv": np.ones((256, 1), np.float32)}
        cfg = {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}
        needles = ["weight_block_size [128, 128]", "one scale per row"]
    scale = next(n for n in t if "_scale" in n)
    refused(write(tmp_path, t, cfg), "config_mismatch", "config.json", scale, *needles)


@pytest.mark.parametrize("num_bits", [4.0, "4"])
def test_coerced_num_bits_over_int8_is_refused(tmp_path, num_bits):
    """Item 6: compressed-tensors reads 4.0 and "4" as 4; they were read as
    the default 8, so an INT8 pack under them loaded."""
    t = int_pack(np.random.default_rng(SEED), "m.up", 8, 4, 64, 1)
    refused(write(tmp_path, t, ct({"num_bits": num_bits, "type": "int", "strategy": "channel"})), "config_mismatch", "INT4", "INT8")


def test_coerced_symmetric_false_without_zero_points_is_refused(tmp_path):
    t = int_pack(np.random.default_rng(SEED), "m.up", 4, 4, 64, 1)
    refused(write(tmp_path, t, ct({"num_bits": 4, "type": "int", "strategy": "channel", "symmetric": "false"})),
            "config_mismatch", "asymmetric", "symmetric")


def test_field_of_a_type_no_coercion_reads_is_refused(tmp_path):
    t = int_pack(np.random.default_rng(SEED), "m.up", 4, 4, 64, 1)
    refused(write(tmp_path, t, ct({"num_bits": "four", "type": "int"})), "bad_config", "config_groups.group_0.weights.num_bits")


@pytest.mark.parametrize("entry", ["m.lm_head", "re:.*lm_head"])
def test_ignored_module_stored_quantized_is_refused(tmp_path, entry):
    """Item 7: compressed-tensors leaves an ignored module unquantized."""
    t = int_pack(np.random.default_rng(SEED), "m.lm_head", 4, 4, 64, 1)
    refused(write(tmp_path, t, ct({"num_bits": 4, "type": "int", "strategy": "channel"}, ignore=[entry])),
            "config_mismatch", entry, "m.lm_head.weight_packed")


def test_pattern_the_regex_engine_cannot_read_is_refused(tmp_path):
    """Item 8: a look-ahead matched every module."""
    t = int_pack(np.random.default_rng(SEED), "m.up", 8, 4, 64, 1)
    cfg = ct({"num_bits": 4, "type": "int", "strategy": "channel"})
    cfg["quantization_config"]["config_groups"]["group_0"]["targets"] = ["re:(?!.*lm_head).*"]
    refused(write(tmp_path, t, cfg), "bad_config", "re:(?!.*lm_head).*", "config_groups.group_0.targets")


def test_declared_block_scale_that_is_missing_is_refused(tmp_path):
    """Item 13: loaded as if every scale were 1 (the C API and transformers
    open checkpoints through the same catalog)."""
    t = {"m.up.weight": fp8_codes(np.random.default_rng(SEED), 256, 256).view(E4M3)}
    cfg = {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}
    e = refused(write(tmp_path, t, cfg), "config_mismatch", "m.up.weight_scale_inv", "config.json")
    assert e.tensor == "m.up.weight"


@pytest.mark.parametrize("feature", ["pre_quant_scale", "proj_down", "smooth_factor", "transform_config"])
def test_features_not_folded_are_refused_by_name(tmp_path, feature):
    """Item 12: ModelOpt's AWQ pre_quant_scale, SVDQuant's low-rank branch
    and smoothing, compressed-tensors transforms: each loaded as plain BF16
    without it. The `{}` compressed-tensors writes for no transforms loads."""
    rng = np.random.default_rng(SEED)
    t = {"m.q.weight": rng.standard_normal((4, 8)).astype(packed.ml_dtypes.bfloat16)}
    cfg = None
    if feature == "transform_config":
        cfg = {"quantization_config": {"quant_method": "compressed-tensors", "config_groups": {}, "transform_config": {}}}
        (tmp_path / "none").mkdir()
        weightstream.open(str(write(tmp_path / "none", t, cfg)))
        cfg["quantization_config"]["transform_config"] = {"config_groups": {"R3": {"type": "hadamard", "apply": []}}}
        needle = "quantization_config.transform_config"
    else:
        t[f"m.q.{feature}"] = np.ones(8, dtype=np.float32)
        needle = f"m.q.{feature}"
    refused(write(tmp_path, t, cfg), "unfolded_feature", needle)
