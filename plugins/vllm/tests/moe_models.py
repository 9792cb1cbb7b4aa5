"""A tiny random Qwen3-MoE for the parallel-layout tests: the transformers
checkpoint (BF16, per-expert names), and a GGUF K-quant of it made the way
llama.cpp makes one (experts stacked into `blk.N.ffn_{gate,up,down}_exps`,
an F32 GGUF quantized by the real llama-quantize), with the BF16
checkpoint of gguf-py's dequantization of what it wrote (the reference
for vLLM's default loader). Every matrix is 256 wide, as K-quants need;
at TP=2 an expert's down_proj row (768) is 1.5 super-blocks per rank."""
from __future__ import annotations

import shutil
from pathlib import Path

import gguf
import numpy as np

from hf_models import bf16, save_reference

CONFIG = dict(
    vocab_size=512, hidden_size=256, intermediate_size=512, moe_intermediate_size=768, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, head_dim=64, num_experts=4, num_experts_per_tok=2,
    max_position_embeddings=256, rms_norm_eps=1e-6, decoder_sparse_step=1, mlp_only_layers=[], norm_topk_prob=True,
    tie_word_embeddings=False,
)
PARTS = ("gate", "up", "down")


def hf_moe(out: Path, seed: int) -> dict[str, np.ndarray]:
    import torch
    from safetensors.numpy import load_file
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    torch.manual_seed(seed)
    model = Qwen3MoeForCausalLM(Qwen3MoeConfig(**CONFIG, torch_dtype="bfloat16")).to(torch.bfloat16)
    with torch.no_grad():  # larger than the default init, so that quantization shows
        for p in model.parameters():
            p.mul_(4.0)
    model.save_pretrained(out, safe_serialization=True)
    return {k: np.asarray(v, dtype=np.float32) for k, v in load_file(str(out / "model.safetensors")).items()}


def _expert(layer: int, e: int, part: str) -> str:
    return f"model.layers.{layer}.mlp.experts.{e}.{part}_proj.weight"


def write_f32_gguf(path: Path, weights: dict[str, np.ndarray]) -> None:
    """llama.cpp's layout of the model: experts stacked, F32."""
    arch = gguf.MODEL_ARCH.QWEN3MOE
    c = CONFIG
    name_map = gguf.get_tensor_name_map(arch, c["num_hidden_layers"])
    w = gguf.GGUFWriter(str(path), arch=gguf.MODEL_ARCH_NAMES[arch])
    w.add_block_count(c["num_hidden_layers"])
    w.add_context_length(c["max_position_embeddings"])
    w.add_embedding_length(c["hidden_size"])
    w.add_feed_forward_length(c["intermediate_size"])
    w.add_head_count(c["num_attention_heads"])
    w.add_head_count_kv(c["num_key_value_heads"])
    w.add_key_length(c["head_dim"])
    w.add_value_length(c["head_dim"])
    w.add_layer_norm_rms_eps(c["rms_norm_eps"])
    w.add_rope_freq_base(1000000.0)
    w.add_expert_count(c["num_experts"])
    w.add_expert_used_count(c["num_experts_per_tok"])
    w.add_expert_feed_forward_length(c["moe_intermediate_size"])
    w.add_vocab_size(c["vocab_size"])
    w.add_tokenizer_model("none")
    for name, x in weights.items():
        if ".mlp.experts." in name:
            continue
        base, _, suffix = name.rpartition(".")
        w.add_tensor(f"{name_map.get_name(base)}.{suffix}", bf16(x).astype(np.float32))
    for layer in range(c["num_hidden_layers"]):
        for part in PARTS:
            stack = np.stack([bf16(weights[_expert(layer, e, part)]).astype(np.float32) for e in range(c["num_experts"])])
            w.add_tensor(f"blk.{layer}.ffn_{part}_exps.weight", stack)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def reference_of(gguf_path: Path) -> tuple[dict[str, np.ndarray], set]:
    """gguf-py's dequantization of every tensor, under the HF names."""
    arch = gguf.MODEL_ARCH.QWEN3MOE
    name_map = gguf.get_tensor_name_map(arch, CONFIG["num_hidden_layers"])
    out, types = {}, set()
    for t in gguf.GGUFReader(gguf_path).tensors:
        name = t.name
        types.add(t.tensor_type.name)
        shape = tuple(int(d) for d in reversed(t.shape))
        deq = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape)
        if name.endswith("_exps.weight"):
            layer = int(name.split(".")[1])
            part = name.split(".")[2][len("ffn_"):-len("_exps")]
            for e in range(shape[0]):
                out[_expert(layer, e, part)] = deq[e]
            continue
        out[_hf_name(name, name_map)] = deq
    return out, types


def _hf_name(gguf_name: str, name_map) -> str:
    base, _, suffix = gguf_name.rpartition(".")
    for layer in range(CONFIG["num_hidden_layers"]):
        for hf_base in ("model.layers.{}.self_attn.q_proj", "model.layers.{}.self_attn.k_proj", "model.layers.{}.self_attn.v_proj",
                        "model.layers.{}.self_attn.o_proj", "model.layers.{}.self_attn.q_norm", "model.layers.{}.self_attn.k_norm",
                        "model.layers.{}.input_layernorm", "model.layers.{}.post_attention_layernorm", "model.layers.{}.mlp.gate"):
            if name_map.get_name(hf_base.format(layer)) == base:
                return f"{hf_base.format(layer)}.{suffix}"
    for hf_base in ("model.embed_tokens", "model.norm", "lm_head"):
        if name_map.get_name(hf_base) == base:
            return f"{hf_base}.{suffix}"
    raise KeyError(gguf_name)


def build(root: Path, seed: int, quantize, ftype: str = "Q4_K_M") -> dict[str, Path]:
    """{"bf16": HF checkpoint, "gguf": K-quant GGUF dir, "ref": its BF16 reference}."""
    hf_dir = root / "moe-bf16"
    weights = hf_moe(hf_dir, seed)
    f32 = root / "moe-f32.gguf"
    write_f32_gguf(f32, weights)
    out = root / f"moe-{ftype.lower()}"
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(hf_dir / "config.json", out / "config.json")
    quantize(f32, out / "model.gguf", ftype)
    reference, types = reference_of(out / "model.gguf")
    assert set(reference) == set(weights), sorted(set(weights) ^ set(reference))[:5]
    save_reference(root / f"moe-{ftype.lower()}-ref", hf_dir, reference)
    return {"bf16": hf_dir, "gguf": out, "ref": root / f"moe-{ftype.lower()}-ref", "types": types}
