"""GGUF tensors under the model's Hugging Face names.

The names come from gguf-py's tensor name map applied to the Hugging Face
model's own state dict (built on the meta device), as vLLM's former GGUF
loader did. llama.cpp's converter permutes the rows of llama-family
attn_q/attn_k weights (LlamaModel.permute in convert_hf_to_gguf.py); they are
put back here (the inverse, transformers' reverse_permute_weights), on the
tensor's own device.
"""
from __future__ import annotations

from typing import Any, Iterable, Iterator

# Architectures whose converter applies LlamaModel.permute to q and k.
PERMUTED_ARCHS = {"llama", "llama4", "mistral", "granite", "granitemoe", "deci"}


def _arch(metadata: dict) -> str:
    arch = metadata.get("general.architecture")
    if not isinstance(arch, str):
        raise ValueError("weightstream: the GGUF file has no general.architecture")
    return arch


def hf_name_map(metadata: dict, hf_config) -> dict[str, str]:
    """GGUF tensor name -> Hugging Face name, for this model's architecture."""
    import gguf
    import torch
    from transformers import AutoModelForCausalLM

    arch = _arch(metadata)
    model_arch = next((k for k, v in gguf.MODEL_ARCH_NAMES.items() if v == arch), None)
    if model_arch is None:
        raise ValueError(f"weightstream: GGUF architecture {arch!r} is unknown to gguf-py {gguf.__version__}")
    n_blocks = getattr(hf_config, "num_hidden_layers", None) or metadata.get(f"{arch}.block_count")
    name_map = gguf.get_tensor_name_map(model_arch, int(n_blocks))
    with torch.device("meta"):
        hf_model = AutoModelForCausalLM.from_config(hf_config)
    out = {}
    for hf_name in hf_model.state_dict():
        base, _, suffix = hf_name.rpartition(".")
        gguf_base = name_map.get_name(base)
        if gguf_base is not None:
            out[f"{gguf_base}.{suffix}"] = hf_name
    return out


def reverse_permute(w, n_head: int):
    """Undo LlamaModel.permute(w, n_head, n_head) on the row dimension:
    permute viewed rows as (head, 2, half) and swapped the last two; this
    views them as (head, half, 2) and swaps back."""
    rows = w.shape[0]
    return w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)


def to_hf(weights: Iterable[tuple[str, Any]], metadata: dict, hf_config) -> Iterator[tuple[str, Any]]:
    """(HF name, tensor) pairs from (GGUF name, tensor) pairs."""
    names = hf_name_map(metadata, hf_config)
    arch = _arch(metadata)
    n_head = int(getattr(hf_config, "num_attention_heads", 0) or metadata.get(f"{arch}.attention.head_count", 0))
    n_kv = int(getattr(hf_config, "num_key_value_heads", 0) or metadata.get(f"{arch}.attention.head_count_kv", n_head) or n_head)
    unmapped = []
    for gguf_name, t in weights:
        hf = names.get(gguf_name)
        if hf is None:
            unmapped.append(gguf_name)
            continue
        if arch in PERMUTED_ARCHS:
            if gguf_name.endswith("attn_q.weight"):
                t = reverse_permute(t, n_head)
            elif gguf_name.endswith("attn_k.weight"):
                t = reverse_permute(t, n_kv)
        yield hf, t
    if unmapped:
        raise ValueError(
            f"weightstream: {len(unmapped)} GGUF tensor(s) have no counterpart in the {type(hf_config).__name__} "
            f"model (first: {unmapped[:3]}); is the config (--model directory or --hf-config-path) the right one?"
        )
