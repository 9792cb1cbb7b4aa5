"""A GGUF mixing NVFP4, MXFP4 and Q4_0 linear weights, and an independently
written compressed-tensors checkpoint holding exactly its codes and
scales: what keep=quantized's FP4 route must equal once vLLM has loaded
it (test_fp4_route.py).

The checkpoint is written from the GGUF with gguf-py's reader and
dequantizer, numpy and compressed-tensors' own packers alone (none of
weightstream's code), from ggml's block structs: NVFP4 (`block_nvfp4`: 4
UE4M3 scale bytes, 32 bytes of E2M1 nibbles per 64 elements; the fixture's
scale bytes are plain E4M3 numbers, 0x28-0x47) and MXFP4 (`block_mxfp4`: an
E8M0 exponent, 16 bytes of nibbles per 32): each group's E2M1 values are
gguf-py's dequantized values over the group's scale, packed by
`pack_fp4_to_uint8`; Q4_0's nibbles minus 8 packed by `pack_to_int32`,
its fp16 d the group's scale; llama.cpp's q/k row permutation undone.
Every other tensor holds gguf-py's dequantized values, exact, in F32
(vLLM rounds them once to the model's dtype, as weightstream does).

Layout (tiny Llama, hf_models.CONFIG): q/k/v NVFP4 (column-parallel, q/k
permuted), o_proj Q4_0 (row-parallel; compressed-tensors' int4), gate/up
MXFP4 (column-parallel), down NVFP4 (row-parallel), output and embeddings
Q4_0 (served as BF16: compressed-tensors quantizes no head)."""
from __future__ import annotations

import json
from pathlib import Path

import gguf
import numpy as np

import hf_models
from gptq_reference import block_codes, llama_writer

Q = gguf.GGMLQuantizationType
CONFIG = hf_models.CONFIG
TYPES = {"attn_q": Q.NVFP4, "attn_k": Q.NVFP4, "attn_v": Q.NVFP4, "attn_output": Q.Q4_0, "ffn_gate": Q.MXFP4,
         "ffn_up": Q.MXFP4, "ffn_down": Q.NVFP4}


def _nvfp4_blocks(rows: int, cols: int, rng) -> np.ndarray:
    """Random NVFP4 blocks: scale bytes 0x28-0x47 (2^-2 to 1.875), random nibbles."""
    raw = rng.integers(0, 256, (rows, cols // 64, 36), dtype=np.uint8)
    raw[:, :, :4] = rng.integers(0x28, 0x48, (rows, cols // 64, 4), dtype=np.uint8)
    return raw.reshape(rows, -1)


def _scales(raw: np.ndarray, rows: int, qtype) -> np.ndarray:
    """Each group's scale as float32, from ggml's struct: NVFP4's UE4M3
    bytes (plain E4M3 here), MXFP4's E8M0 exponent 2^(e - 127)."""
    import ml_dtypes

    if qtype == Q.NVFP4:
        b = np.ascontiguousarray(raw).reshape(rows, -1, 36)[:, :, :4].reshape(rows, -1)
        return b.view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    e = np.ascontiguousarray(raw).reshape(rows, -1, 17)[:, :, 0]
    return np.ldexp(np.float32(1), e.astype(np.int32) - 127).astype(np.float32)


def ct_tensors(raw: np.ndarray, rows: int, cols: int, qtype, n_head: int) -> dict:
    """compressed-tensors' tensors of one module (leaf name -> tensor)."""
    import torch
    from compressed_tensors.compressors.nvfp4.helpers import pack_fp4_to_uint8
    from compressed_tensors.compressors.pack_quantized.helpers import pack_to_int32

    unperm = (lambda x: hf_models.unpermute(x, n_head)) if n_head else (lambda x: x)
    if qtype == Q.Q4_0:
        codes, d = block_codes(raw, rows, qtype)
        codes, d = unperm(codes), unperm(d)
        return {"weight_packed": pack_to_int32(torch.from_numpy(codes.astype(np.int8) - 8), 4),
                "weight_scale": torch.from_numpy(np.ascontiguousarray(d)),
                "weight_shape": torch.tensor([rows, cols], dtype=torch.int64)}
    group = 16 if qtype == Q.NVFP4 else 32
    values = unperm(gguf.quants.dequantize(raw, qtype).reshape(rows, cols).astype(np.float32))
    s = unperm(_scales(raw, rows, qtype))
    e2m1 = values / np.repeat(s, group, axis=1)
    assert np.isin(np.abs(e2m1), [0, 0.5, 1, 1.5, 2, 3, 4, 6]).all(), "every value an E2M1 value times its scale"
    out = {"weight_packed": pack_fp4_to_uint8(torch.from_numpy(e2m1))}
    if qtype == Q.NVFP4:
        out["weight_scale"] = torch.from_numpy(s).to(torch.float8_e4m3fn)
        out["weight_global_scale"] = torch.ones(1, dtype=torch.float32)
    else:
        out["weight_scale"] = torch.from_numpy(s).to(torch.float8_e8m0fnu).view(torch.uint8)
    stored = out["weight_scale"] if qtype == Q.NVFP4 else out["weight_scale"].view(torch.float8_e8m0fnu)
    assert torch.equal(stored.float(), torch.from_numpy(s)), "every scale stored exactly"
    return out


def fp4_variant(root: Path, seed: int, config: dict = CONFIG) -> tuple[Path, Path]:
    """(GGUF dir, compressed-tensors checkpoint dir) of one model (above)."""
    import torch
    from safetensors.torch import save_file

    hf_dir = root / "fp4-bf16"
    weights = hf_models.hf_model(hf_dir, seed)
    rng = np.random.default_rng(seed)
    out, ct = root / "fp4", root / "fp4-ct"
    out.mkdir(parents=True, exist_ok=True)
    ct.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text((hf_dir / "config.json").read_text())
    name_map = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, config["num_hidden_layers"])
    w = llama_writer(out / "model.gguf", config)
    tensors = {}
    heads = {"attn_q": config["num_attention_heads"], "attn_k": config["num_key_value_heads"]}
    for hf_name, x in weights.items():
        base, _, suffix = hf_name.rpartition(".")
        gname = f"{name_map.get_name(base)}.{suffix}"
        kind = gname.split(".")[-2] if gname.startswith("blk.") else ""
        n = heads.get(kind, 0)
        x = hf_models.bf16(x).astype(np.float32)
        if x.ndim == 1:
            w.add_tensor(gname, x)
            tensors[hf_name] = torch.from_numpy(x).to(torch.bfloat16)
            continue
        rows, cols = x.shape
        qtype = TYPES.get(kind, Q.Q4_0)
        if qtype == Q.NVFP4:
            raw = _nvfp4_blocks(rows, cols, rng)
        else:
            raw = gguf.quants.quantize(hf_models.permute(x, n) if n else x, qtype)
        w.add_tensor(gname, raw, raw_dtype=qtype)
        if kind in TYPES:
            for leaf, t in ct_tensors(raw, rows, cols, qtype, n).items():
                tensors[f"{base}.{leaf}"] = t
        else:
            deq = gguf.quants.dequantize(raw, qtype).reshape(rows, cols)
            # The exact values, F32: vLLM rounds them once to the model's
            # dtype, as weightstream's output is (a BF16 copy cast to
            # float16 would round twice: issue 57).
            tensors[hf_name] = torch.from_numpy(np.ascontiguousarray(deq, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    save_file(tensors, str(ct / "model.safetensors"))
    cfg = json.loads((hf_dir / "config.json").read_text())
    fp4 = lambda group, strategy: {"num_bits": 4, "type": "float", "symmetric": True, "dynamic": False,  # noqa: E731
                                   "group_size": group, "strategy": strategy}
    cfg["quantization_config"] = {
        "quant_method": "compressed-tensors", "format": "mixed-precision", "ignore": ["lm_head"],
        "config_groups": {
            "nvfp4": {"targets": ["re:.*(q|k|v|down)_proj$"], "weights": fp4(16, "tensor_group"),
                      "input_activations": None, "format": "nvfp4-pack-quantized"},
            "mxfp4": {"targets": ["re:.*(gate|up)_proj$"], "weights": fp4(32, "group"), "input_activations": None,
                      "format": "mxfp4-pack-quantized"},
            "int4": {"targets": ["re:.*o_proj$"], "input_activations": None, "format": "pack-quantized",
                     "weights": {"num_bits": 4, "type": "int", "symmetric": True, "dynamic": False, "group_size": 32,
                                 "strategy": "group"}},
        },
    }
    (ct / "config.json").write_text(json.dumps(cfg))
    return out, ct
