"""Keep-quantized mode (`--model-loader-extra-config '{"keep": "quantized"}'`):
GGUF linear weights whose blocks map exactly onto GPTQ's layout stay
quantized in vLLM, served by its own GPTQ kernels, instead of becoming BF16.

| GGUF | value | GPTQ in vLLM |
|---|---|---|
| Q4_0 | d·(q - 8) | uint4b8, group 32 (CPU: CPUWNA16; GPU: Marlin) |
| Q1_0, Q2_0 | ±d; d·(q - 1) | uint4b8, group 128 / 64 |
| TQ1_0, TQ2_0 | d·(t - 1), 256 per d | uint4b8, group 128 (each d twice) |
| Q8_0, Q5_0, IQ4_NL | d·q; d·(q - 16); d·table[q] | uint8b128, group 32 (GPU Marlin only: vLLM's CPU kernel takes 4 bits) |

The plugin gives vLLM an `auto_gptq` quantization config naming exactly
the modules that stay quantized (`modules_in_block_to_quantize`; those
whose bits or group differ from the most common through GPTQ's
per-module `dynamic` overrides), and fills their
`qweight`, `scales` and `qzeros` from the blocks by bit movement only
(`Checkpoint.get_gptq`): each code carried over, each block's fp16 `d` the
group's scale; the output head too where its type has a target (a Q4_0
`output.weight`; llama-quantize's default Q6_K has none). Everything else
(embeddings, norms, other GGUF types, a module whose shape the kernel
cannot take, a fused module (q/k/v, gate/up) whose parts differ) loads
as BF16 as in the default mode.

The values are exactly the GGUF's where the activations are fp16
(`--dtype float16`): the scales are fp16. Under bf16 vLLM holds GPTQ
scales in bf16, so each `d` is rounded to bf16 on the way in, as for any
GPTQ checkpoint served in bf16; the log says so.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

#: GPTQ's symmetric zero point as AutoGPTQ writes it (2^(bits-1) - 1, the
#: "zero minus one" of its v1 format) in every nibble or byte of an int32;
#: vLLM does not read it for symmetric GPTQ, but the parameter exists.
QZEROS = {4: 0x77777777, 8: 0x7F7F7F7F}

# Per-partition sizes the kernels take (both orientations checked: the
# module's parallel style is not known before the model is built).
MULTIPLE = {"cpu": 32, "cuda": 128}
BITS = {"cpu": (4,), "cuda": (4, 8)}


@dataclass(frozen=True)
class Kept:
    """A checkpoint tensor served as GPTQ: its Hugging Face module, bits and
    group size."""
    ck_name: str
    module: str
    bits: int
    group: int


def choose(ck, names: list[tuple], packed: dict, tp: int, device: str) -> dict[str, Kept]:
    """{checkpoint name: Kept} for the tensors that stay quantized: 2-D
    linear weights of a type with an exact target the device's kernels run
    (BITS), of shapes whose per-rank parts are whole multiples of the
    kernels' tile (MULTIPLE) and of the group, every part of a fused
    module alike (bits and group). `names`:
    (checkpoint name, HF name, expert) as gguf_names.pairs gives them;
    `packed`: the model's packed_modules_mapping (fused name -> parts)."""
    kind = "cuda" if device.startswith("cuda") else "cpu"
    found = {}
    for ck_name, hf_name, *rest in names:
        module, _, leaf = hf_name.rpartition(".")
        if (rest and rest[0] is not None) or leaf != "weight" or "embed" in module:
            continue
        target = ck.gptq_target(ck_name)
        if target is None or target[0] not in BITS[kind] or len(ck.shape(ck_name)) != 2:
            continue
        rows, cols = ck.matrix(ck_name)
        step = MULTIPLE[kind] * tp
        if rows % step == 0 and cols % step == 0 and cols % (target[1] * tp) == 0:
            found[module] = Kept(ck_name, module, *target)
    by_module = dict(found)
    for parts in packed.values():
        for module, kept in list(by_module.items()):
            last = module.rpartition(".")[2]
            if last not in parts:
                continue
            base = module[: -len(last)]
            group = [found.get(base + p) for p in parts]
            if any(g is None or (g.bits, g.group) != (kept.bits, kept.group) for g in group):
                for p in parts:
                    by_module.pop(base + p, None)
    return {k.ck_name: k for k in by_module.values()}


def vllm_prefix(module: str, packed: dict) -> str:
    """The vLLM module a Hugging Face module is part of (q_proj ->
    qkv_proj)."""
    base, _, last = module.rpartition(".")
    for fused, parts in packed.items():
        if last in parts:
            return f"{base}.{fused}" if base else fused
    return module


def quant_config(kept: dict[str, Kept], packed: dict):
    """vLLM's `auto_gptq` config serving exactly `kept` (symmetric, no
    act-order): the most common (bits, group) as the base, a `dynamic`
    override for each module with another."""
    from collections import Counter

    from vllm.model_executor.layers.quantization.auto_gptq import AutoGPTQConfig

    bits, group = Counter((k.bits, k.group) for k in kept.values()).most_common(1)[0][0]
    dynamic = {f"+:^{re.escape(vllm_prefix(k.module, packed))}$": {"bits": k.bits, "group_size": k.group}
               for k in kept.values() if (k.bits, k.group) != (bits, group)}
    modules = sorted(k.module for k in kept.values())
    return AutoGPTQConfig.from_config({
        "quant_method": "gptq", "bits": bits, "group_size": group, "desc_act": False, "sym": True,
        # An output head with an exact target (a Q4_0 output.weight) stays
        # quantized too: vLLM's GPTQ takes a quantized lm_head.
        "lm_head": "lm_head" in modules, "dynamic": dynamic, "modules_in_block_to_quantize": modules,
    })


def regions(model, ck, kept: dict[str, Kept]) -> dict:
    """{checkpoint name: (output rows, input columns) this rank keeps, or
    None: read whole}, asked of the model's own loaders with a probe of
    each `qweight` (sharding.py's probe): a column-parallel rank keeps a
    range of its columns (output features), a row-parallel one a range of
    its packed rows (input features, whole groups)."""
    from .probe import probe_all

    items = []
    for k in kept.values():
        rows, cols = ck.matrix(k.ck_name)
        items.append((f"{k.module}.qweight", (cols * k.bits // 32, rows), False))
    out = {}
    for k, (_, shape, _), probed in zip(kept.values(), items, probe_all(model, items)):
        r = probed.region
        pack = 32 // k.bits
        words_per_group = k.group // pack  # int32 rows of qweight per group
        if r is None or r.repeat[0] != 1 or r.rows[0] % words_per_group or r.rows[1] % words_per_group:
            out[k.ck_name] = None
        elif r.rows == (0, shape[0]) and r.cols == (0, shape[1]):
            out[k.ck_name] = None
        else:
            out[k.ck_name] = (r.cols, (r.rows[0] * pack, r.rows[1] * pack))
    return out


def tensors(ck, kept: dict[str, Kept], regions: dict, rows_per_head, unpermute, device: str = "cpu"):
    """(HF name, tensor) of each kept weight's `qweight`, `scales` and
    `qzeros`, on `device` (the model's: on a GPU the bits move there, by
    weightstream's kernel), for the model's own loaders. Where this rank
    keeps a region (`regions`), only its bytes are read, into full-shape
    tensors whose other elements the loaders never touch (uninitialised,
    as sharding.py's). GGUF q/k output features are permuted within each
    head (llama.cpp's converter): put back in Hugging Face order, as
    columns (a rank's range is whole heads)."""
    import torch

    for k in kept.values():
        rows, cols = ck.matrix(k.ck_name)
        region = regions.get(k.ck_name)
        per_head = rows_per_head(k.ck_name)
        if region is not None and per_head and region[0][0] % per_head:
            region = None
        (r0, r1), (c0, c1) = region or ((0, rows), (0, cols))
        qweight, scales = ck.get_gptq(k.ck_name, rows=(r0, r1), cols=(c0, c1), device=device)
        if per_head:
            qweight = unpermute(k.ck_name, qweight.t(), rows).t()
            scales = unpermute(k.ck_name, scales.t(), rows).t()
        pack = 32 // k.bits
        if region is not None:
            q_full = torch.empty((cols // pack, rows), dtype=torch.int32, device=qweight.device)
            s_full = torch.empty((cols // k.group, rows), dtype=torch.float16, device=qweight.device)
            q_full[c0 // pack:c1 // pack, r0:r1] = qweight
            s_full[c0 // k.group:c1 // k.group, r0:r1] = scales
            qweight, scales = q_full, s_full
        qzeros = torch.full((cols // k.group, rows // pack), QZEROS[k.bits], dtype=torch.int32, device=qweight.device)
        yield f"{k.module}.qweight", qweight.contiguous()
        yield f"{k.module}.scales", scales.contiguous()
        yield f"{k.module}.qzeros", qzeros
