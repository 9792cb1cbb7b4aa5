"""What one rank of a parallel layout may read of a GGUF file, from the
file's own tensor sizes (+5%): the bounds the layout tests hold each
rank's logged `file bytes read` to."""
from __future__ import annotations

import re
from pathlib import Path

SLACK = 1.05
LAYER = re.compile(r"^blk\.(\d+)\.")


def tensors(gguf_file: Path) -> list[tuple[str, list[int], int, int]]:
    """(name, shape outermost first, bytes, elements per block)."""
    import gguf

    out = []
    for t in gguf.GGUFReader(gguf_file).tensors:
        block = gguf.GGML_QUANT_SIZES[t.tensor_type][0]
        out.append((t.name, [int(d) for d in reversed(t.shape)], int(t.n_bytes), block))
    return out


def covering(cols: int, block: int, tp: int) -> float:
    """The largest fraction of a row's blocks one of `tp` ranks reads when
    the row's columns are split evenly: its columns' covering blocks (a
    super-block that straddles two ranks is read by both), and at least
    its 1/tp of the rows when rows are split instead."""
    blocks = cols // block
    per = cols // tp
    worst = max((-(-((r + 1) * per) // block)) - (r * per) // block for r in range(tp))
    return max(1 / tp, worst / blocks)


def tensor_parallel(gguf_file: Path, tp: int) -> int:
    """Its part of every matrix (covering blocks), every 1-D tensor whole."""
    total = 0.0
    for _, shape, n, block in tensors(gguf_file):
        total += n if len(shape) < 2 else n * covering(shape[-1], block, tp)
    return int(total * SLACK)


def expert_parallel(gguf_file: Path, tp: int, ep: int) -> int:
    """Its 1/ep of the experts of every stack (whole experts), its TP part
    of the other matrices, every 1-D tensor whole."""
    total = 0.0
    for name, shape, n, block in tensors(gguf_file):
        if name.endswith("_exps.weight"):
            total += n / ep
        else:
            total += n if len(shape) < 2 else n * covering(shape[-1], block, tp)
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
