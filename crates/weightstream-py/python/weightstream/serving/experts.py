"""GGUF expert stacks as the per-expert weights vLLM's MoE models load.

llama.cpp stores each MoE layer's experts as three 3-D tensors,
`blk.N.ffn_{gate,up,down}_exps.weight` of shape [experts, rows, cols]
(convert_hf_to_gguf.py stacks the Hugging Face per-expert weights). vLLM's
MoE models (Qwen2-MoE, Qwen3-MoE, Mixtral ...) load per-expert names
(`model.layers.N.mlp.experts.E.gate_proj.weight`, Mixtral's
`block_sparse_moe.experts.E.w1.weight`) through FusedMoE's weight loader,
which places each expert (or, under tensor parallelism, its shard) and
skips experts another expert-parallel rank holds. Expert E of a stack is
rows [E * rows, (E + 1) * rows) of the stack's matrix view: contiguous
bytes, read alone.
"""
from __future__ import annotations

import re
from typing import NamedTuple, Optional

STACK = re.compile(r"^blk\.(\d+)\.ffn_(gate|up|down)_exps\.weight$")

# Per Hugging Face model type: (the MoE module under a layer, weight names).
_NAMES = {
    "mixtral": ("block_sparse_moe", {"gate": "w1", "up": "w3", "down": "w2"}),
}
_DEFAULT = ("mlp", {"gate": "gate_proj", "up": "up_proj", "down": "down_proj"})


class Expert(NamedTuple):
    """One expert of a GGUF stack under its Hugging Face name."""

    stack: str
    hf_name: str
    index: int


def is_stack(gguf_name: str) -> bool:
    return STACK.match(gguf_name) is not None


def checkpoint_name(hf_name: str, hf_config) -> str:
    """A non-expert weight of the MoE module under its checkpoint's name:
    transformers 5 names Mixtral's MoE module `mlp` in memory (the router
    `mlp.gate`); its checkpoints, and vLLM's Mixtral, `block_sparse_moe`."""
    module, _ = _NAMES.get(getattr(hf_config, "model_type", ""), _DEFAULT)
    return hf_name.replace(".mlp.gate.", f".{module}.gate.") if module != "mlp" else hf_name


def split(gguf_name: str, n_experts: int, hf_config) -> Optional[list[Expert]]:
    """The experts of stack `gguf_name` (None: not an expert stack)."""
    m = STACK.match(gguf_name)
    if m is None:
        return None
    layer, part = int(m.group(1)), m.group(2)
    module, names = _NAMES.get(getattr(hf_config, "model_type", ""), _DEFAULT)
    return [Expert(gguf_name, f"model.layers.{layer}.{module}.experts.{e}.{names[part]}.weight", e) for e in range(n_experts)]
