"""GGUF tensors under the model's Hugging Face names.

The names come from gguf-py's tensor name map applied to the Hugging Face
names of the vLLM model's parameters (a fused parameter standing for the
modules in its `packed_modules_mapping`), or where those are ambiguous to
the Hugging Face model's own state dict (built on the meta device), as
vLLM's former GGUF loader did. llama.cpp's converter permutes the rows of llama-family
attn_q/attn_k weights (LlamaModel.permute in convert_hf_to_gguf.py); they are
put back here (the inverse, transformers' reverse_permute_weights), on the
tensor's own device.
"""
from __future__ import annotations

from typing import Iterable, Optional

from . import experts

# Architectures whose converter applies LlamaModel.permute to q and k.
PERMUTED_ARCHS = {"llama", "llama4", "mistral", "granite", "granitemoe", "deci"}


def _arch(metadata: dict) -> str:
    arch = metadata.get("general.architecture")
    if not isinstance(arch, str):
        raise ValueError("weightstream: the GGUF file has no general.architecture")
    return arch


def hf_name_map(metadata: dict, hf_config, wanted: Iterable[str] = (), model=None) -> dict[str, str]:
    """GGUF tensor name -> Hugging Face name, for this model's architecture.

    From the vLLM `model`'s own parameter names where they give every GGUF
    name in `wanted` one Hugging Face name (`_vllm_names`); else, or
    without a model, from transformers' model of the config, built on the
    meta device for its state-dict names (0.04-0.06 s of a small model's
    load here). WEIGHTSTREAM_VLLM_CHECK_NAMES=1 (the tests set it) builds
    both and fails where the first differs from the second."""
    import os

    arch = _arch(metadata)
    from weightstream._gguf_tables import tables

    constants, tensor_mapping = tables()
    model_arch = next((k for k, v in constants.MODEL_ARCH_NAMES.items() if v == arch), None)
    if model_arch is None:
        raise ValueError(f"weightstream: GGUF architecture {arch!r} is unknown to the installed gguf-py")
    n_blocks = getattr(hf_config, "num_hidden_layers", None) or metadata.get(f"{arch}.block_count")
    name_map = tensor_mapping.get_tensor_name_map(model_arch, int(n_blocks))
    wanted = set(wanted)
    if model is not None:
        fast = _mapped(_vllm_names(model), name_map, hf_config)
        if fast is not None and wanted <= fast.keys():
            if os.environ.get("WEIGHTSTREAM_VLLM_CHECK_NAMES") == "1":
                slow = _transformers_map(name_map, hf_config)
                differ = sorted(n for n in wanted if fast[n] != slow.get(n))
                if differ:
                    raise AssertionError(f"weightstream: vLLM's names map {differ[:5]} to "
                                         f"{[fast[n] for n in differ[:5]]}, transformers' to {[slow.get(n) for n in differ[:5]]}")
            return {n: fast[n] for n in wanted}
    return _transformers_map(name_map, hf_config)


def _vllm_names(model) -> list[str]:
    """The Hugging Face names a vLLM model's parameters stand for: a fused
    one (qkv_proj, gate_up_proj: the model's `packed_modules_mapping`)
    stands for the modules fused in it, any other for its own name. (The
    fused name itself is another model's: gguf-py maps Phi-3's
    `mlp.gate_up_proj` to ffn_up.)"""
    packed = getattr(model, "packed_modules_mapping", None) or {}
    out = []
    for name, _ in model.named_parameters():
        base, _, suffix = name.rpartition(".")
        module, _, leaf = base.rpartition(".")
        parts = packed.get(leaf, (leaf,))
        out.extend(f"{module}.{part}.{suffix}" if module else f"{part}.{suffix}" for part in parts)
    return out


def _transformers_map(name_map, hf_config) -> dict[str, str]:
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        hf_model = AutoModelForCausalLM.from_config(hf_config)
    return _mapped(list(hf_model.state_dict()), name_map, hf_config, strict=False)


def _mapped(hf_names: list[str], name_map, hf_config, strict: bool = True) -> Optional[dict[str, str]]:
    """GGUF name -> Hugging Face name through gguf-py's table; `strict`:
    None where two names map to one GGUF name."""
    out: dict[str, str] = {}
    for hf_name in hf_names:
        base, _, suffix = hf_name.rpartition(".")
        gguf_base = name_map.get_name(base)
        if gguf_base is None:
            continue
        key, value = f"{gguf_base}.{suffix}", experts.checkpoint_name(hf_name, hf_config)
        if strict and out.get(key, value) != value:
            return None
        out[key] = value
    return out


def reverse_permute(w, n_head: int):
    """Undo LlamaModel.permute(w, n_head, n_head) on the row dimension:
    permute viewed rows as (head, 2, half) and swapped the last two; this
    views them as (head, half, 2) and swaps back."""
    rows = w.shape[0]
    return w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)


class Unpermuter:
    """Undoes llama.cpp's q/k row permutation for architectures that have
    it. The permutation stays inside each head, so any range of whole heads
    (a tensor-parallel shard) is un-permuted on its own."""

    def __init__(self, metadata: dict, hf_config):
        arch = _arch(metadata)
        self.active = arch in PERMUTED_ARCHS
        n_head = int(getattr(hf_config, "num_attention_heads", 0) or metadata.get(f"{arch}.attention.head_count", 0))
        n_kv = int(getattr(hf_config, "num_key_value_heads", 0) or metadata.get(f"{arch}.attention.head_count_kv", n_head) or n_head)
        self.heads = {"attn_q.weight": n_head, "attn_k.weight": n_kv}

    def _heads(self, gguf_name: str) -> int:
        if not self.active:
            return 0
        return next((n for suffix, n in self.heads.items() if gguf_name.endswith(suffix)), 0)

    def rows_per_head(self, gguf_name: str, total_rows: int) -> int:
        """Rows per head of a permuted tensor (0: not permuted)."""
        n = self._heads(gguf_name)
        return total_rows // n if n else 0

    def __call__(self, gguf_name: str, t, total_rows: Optional[int] = None):
        """Un-permute `t`: the whole tensor, or a range of whole heads of a
        tensor of `total_rows` rows."""
        n = self._heads(gguf_name)
        if not n:
            return t
        per_head = (total_rows or t.shape[0]) // n
        return reverse_permute(t, t.shape[0] // per_head)


    def into(self, gguf_name: str, t, dest, total_rows: int) -> None:
        """Write `t` un-permuted into `dest` (contiguous, `t`'s size): one
        strided copy, where calling this object and copying the result
        would make an un-permuted temporary first."""
        n = self._heads(gguf_name)
        if not n:
            dest.view(t.shape).copy_(t)
            return
        per_head = total_rows // n
        heads, cols = t.shape[0] // per_head, t.shape[1:]
        dest.view(heads, 2, per_head // 2, *cols).copy_(t.view(heads, per_head // 2, 2, *cols).transpose(1, 2))


def _unmapped(unmapped: list[str], hf_config) -> ValueError:
    return ValueError(
        f"weightstream: {len(unmapped)} GGUF tensor(s) have no counterpart in the {type(hf_config).__name__} "
        f"model (first: {unmapped[:3]}); is the config (--model directory or --hf-config-path) the right one?"
    )


def pairs(names: Iterable[str], metadata: dict, hf_config, n_experts=lambda n: 0, model=None) -> list[tuple[str, str, Optional[int]]]:
    """(GGUF name, HF name, expert) for every tensor, expert None but for
    an expert of a stack (experts.py; `n_experts(name)`: its expert count);
    an error naming the unmapped. `model`: the vLLM model (hf_name_map)."""
    names = list(names)
    wanted = [n for n in names if not experts.is_stack(n)]
    mapping = hf_name_map(metadata, hf_config, wanted, model)
    out, unmapped = [], []
    for n in names:
        split = experts.split(n, n_experts(n), hf_config)
        if split is not None:
            out.extend((n, e.hf_name, e.index) for e in split)
        elif n in mapping:
            out.append((n, mapping[n], None))
        else:
            unmapped.append(n)
    if unmapped:
        raise _unmapped(unmapped, hf_config)
    return out


