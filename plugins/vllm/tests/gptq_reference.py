"""An independently written GPTQ checkpoint holding exactly a Q4_0 GGUF's
codes and scales: what keep=quantized must equal once vLLM has loaded it.

Written from the GGUF with gguf-py's reader and numpy alone (none of
weightstream's code): each Q4_0 block's nibbles (ggml's order: element j
the low nibble of byte j, element j + 16 its high nibble) become uint4b8
codes packed eight to an int32 along the input features, its fp16 `d` the
group's scale, llama.cpp's q/k row permutation undone on the output
features; every other tensor is the BF16 reference (gguf-py's dequantized
values) as the default mode serves it."""
from __future__ import annotations

import json
from pathlib import Path

import gguf
import numpy as np
from safetensors.numpy import load_file, save_file

import hf_models


def q4_0_codes(raw: np.ndarray, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """(codes [rows, cols] uint8, d [rows, cols / 32] fp16) of Q4_0 rows."""
    blocks = np.ascontiguousarray(raw).reshape(rows, -1, 18)
    d = blocks[:, :, :2].copy().view(np.float16)[:, :, 0]
    qs = blocks[:, :, 2:]
    codes = np.concatenate([qs & 0x0F, qs >> 4], axis=2).reshape(rows, -1)
    return codes, d


def pack_gptq(codes: np.ndarray, d: np.ndarray) -> dict[str, np.ndarray]:
    """GPTQ's qweight [in / 8, out], scales [in / 32, out], qzeros
    [in / 32, out / 8] (AutoGPTQ's symmetric 4-bit zero, 8 - 1, per nibble)."""
    rows, cols = codes.shape
    k = codes.T.reshape(cols // 8, 8, rows).astype(np.uint32)
    qweight = np.zeros((cols // 8, rows), dtype=np.uint32)
    for i in range(8):
        qweight |= k[:, i, :] << np.uint32(4 * i)
    return {"qweight": qweight.view(np.int32), "scales": np.ascontiguousarray(d.T),
            "qzeros": np.full((cols // 32, rows // 8), 0x77777777, dtype=np.int32)}


def write(gguf_dir: Path, reference: Path, out: Path, config: dict = hf_models.CONFIG) -> Path:
    """The GPTQ checkpoint of `gguf_dir`/model.gguf (Q4_0 linear weights)
    with the BF16 `reference` for everything else, in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    tensors = load_file(str(reference / "model.safetensors"))
    name_map = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, config["num_hidden_layers"])
    heads = {"attn_q.weight": config["num_attention_heads"], "attn_k.weight": config["num_key_value_heads"]}
    # GGUF name -> HF module, the way hf_models wrote them.
    to_hf = {f"{name_map.get_name(n.rpartition('.')[0])}.{n.rpartition('.')[2]}": n.rpartition(".")[0] for n in tensors}
    for t in gguf.GGUFReader(str(gguf_dir / "model.gguf")).tensors:
        suffix = t.name.rpartition(".")[2]
        hf = to_hf[t.name]
        if t.tensor_type != gguf.GGMLQuantizationType.Q4_0 or "embed" in hf or hf == "lm_head":
            continue
        rows = int(t.shape[-1])
        codes, d = q4_0_codes(t.data, rows)
        n = next((h for s, h in heads.items() if t.name.endswith(s)), 0)
        if n:
            codes, d = hf_models.unpermute(codes, n), hf_models.unpermute(d, n)
        del tensors[f"{hf}.{suffix}"]
        for leaf, x in pack_gptq(codes, d).items():
            tensors[f"{hf}.{leaf}"] = x
    save_file(tensors, str(out / "model.safetensors"))
    cfg = json.loads((reference / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": False, "sym": True,
                                  "lm_head": False, "checkpoint_format": "gptq"}
    (out / "config.json").write_text(json.dumps(cfg))
    return out
