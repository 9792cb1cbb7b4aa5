"""What one rank of a parallel layout may read of a GGUF or safetensors
file, from the file's own tensor sizes (+5%): the bounds the layout tests
hold each rank's logged `file bytes read` to."""
from __future__ import annotations

import re
from pathlib import Path

SLACK = 1.05
LAYER = re.compile(r"^blk\.(\d+)\.")
# Expert stacks: GGUF's ffn_*_exps, gpt-oss's MXFP4 `*_blocks` [E, out, in/32, 16];
# and per-expert safetensors tensors (`...experts.E.gate_proj.weight`, their scales).
STACK = ("_exps.weight", "_blocks")
EXPERT = re.compile(r"\.experts\.\d+\.")
# gpt-oss's MXFP4 exponents: weightstream reads a packed tensor's scales
# whole beside any slice of it (plan.rs, companion_bytes), on every rank.
READ_WHOLE = ("_scales",)


def tensors(path: Path) -> list[tuple[str, list[int], int, int]]:
    """(name, shape outermost first, bytes, elements per block); a
    safetensors tensor's block is one element (gpt-oss's packed blocks: one
    byte of their innermost dimension, read alone)."""
    if path.suffix == ".safetensors":
        return _safetensors(path)
    import gguf

    out = []
    for t in gguf.GGUFReader(path).tensors:
        block = gguf.GGML_QUANT_SIZES[t.tensor_type][0]
        out.append((t.name, [int(d) for d in reversed(t.shape)], int(t.n_bytes), block))
    return out


def _safetensors(path: Path) -> list[tuple[str, list[int], int, int]]:
    import json
    import struct

    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    return [(name, list(t["shape"]), t["data_offsets"][1] - t["data_offsets"][0], 1)
            for name, t in header.items() if name != "__metadata__"]


def covering(cols: int, block: int, tp: int) -> float:
    """The largest fraction of a row's blocks one of `tp` ranks reads when
    the row's columns are split evenly: its columns' covering blocks (a
    super-block that straddles two ranks is read by both), and at least
    its 1/tp of the rows when rows are split instead."""
    blocks = cols // block
    per = cols // tp
    worst = max((-(-((r + 1) * per) // block)) - (r * per) // block for r in range(tp))
    return max(1 / tp, worst / blocks)


def _tp_part(name: str, shape: list[int], n: int, block: int, tp: int) -> float:
    if len(shape) < 2 or name.endswith(READ_WHOLE):
        return n
    return n * covering(shape[-1], block, tp)


def tensor_parallel(path: Path, tp: int) -> int:
    """Its part of every matrix (covering blocks), every 1-D tensor whole."""
    return int(sum(_tp_part(*t, tp) for t in tensors(path)) * SLACK)


def expert_parallel(path: Path, tp: int, ep: int) -> int:
    """Its 1/ep of the experts of every stack (whole experts), its TP part
    of the other matrices, every 1-D tensor whole."""
    total = 0.0
    for name, shape, n, block in tensors(path):
        experts = name.endswith(STACK) or EXPERT.search(name) is not None
        total += n / ep if experts else _tp_part(name, shape, n, block, tp)
    return int(total * SLACK)


def pipeline_stage(gguf_file: Path, layers: range, first: bool, last: bool, tied: bool) -> int:
    """The tensors of its layers; the embedding on the first stage (and on
    the last when tied to the head); the final norm and the head on the last."""
    total = 0
    for name, _, n, _ in tensors(gguf_file):
        m = LAYER.match(name)
        if m is not None:
            keep = int(m.group(1)) in layers
        elif name.startswith("token_embd."):
            keep = first or (last and tied)
        else:  # output_norm, output
            keep = last
        total += n if keep else 0
    return int(total * SLACK)


def file_data(gguf_file: Path) -> int:
    return sum(n for _, _, n, _ in tensors(gguf_file))
