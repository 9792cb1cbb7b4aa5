"""Packed 4-bit safetensors schemes against the producers' own code, run
from PyPI (pinned in requirements/vllm.txt), bit for bit:

- compressed-tensors' NVFP4PackedCompressor / MXFP4PackedCompressor
  `decompress` (nvfp4-pack-quantized, mxfp4-pack-quantized): they return
  BF16 themselves (E2M1 values and group scales in BF16, s / global in
  float32 by torch's promotion with the [1]-shaped global scale, the
  product in float32, rounded to BF16 at the end);
- transformers' gpt-oss `convert_moe_packed_tensors` (E2M1 in BF16, times
  2^(e - 127) by torch.ldexp, i.e. a float32 product rounded to BF16),
  which also transposes each expert to [in, out]: compared transposed.

NaN bit patterns differ between torch and the numerics contract (every
NaN is 0x7FC0 here), so NaNs are compared as NaN, everything else by bits.
ModelOpt NVFP4 is checked against an independent numpy implementation in
tests/python/test_packed.py.
"""
from __future__ import annotations

import sys

import pytest
import torch
from safetensors.torch import load_file as st_load_file

import weightstream
from conftest import ROOT, SEED

sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
import packed  # noqa: E402


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    out = tmp_path_factory.mktemp("packed")
    packed.generate(out, SEED)
    return out


def assert_same_bits(name: str, got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.dtype == torch.bfloat16 and want.dtype == torch.bfloat16, (name, got.dtype, want.dtype)
    assert got.shape == want.shape, (name, got.shape, want.shape)
    g, w = got.contiguous().view(torch.int16), want.contiguous().view(torch.int16)
    both_nan = torch.isnan(got) & torch.isnan(want)
    differ = (g != w) & ~both_nan
    n = int(differ.sum())
    if n:
        i = int(differ.flatten().nonzero()[0])
        raise AssertionError(f"{name}: {n} of {g.numel()} elements differ, first at {i}: "
                             f"{int(g.flatten()[i]) & 0xFFFF:#06x} != {int(w.flatten()[i]) & 0xFFFF:#06x}")
    assert torch.equal(torch.isnan(got), torch.isnan(want)), name


@pytest.mark.parametrize("scheme", ["nvfp4_ct", "mxfp4_ct"])
def test_compressed_tensors_decompress(checkpoints, scheme):
    from compressed_tensors.compressors.mxfp4.base import MXFP4PackedCompressor
    from compressed_tensors.compressors.nvfp4.base import NVFP4PackedCompressor

    compressor = NVFP4PackedCompressor if scheme == "nvfp4_ct" else MXFP4PackedCompressor
    d = checkpoints / scheme
    raw = st_load_file(d / "model.safetensors")
    got = weightstream.load_file(d)
    checked = 0
    for name in raw:
        if not name.endswith(".weight_packed"):
            continue
        base = name[: -len(".weight_packed")]
        state = {k[len(base) + 1:]: v for k, v in raw.items() if k.startswith(base + ".weight_")}
        # decompress reads only the tensors (the scheme is for compress).
        want = compressor.decompress(state, None)["weight"]
        assert_same_bits(base + ".weight", got[base + ".weight"], want)
        checked += 1
    assert checked == len(packed.LAYERS)


def test_transformers_gpt_oss_dequantization(checkpoints):
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors

    d = checkpoints / "mxfp4_gptoss"
    raw = st_load_file(d / "model.safetensors")
    got = weightstream.load_file(d)
    checked = 0
    for name in raw:
        if not name.endswith("_blocks"):
            continue
        base = name[: -len("_blocks")]
        want = convert_moe_packed_tensors(raw[name], raw[base + "_scales"], dtype=torch.bfloat16)
        # transformers hands gpt-oss its experts as [E, in, out]; the file (and weightstream) keep [E, out, in].
        assert_same_bits(base, got[base].transpose(1, 2), want)
        checked += 1
    assert checked == len(packed.LAYERS)


def test_compressed_tensors_pack_quantized(checkpoints):
    """INT4/INT8, symmetric and with zero points, group, channel and tensor
    scales in F32, BF16 and F16: compressed-tensors' own decompress returns
    the scale's dtype (F16 products rounded to F16), then RNE to BF16."""
    from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme

    d = checkpoints / "int_ct"
    raw = st_load_file(d / "model.safetensors")
    got = weightstream.load_file(d)
    for name, bits, rows, cols, group, sdt, asym in packed.INT_LAYERS:
        strategy = "tensor" if group is None else "channel" if group == cols else "group"
        args = QuantizationArgs(num_bits=bits, type="int", symmetric=not asym, strategy=strategy,
                                group_size=group if strategy == "group" else None)
        scheme = QuantizationScheme(targets=["Linear"], weights=args)
        state = {k[len(name) + 1:]: v for k, v in raw.items() if k.startswith(name + ".weight_")}
        want = PackedQuantizationCompressor.decompress(state, scheme)["weight"]
        assert want.dtype == getattr(torch, sdt), (name, want.dtype)
        assert_same_bits(name + ".weight", got[name + ".weight"], want.to(torch.bfloat16))


@pytest.mark.parametrize("scale_dtype", [torch.bfloat16, torch.float32])
def test_compressed_tensors_fp8_blocks(tmp_path, scale_dtype):
    """compressed-tensors float-quantized FP8 with 128x128 block
    `weight_scale` (its `block_structure`): the naive compressor's own
    decompress, in the scale's dtype (the FP8 x BF16 product is exact, so
    one rounding), against weightstream's FP8 block kernel. Every FP8 code
    occurs; rows and columns are whole blocks (compressed-tensors infers the
    block size by integer division, so a partial block would be read with
    another size on its side)."""
    from compressed_tensors.compressors.naive_quantized.base import NaiveQuantizationCompressor
    from safetensors.torch import save_file

    g = torch.Generator().manual_seed(SEED)
    rows, cols = 256, 384
    codes = torch.cat([torch.arange(256, dtype=torch.uint8), torch.randint(0, 256, (rows * cols - 256,), dtype=torch.uint8, generator=g)])
    weight = codes.view(torch.float8_e4m3fn).reshape(rows, cols)
    scale = (torch.rand(rows // 128, cols // 128, generator=g) * 4 + 0.01).to(scale_dtype)
    d = tmp_path / "ck"
    d.mkdir()
    save_file({"x.weight": weight, "x.weight_scale": scale}, str(d / "model.safetensors"))
    q = {"quant_method": "compressed-tensors", "format": "float-quantized",
         "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "block",
                                                                          "block_structure": [128, 128], "symmetric": True}}}}
    (d / "config.json").write_text(__import__("json").dumps({"quantization_config": q}))
    want = NaiveQuantizationCompressor.decompress({"weight": weight, "weight_scale": scale}, None)["weight"]
    assert want.dtype == scale_dtype
    got = weightstream.load_file(d)["x.weight"]
    assert_same_bits("x.weight", got, want.to(torch.bfloat16))
