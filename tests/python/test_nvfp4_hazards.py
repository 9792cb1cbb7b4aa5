"""NVFP4 hazards seen in the field (issue 55 item 8), refused with typed
errors naming both tensors, never loaded as plausible BF16:

- MixFP4 checkpoints use the sign bit of NVFP4's E4M3 group scales as a
  selector between element formats; an NVFP4 decoder would read it as a
  sign and negate whole groups. A negative scale byte is `bad_scale` at
  load, naming the weight, its scale tensor and the byte's file offset.
- Some NVFP4 checkpoints are stored transposed, `[in / 2, out]` bytes
  with scales along the stored rows: weight and scales agree, so only
  config.json's dimensions tell. Such a weight is `config_mismatch`,
  naming the weight, its scales and the config fields; with its scales
  transposed too it is `scale_mismatch` (the pairing)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import save_file

import packed
from harness import run_ws

CONFIG = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
          "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 1}


def e4m3(a) -> np.ndarray:
    return np.asarray(a, np.float32).astype(packed.ml_dtypes.float8_e4m3fn)


def nvfp4(base: str, codes: np.ndarray, scales: np.ndarray, scheme: str) -> dict:
    if scheme == "modelopt":
        return {f"{base}.weight": codes, f"{base}.weight_scale": scales, f"{base}.weight_scale_2": np.ones((), np.float32)}
    return {f"{base}.weight_packed": codes, f"{base}.weight_scale": scales, f"{base}.weight_global_scale": np.ones(1, np.float32)}


def write(tmp_path, tensors: dict, config: dict | None) -> object:
    d = tmp_path / "ck"
    d.mkdir()
    save_file(tensors, str(d / "model.safetensors"))
    if config is not None:
        (d / "config.json").write_text(json.dumps(config))
    return d


def data_offset(path, name: str) -> int:
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    return 8 + n + json.loads(raw[8:8 + n])[name]["data_offsets"][0]


def refused(d, tmp_path) -> list[dict]:
    errors = []
    for cmd in (["load", d, "--json"], ["convert", d, "-o", tmp_path / "out.safetensors", "--json"]):
        r = run_ws(*cmd, check=False)
        assert r.returncode == 1, (cmd, r.stdout, r.stderr)
        errors.append(json.loads(r.stderr)["error"])
    assert not (tmp_path / "out.safetensors").exists()
    return errors


@pytest.mark.parametrize("scheme", ["modelopt", "compressed_tensors"])
@pytest.mark.parametrize("byte", [0xB8, 0x80])  # -1.0, and -0 (the selector with a zero scale)
def test_a_negative_group_scale_is_refused_naming_its_byte(tmp_path, scheme, byte):
    base = "model.layers.0.mlp.up_proj"
    scales = e4m3(np.full((128, 4), 2.0)).view(np.uint8).copy()
    scales[5, 3] = byte
    tensors = nvfp4(base, np.full((128, 32), 0x21, np.uint8), scales.view(packed.ml_dtypes.float8_e4m3fn), scheme)
    d = write(tmp_path, tensors, CONFIG)
    assert run_ws("inspect", d).returncode == 0  # the header is fine; the bytes are not
    want = data_offset(d / "model.safetensors", f"{base}.weight_scale") + 5 * 4 + 3
    for err in refused(d, tmp_path):
        assert err["kind"] == "bad_scale" and err["tensor"] == f"{base}.weight", err
        assert err["offset"] == want and "negative" in err["message"] and f"{base}.weight_scale" in err["message"], err


@pytest.mark.parametrize("scheme", ["modelopt", "compressed_tensors"])
def test_a_transposed_weight_is_refused_by_its_config(tmp_path, scheme):
    """up_proj is [128, 64] (out, in): stored as [64 / 2, 128] bytes with
    its scales along those rows it pairs, and only the config refuses it."""
    base = "model.layers.0.mlp.up_proj"
    tensors = nvfp4(base, np.full((32, 128), 0x21, np.uint8), e4m3(np.full((32, 16), 2.0)), scheme)
    weight = f"{base}.weight" if scheme == "modelopt" else f"{base}.weight_packed"
    d = write(tmp_path, tensors, CONFIG)
    r = run_ws("inspect", "--json", d, check=False)
    assert r.returncode == 1, r.stdout
    for err in [json.loads(r.stderr)["error"], *refused(d, tmp_path)]:
        assert err["kind"] == "config_mismatch" and err["tensor"] == weight, err
        for needle in (weight, f"{base}.weight_scale", "[32, 128]", "intermediate_size 128", "[128, 64]"):
            assert needle in err["message"], (needle, err)
    # Without a config nothing can tell: the same file loads as stored.
    (d / "config.json").unlink()
    assert run_ws("inspect", d).returncode == 0


def test_a_transposed_weight_with_transposed_scales_is_refused_by_the_pairing(tmp_path):
    base = "model.layers.0.mlp.up_proj"
    d = write(tmp_path, nvfp4(base, np.full((32, 128), 0x21, np.uint8), e4m3(np.full((4, 128), 2.0)), "modelopt"), CONFIG)
    r = run_ws("inspect", "--json", d, check=False)
    err = json.loads(r.stderr)["error"]
    assert r.returncode == 1 and err["kind"] == "scale_mismatch" and err["tensor"] == f"{base}.weight_scale", err
    assert f"{base}.weight" in err["message"], err


def test_the_right_orientation_loads(tmp_path):
    base = "model.layers.0.mlp.up_proj"
    d = write(tmp_path, nvfp4(base, np.full((128, 32), 0x21, np.uint8), e4m3(np.full((128, 4), 2.0)), "modelopt"), CONFIG)
    r = run_ws("load", d, "--json")
    assert r.returncode == 0, r.stderr
