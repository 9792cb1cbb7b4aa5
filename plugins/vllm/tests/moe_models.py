"""Tiny random MoE models for the parallel-layout tests: the transformers
checkpoint (BF16, per-expert names), and a GGUF K-quant of it made the way
llama.cpp makes one (experts stacked into `blk.N.ffn_{gate,up,down}_exps`,
an F32 GGUF quantized by the real llama-quantize), with the BF16
checkpoint of gguf-py's dequantization of what it wrote (the reference
for vLLM's default loader). Two architectures: a Qwen3-MoE, and a Mixtral
(llama.cpp's `llama` architecture: experts `block_sparse_moe.experts.E.w1/
w2/w3`, q/k rows permuted as its converter permutes them). Every matrix
is 256 wide, as K-quants need; at TP=2 an expert's down_proj row (768) is
1.5 super-blocks per rank. And a GLM-4.5-style MoE with grouped routing
as block FP8 (grouped_fp8), for round-robin expert placement."""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np

from hf_models import bf16, permute, save_reference, unpermute

_COMMON = dict(
    vocab_size=512, hidden_size=256, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
    num_experts_per_tok=2, max_position_embeddings=256, rms_norm_eps=1e-6, tie_word_embeddings=False,
)
CONFIG = dict(_COMMON, intermediate_size=512, moe_intermediate_size=768, num_experts=4, decoder_sparse_step=1,
              mlp_only_layers=[], norm_topk_prob=True)
MIXTRAL_CONFIG = dict(_COMMON, intermediate_size=768, num_local_experts=4, rope_theta=1000000.0)
PARTS = ("gate", "up", "down")


@dataclass(frozen=True)
class Arch:
    name: str
    config: dict
    hf_classes: tuple[str, str]  # transformers' config and model class
    gguf_arch: gguf.MODEL_ARCH
    module: str  # the MoE module under a layer
    parts: dict  # gate/up/down -> the expert's weight name
    permuted: bool  # llama.cpp permutes q/k rows (LlamaModel.permute)

    def expert(self, layer: int, e: int, part: str) -> str:
        return f"model.layers.{layer}.{self.module}.experts.{e}.{self.parts[part]}.weight"

    @property
    def n_experts(self) -> int:
        return self.config.get("num_experts") or self.config["num_local_experts"]

    @property
    def expert_ffn(self) -> int:
        return self.config.get("moe_intermediate_size") or self.config["intermediate_size"]


QWEN3_MOE = Arch("qwen3moe", CONFIG, ("Qwen3MoeConfig", "Qwen3MoeForCausalLM"), gguf.MODEL_ARCH.QWEN3MOE, "mlp",
                 {"gate": "gate_proj", "up": "up_proj", "down": "down_proj"}, False)
MIXTRAL = Arch("mixtral", MIXTRAL_CONFIG, ("MixtralConfig", "MixtralForCausalLM"), gguf.MODEL_ARCH.LLAMA, "block_sparse_moe",
               {"gate": "w1", "up": "w3", "down": "w2"}, True)


def hf_moe(out: Path, seed: int, config: dict, hf_classes: tuple[str, str]) -> dict[str, np.ndarray]:
    import torch
    import transformers
    from safetensors.numpy import load_file

    config_class, model_class = (getattr(transformers, c) for c in hf_classes)
    torch.manual_seed(seed)
    model = model_class(config_class(**config, torch_dtype="bfloat16")).to(torch.bfloat16)
    with torch.no_grad():  # larger than the default init, so that quantization shows
        for p in model.parameters():
            p.mul_(4.0)
    model.save_pretrained(out, safe_serialization=True)
    return {k: np.asarray(v, dtype=np.float32) for k, v in load_file(str(out / "model.safetensors")).items()}


def _gguf_names(arch: Arch, hf_names) -> dict[str, str]:
    """HF name -> GGUF name of every tensor but the experts."""
    name_map = gguf.get_tensor_name_map(arch.gguf_arch, arch.config["num_hidden_layers"])
    out = {}
    for name in hf_names:
        if ".experts." not in name:
            base, _, suffix = name.rpartition(".")
            out[name] = f"{name_map.get_name(base)}.{suffix}"
    return out


def _heads(arch: Arch, gguf_name: str) -> int:
    """The head count llama.cpp permuted this tensor's rows by (0: none)."""
    if arch.permuted and gguf_name.endswith("attn_q.weight"):
        return arch.config["num_attention_heads"]
    if arch.permuted and gguf_name.endswith("attn_k.weight"):
        return arch.config["num_key_value_heads"]
    return 0


def write_f32_gguf(path: Path, weights: dict[str, np.ndarray], arch: Arch) -> None:
    """llama.cpp's layout of the model: experts stacked, F32."""
    c = arch.config
    w = gguf.GGUFWriter(str(path), arch=gguf.MODEL_ARCH_NAMES[arch.gguf_arch])
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
    w.add_expert_count(arch.n_experts)
    w.add_expert_used_count(c["num_experts_per_tok"])
    w.add_expert_feed_forward_length(arch.expert_ffn)
    w.add_vocab_size(c["vocab_size"])
    w.add_tokenizer_model("none")
    for name, gname in _gguf_names(arch, weights).items():
        x = bf16(weights[name]).astype(np.float32)
        heads = _heads(arch, gname)
        w.add_tensor(gname, permute(x, heads) if heads else x)
    for layer in range(c["num_hidden_layers"]):
        for part in PARTS:
            stack = np.stack([bf16(weights[arch.expert(layer, e, part)]).astype(np.float32) for e in range(arch.n_experts)])
            w.add_tensor(f"blk.{layer}.ffn_{part}_exps.weight", stack)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def reference_of(gguf_path: Path, arch: Arch, hf_names) -> tuple[dict[str, np.ndarray], set]:
    """gguf-py's dequantization of every tensor, under the HF names (q/k
    rows un-permuted)."""
    names = {g: h for h, g in _gguf_names(arch, hf_names).items()}
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
                out[arch.expert(layer, e, part)] = deq[e]
            continue
        heads = _heads(arch, name)
        out[names[name]] = unpermute(deq, heads) if heads else deq
    return out, types


def build(root: Path, seed: int, quantize, ftype: str = "Q4_K_M", arch: Arch = QWEN3_MOE) -> dict[str, Path]:
    """{"bf16": HF checkpoint, "gguf": K-quant GGUF dir, "ref": its BF16 reference}."""
    tag = f"{arch.name}-{ftype.lower()}"
    hf_dir = root / f"{arch.name}-bf16"
    weights = hf_moe(hf_dir, seed, arch.config, arch.hf_classes)
    f32 = root / f"{arch.name}-f32.gguf"
    write_f32_gguf(f32, weights, arch)
    out = root / tag
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(hf_dir / "config.json", out / "config.json")
    quantize(f32, out / "model.gguf", ftype)
    reference, types = reference_of(out / "model.gguf", arch, weights)
    assert set(reference) == set(weights), sorted(set(weights) ^ set(reference))[:5]
    save_reference(root / f"{tag}-ref", hf_dir, reference)
    return {"bf16": hf_dir, "gguf": out, "ref": root / f"{tag}-ref", "types": types}


# GLM-4.5's MoE with grouped routing (2 groups of 2 experts, a shared
# expert): vLLM 0.32 places experts round-robin only for models with more
# than one expert group (fused_moe/expert_map_manager.py).
GLM4_MOE_CONFIG = dict(_COMMON, intermediate_size=512, moe_intermediate_size=256, n_routed_experts=4, n_shared_experts=1,
                       n_group=2, topk_group=1, first_k_dense_replace=0, num_mtp_layers=0)


def grouped_fp8(root: Path, seed: int) -> tuple[Path, Path]:
    """A tiny GLM-4.5-style MoE as block-FP8 safetensors (per-expert
    tensors) and the BF16 checkpoint of its numpy dequantization."""
    from hf_models import fp8_variant

    hf_dir = root / "glm4moe-bf16"
    weights = hf_moe(hf_dir, seed, GLM4_MOE_CONFIG, ("Glm4MoeConfig", "Glm4MoeForCausalLM"))
    fp8_variant(root / "glm4moe-fp8", root / "glm4moe-fp8-ref", hf_dir, weights)
    return root / "glm4moe-fp8", root / "glm4moe-fp8-ref"
