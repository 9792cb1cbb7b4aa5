"""Parallel loads: each rank reads and dequantizes only the part of each
weight its layers keep, and nothing of the weights it does not hold.

vLLM's weight loaders take full tensors and narrow them to the rank's shard
(column-parallel layers along the output dimension, fused q/k/v and
gate/up per shard, row-parallel along the input dimension, vocab-parallel
embeddings and heads by vocabulary range). Rather than re-deriving that
layout from layer types or names, each weight is first passed through the
model's own `load_weights` as a *probe* (probe.py): a tensor on the meta
device that records the `narrow`s (and basic slices, permutations) the
loaders take of it and the region the final `copy_` reads. That region (a
row range, a column range or both of the weight's matrix view; for a 3-D
stack cut along its middle dimension, that row range of every outer
index) is what this rank reads from the file. A weight the
loaders copy nowhere is not read at all: another pipeline stage's layer
(vLLM's models skip `is_pp_missing_parameter` names) or an expert that
another expert-parallel rank holds (FusedMoE's expert map, linear or
round-robin placement, says -1). A region whose column edge falls inside a
block (a K-quant FFN width per rank that is not whole 256-value
super-blocks, a gpt-oss down_proj half of 1.5 MXFP4 blocks) reads the
blocks covering it and is trimmed after dequantization.

The real load then hands `load_weights` a full-shape tensor in which only
that region is filled (uninitialised elsewhere: on the CPU the untouched
pages of a large `torch.empty` are never committed, on the GPU the caching
allocator reuses the memory). The loaders narrow to exactly the region the
probe recorded, the same code path with the same layer state, so nothing
else is ever read from it.

Where the probe sees anything but such a region (a fused checkpoint
tensor copied into several shards, an operation other than those before
the copy), the weight is read whole, and the log says so.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

import torch

from .probe import Region, probe


@dataclass
class Planned:
    ck_name: str
    hf_name: str
    region: Optional[Region]  # None: read whole
    note: str
    # An expert of a 3-D stack (experts.py): the region's rows are the
    # stack's, its full_shape the expert's.
    expert: Optional[int] = None
    # Handed to the model with its last two dimensions swapped (the region
    # is in the stored coordinates).
    swap: bool = False


def _plan_expert(ck, model, ck_name: str, hf_name: str, e: int) -> Planned:
    """Expert `e` of stack `ck_name` as the model's per-expert weight: the
    probe sees the expert's shape; the rows it keeps move to the stack's."""
    shape = list(ck.shape(ck_name))[1:]
    region, why = probe(model, hf_name, shape)
    note = "expert"
    if region is None:
        # Not this rank's expert ("skipped"), or a loader that cannot be
        # probed: then the expert's rows whole (and the log says why).
        if why == "skipped":
            return Planned(ck_name, hf_name, None, why, e)
        region, note = Region((0, shape[0]), (0, shape[-1]), tuple(shape)), f"expert read whole: {why}"
    rows = shape[0]
    return Planned(ck_name, hf_name, Region((region.rows[0] + e * rows, region.rows[1] + e * rows), region.cols, tuple(shape)),
                   note, e)


def _refusal(ck, ck_name: str, region: Region, group: int) -> Optional[str]:
    """Why `region` cannot be read alone (None: it can)."""
    for rows, cols in region.pieces():
        if group and (rows[0] % group or rows[1] % group):
            return f"rows {rows} split a head of {group} rows"
        try:
            ck.slice_shape(ck_name, rows, cols)
        except Exception as e:  # a region weightstream refuses
            return str(e)
    return None


def plan(ck, model, names: list[tuple], fixup_rows: Callable[[str], int],
         transposed: Callable[[str], bool] = lambda n: False) -> list[Planned]:
    """For each (checkpoint name, HF name[, expert]): the region this rank
    reads.

    `fixup_rows(ck_name)` > 0 means the tensor's rows are transformed in
    groups of that many after loading (GGUF q/k un-permutation per head):
    a row range must then cover whole groups. `transposed(ck_name)`: the
    model is given the tensor with its last two dimensions swapped (gpt-oss
    MXFP4 expert stacks); it is probed in that shape, and what the loaders
    keep of it (an expert range, every expert's gate_up rows, down columns)
    is read in the stored layout."""
    out = []
    for ck_name, hf_name, *rest in names:
        if rest and rest[0] is not None:
            out.append(_plan_expert(ck, model, ck_name, hf_name, rest[0]))
            continue
        swap = transposed(ck_name)
        region, why = probe(model, hf_name, ck.shape(ck_name), swap)
        if region is None:
            out.append(Planned(ck_name, hf_name, None, why, swap=swap))
        elif region.is_whole(ck.matrix(ck_name)):
            out.append(Planned(ck_name, hf_name, None, "replicated", swap=swap))
        else:
            refused = _refusal(ck, ck_name, region, fixup_rows(ck_name))
            out.append(Planned(ck_name, hf_name, None if refused else region, refused or "sliced", swap=swap))
    return out


def load(ck, planned: list[Planned], device: str, fixup: Callable[[str, Any], Any], transforms: Callable[[str], bool]) -> Iterator[tuple[str, Any]]:
    """(HF name, full-shape tensor with this rank's region filled) pairs.

    `fixup(ck_name, t)` transforms a loaded tensor, or the rows of it a
    region holds, before use (GGUF q/k un-permutation, the swap of a
    transposed stack read whole); `transforms(name)` says whether it
    changes anything for the rows of that tensor. A transposed tensor's
    region is filled in the stored layout and handed over as a swapped
    view. Weights the model skips are not read at all."""
    for p in planned:
        if p.note == "skipped":
            continue
        if p.region is None:
            yield p.hf_name, fixup(p.ck_name, ck.get_tensor(p.ck_name, device=device))
            continue
        full = torch.empty(p.region.full_shape, dtype=torch.bfloat16, device=device)
        m = full.reshape(-1, full.shape[-1]) if full.dim() > 1 else full.reshape(1, -1)
        # An expert of a stack: the region's rows are the stack's.
        base = 0 if p.expert is None else p.expert * m.shape[0]
        for rows, cols in p.region.pieces():
            view = m[rows[0] - base:rows[1] - base, cols[0]:cols[1]]
            if view.is_contiguous() and not transforms(p.ck_name):
                # A row range: dequantized straight into place.
                ck.get_slice(p.ck_name, rows, cols, device=device, out=view)
            else:
                part = ck.get_slice(p.ck_name, rows, cols, device=device).reshape(view.shape)
                view.copy_(fixup(p.ck_name, part) if transforms(p.ck_name) else part)
        yield p.hf_name, full.transpose(-2, -1) if p.swap else full
