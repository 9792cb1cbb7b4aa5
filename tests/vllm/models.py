"""Tiny random Llama checkpoints for the vLLM tests, each with the BF16
checkpoint of its reference-dequantized weights (what vLLM's default loader
must be given to produce the same tokens):

- bf16: the transformers checkpoint itself;
- q8_0 / q4_0: GGUF written by gguf-py with llama.cpp's q/k permutation;
  reference = gguf-py dequantize, un-permuted, BF16 (round to nearest even);
- fp8: F8_E4M3 weights with 128x128 weight_scale_inv blocks and an fp8
  quantization_config; reference = numpy dequant, BF16;
- q4_k_m / q3_k_m (kquant_variant): a wider model (K-quants need 256-wide
  rows) written as an F32 GGUF and quantized by the real llama-quantize;
  reference = gguf-py dequantize of every tensor it wrote, un-permuted, BF16.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import gguf
import ml_dtypes
import numpy as np

CONFIG = dict(
    vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-5, tie_word_embeddings=False,
)


def permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's LlamaModel.permute (convert_hf_to_gguf.py)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def bf16(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).astype(ml_dtypes.bfloat16)


# K-quants need rows of whole 256-element super-blocks: hidden 512 and FFN
# 1024, so every matrix can take the preset's K-quant types, and a
# tensor-parallel rank's half of a row (256, 512) is still whole blocks.
KQUANT_CONFIG = {**CONFIG, "hidden_size": 512, "intermediate_size": 1024, "num_attention_heads": 8, "num_key_value_heads": 4}


def hf_model(out: Path, seed: int, tied: bool = False, config: dict = CONFIG):
    """A tiny random LlamaForCausalLM saved as BF16 safetensors; its weights as float32."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    model = LlamaForCausalLM(LlamaConfig(**{**config, "tie_word_embeddings": tied}, torch_dtype="bfloat16")).to(torch.bfloat16)
    # Larger than the default init so that quantization changes the logits.
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(4.0)
    model.save_pretrained(out, safe_serialization=True)
    return {k: v.float().numpy() for k, v in model.state_dict().items()}


def save_reference(d: Path, config_dir: Path, weights: dict[str, np.ndarray]):
    from safetensors.numpy import save_file

    d.mkdir(parents=True, exist_ok=True)
    save_file({k: bf16(v) for k, v in weights.items()}, str(d / "model.safetensors"))
    config = json.loads((config_dir / "config.json").read_text())
    config.pop("quantization_config", None)
    (d / "config.json").write_text(json.dumps(config))


def gguf_variant(out: Path, ref: Path, hf_dir: Path, weights: dict[str, np.ndarray], qtype: gguf.GGMLQuantizationType,
                 config: dict = CONFIG):
    """GGUF with llama.cpp names and q/k permutation, plus config.json.
    qtype F32 writes the weights unquantized (llama-quantize's input)."""
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(hf_dir / "config.json", out / "config.json")
    arch = gguf.MODEL_ARCH.LLAMA
    name_map = gguf.get_tensor_name_map(arch, config["num_hidden_layers"])
    w = gguf.GGUFWriter(str(out / "model.gguf"), arch="llama")
    w.add_block_count(config["num_hidden_layers"])
    w.add_head_count(config["num_attention_heads"])
    w.add_head_count_kv(config["num_key_value_heads"])
    w.add_embedding_length(config["hidden_size"])
    w.add_feed_forward_length(config["intermediate_size"])
    w.add_context_length(config["max_position_embeddings"])
    w.add_layer_norm_rms_eps(config["rms_norm_eps"])
    if qtype == gguf.GGMLQuantizationType.F32:
        # What llama-quantize needs to load the model: a vocabulary size, and
        # no tokenizer (llama.cpp then makes dummy tokens).
        w.add_vocab_size(config["vocab_size"])
        w.add_tokenizer_model("none")
    reference = {}
    for hf_name, x in weights.items():
        if hf_name == "lm_head.weight" and json.loads((hf_dir / "config.json").read_text()).get("tie_word_embeddings"):
            continue  # tied: llama.cpp writes no output.weight
        base, _, suffix = hf_name.rpartition(".")
        gname = f"{name_map.get_name(base)}.{suffix}"
        x = bf16(x).astype(np.float32)  # the model's own BF16 values
        if gname.endswith("attn_q.weight"):
            x = permute(x, config["num_attention_heads"])
        elif gname.endswith("attn_k.weight"):
            x = permute(x, config["num_key_value_heads"])
        if x.ndim == 1 or qtype == gguf.GGMLQuantizationType.F32:  # norms stay F32, as llama.cpp writes them
            w.add_tensor(gname, x)
            deq = x
        else:
            q = gguf.quants.quantize(x, qtype)
            w.add_tensor(gname, q, raw_dtype=qtype)
            deq = gguf.quants.dequantize(q, qtype).reshape(x.shape)
        if gname.endswith("attn_q.weight"):
            deq = unpermute(deq, config["num_attention_heads"])
        elif gname.endswith("attn_k.weight"):
            deq = unpermute(deq, config["num_key_value_heads"])
        reference[hf_name] = deq
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    save_reference(ref, hf_dir, reference)


def kquant_variant(out: Path, ref: Path, hf_dir: Path, weights: dict[str, np.ndarray], ftype: str, quantize):
    """An F32 GGUF of `weights` quantized by llama-quantize to `ftype` (e.g.
    Q4_K_M); the reference is gguf-py's dequantization of what it wrote.
    `quantize(src, dst, ftype)` runs the tool."""
    f32 = out.parent / f"{out.name}-f32"
    gguf_variant(f32, out.parent / f"{out.name}-f32-ref", hf_dir, weights, gguf.GGMLQuantizationType.F32, KQUANT_CONFIG)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(hf_dir / "config.json", out / "config.json")
    quantize(f32 / "model.gguf", out / "model.gguf", ftype)
    name_map = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, KQUANT_CONFIG["num_hidden_layers"])
    hf_names = {}
    for hf_name in weights:
        base, _, suffix = hf_name.rpartition(".")
        hf_names[f"{name_map.get_name(base)}.{suffix}"] = hf_name
    reference, types = {}, set()
    for t in gguf.GGUFReader(out / "model.gguf").tensors:
        types.add(t.tensor_type.name)
        shape = tuple(int(d) for d in reversed(t.shape))
        deq = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape)
        if t.name.endswith("attn_q.weight"):
            deq = unpermute(deq, KQUANT_CONFIG["num_attention_heads"])
        elif t.name.endswith("attn_k.weight"):
            deq = unpermute(deq, KQUANT_CONFIG["num_key_value_heads"])
        reference[hf_names[t.name]] = deq
    save_reference(ref, hf_dir, reference)
    return types


def fp8_variant(out: Path, ref: Path, hf_dir: Path, weights: dict[str, np.ndarray]):
    """Block-FP8 (DeepSeek layout) of every 2-D weight; 1-D ones BF16."""
    from safetensors.numpy import save_file

    out.mkdir(parents=True, exist_ok=True)
    tensors, reference = {}, {}
    for name, x in weights.items():
        x = bf16(x).astype(np.float32)
        if x.ndim != 2:
            tensors[name] = bf16(x)
            reference[name] = x
            continue
        rows, cols = x.shape
        gr, gc = -(-rows // 128), -(-cols // 128)
        scales = np.zeros((gr, gc), dtype=np.float32)
        q = np.zeros_like(x)
        for i in range(gr):
            for j in range(gc):
                blk = x[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128]
                s = np.float32(max(np.abs(blk).max(), 1e-12) / 448.0)
                scales[i, j] = s
                q[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128] = blk / s
        codes = q.astype(ml_dtypes.float8_e4m3fn)
        tensors[name] = codes
        tensors[name + "_scale_inv"] = scales
        s_full = np.repeat(np.repeat(scales, 128, 0), 128, 1)[:rows, :cols]
        reference[name] = (codes.astype(np.float32) * s_full).astype(np.float32)
    save_file(tensors, str(out / "model.safetensors"))
    config = json.loads((hf_dir / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
    (out / "config.json").write_text(json.dumps(config))
    save_reference(ref, hf_dir, reference)


def build_all(root: Path, seed: int = 0) -> dict[str, tuple[Path, Path]]:
    """{kind: (checkpoint for weightstream, BF16 reference for the default loader)}."""
    hf_dir = root / "bf16"
    weights = hf_model(hf_dir, seed)
    out = {"bf16": (hf_dir, hf_dir)}
    for kind, qtype in (("q8_0", gguf.GGMLQuantizationType.Q8_0), ("q4_0", gguf.GGMLQuantizationType.Q4_0)):
        gguf_variant(root / kind, root / f"{kind}-ref", hf_dir, weights, qtype)
        out[kind] = (root / kind, root / f"{kind}-ref")
    fp8_variant(root / "fp8", root / "fp8-ref", hf_dir, weights)
    out["fp8"] = (root / "fp8", root / "fp8-ref")
    tied_dir = root / "tied-bf16"
    tied_weights = hf_model(tied_dir, seed + 1, tied=True)
    gguf_variant(root / "tied-q8_0", root / "tied-q8_0-ref", tied_dir, tied_weights, gguf.GGMLQuantizationType.Q8_0)
    out["tied-q8_0"] = (root / "tied-q8_0", root / "tied-q8_0-ref")
    return out


def build_kquants(root: Path, seed: int, quantize, ftypes=("Q4_K_M", "Q3_K_M")) -> dict[str, tuple[Path, Path, set]]:
    """{ftype: (GGUF checkpoint dir, BF16 reference dir, ggml types in the file)}."""
    hf_dir = root / "kquant-bf16"
    weights = hf_model(hf_dir, seed + 2, config=KQUANT_CONFIG)
    out = {}
    for ftype in ftypes:
        d = root / ftype.lower()
        out[ftype] = (d, root / f"{ftype.lower()}-ref", kquant_variant(d, root / f"{ftype.lower()}-ref", hf_dir, weights, ftype, quantize))
    return out
