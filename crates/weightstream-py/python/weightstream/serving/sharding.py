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

from .probe import Probed, Region, probe_all


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
    # Where the model's loaders put the region: the parameter's own memory,
    # filled in place (bulk_load) when the values go there unchanged.
    dest: Any = None
    # The parameter names the model's load_weights reported for it (None:
    # it reports none).
    loaded: Optional[frozenset] = frozenset()


def _plan_expert(ck_name: str, hf_name: str, e: int, shape: list, probed: Probed) -> Planned:
    """Expert `e` of stack `ck_name` as the model's per-expert weight: the
    probe saw the expert's shape; the rows it keeps move to the stack's."""
    region, note = probed.region, "expert"
    if region is None:
        # Not this rank's expert ("skipped"), or a loader that cannot be
        # probed: then the expert's rows whole (and the log says why).
        if probed.why == "skipped":
            return Planned(ck_name, hf_name, None, probed.why, e, loaded=probed.loaded)
        region, note = Region((0, shape[0]), (0, shape[-1]), tuple(shape)), f"expert read whole: {probed.why}"
    rows = shape[0]
    return Planned(ck_name, hf_name, Region((region.rows[0] + e * rows, region.rows[1] + e * rows), region.cols, tuple(shape)),
                   note, e, dest=probed.dest if note == "expert" else None, loaded=probed.loaded)


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
    items = []
    for ck_name, hf_name, *rest in names:
        expert = rest[0] if rest else None
        if expert is not None:  # probed in the expert's shape
            items.append((hf_name, tuple(ck.shape(ck_name))[1:], False))
        else:
            items.append((hf_name, tuple(ck.shape(ck_name)), transposed(ck_name)))
    out = []
    for (ck_name, hf_name, *rest), (_, shape, swap), probed in zip(names, items, probe_all(model, items)):
        if rest and rest[0] is not None:
            out.append(_plan_expert(ck_name, hf_name, rest[0], list(shape), probed))
            continue
        region = probed.region
        if region is None:
            out.append(Planned(ck_name, hf_name, None, probed.why, swap=swap, loaded=probed.loaded))
        elif region.is_whole(ck.matrix(ck_name)):
            out.append(Planned(ck_name, hf_name, None, "replicated", swap=swap, dest=probed.dest, loaded=probed.loaded))
        else:
            refused = _refusal(ck, ck_name, region, fixup_rows(ck_name))
            out.append(Planned(ck_name, hf_name, None if refused else region, refused or "sliced", swap=swap,
                               dest=None if refused else probed.dest, loaded=probed.loaded))
    return out


def _in_place(ck, p: Planned, device: str, storages: set) -> Optional[tuple]:
    """(rows, cols) of the one piece `p` reads, when it can be dequantized
    straight into the parameter memory its loaders copy it into: a plain
    contiguous tensor of the checkpoint's output dtype (BF16, or float16 for
    a float16 model) on the target device, in a parameter's storage
    (not a loader's temporary), of exactly the piece's size, values in file
    order on the way (no permutation, no swap)."""
    d = p.dest
    if d is None or p.swap or p.note == "skipped" or d.untyped_storage().data_ptr() not in storages:
        return None
    if d.dtype != getattr(torch, ck.out_dtype) or not d.is_contiguous() or str(d.device) != str(torch.device(device)):
        return None
    if p.region is None:
        rows, cols = (0, ck.matrix(p.ck_name)[0]), (0, ck.matrix(p.ck_name)[1])
    elif p.region.repeat[0] != 1:
        return None
    else:
        rows, cols = p.region.rows, p.region.cols
    n = 1
    for dim in ck.slice_shape(p.ck_name, rows, cols):
        n *= dim
    return (rows, cols) if n == d.numel() else None


# Temporaries of transformed regions (GGUF q/k) alive at once: q and k of
# a 70B Llama are 12 GB in all, more than a GPU can spare beside the model.
TEMP_BYTES = 256 << 20


def bulk_load(ck, model, planned: list[Planned], device: str, rows_per_head: Callable[[str], int],
              fixup_into: Callable[[str, Any, Any], None]) -> list[Planned]:
    """Dequantize, in one call of the library (its threads and read-ahead
    over every tensor), each planned region that goes into one parameter,
    into that parameter's memory; returns those done. Rows permuted within
    each head (`rows_per_head(ck_name)` > 0: GGUF q/k of llama-family
    models) are put back by the library on the way in on the CPU
    (`load_into(unpermute=)`: no temporary, no second pass); on a GPU,
    where that would be a launch per row, such a region is dequantized
    into a temporary, in calls of at most TEMP_BYTES of them, and written
    into its parameter by `fixup_into(ck_name, t, dest)`: one strided
    copy. The model's loaders already ran on the probe (their bookkeeping
    is done); only the values were left to write."""
    storages = {t.untyped_storage().data_ptr() for t in model.parameters()}
    direct, fixed = [], []
    for p in planned:
        piece = _in_place(ck, p, device, storages)
        if piece is not None:
            (direct if device == "cpu" or not rows_per_head(p.ck_name) else fixed).append((p, piece))
    if direct:
        heads = [rows_per_head(p.ck_name) for p, _ in direct]
        ck.load_into([p.ck_name for p, _ in direct], [p.dest for p, _ in direct], slices=[s for _, s in direct],
                     device=device, unpermute=heads if any(heads) else None)
    for batch in _by_bytes(fixed, TEMP_BYTES):
        temps = [torch.empty_like(p.dest) for p, _ in batch]
        ck.load_into([p.ck_name for p, _ in batch], temps, slices=[s for _, s in batch], device=device)
        for (p, piece), t in zip(batch, temps):
            fixup_into(p.ck_name, t.view(ck.slice_shape(p.ck_name, *piece)), p.dest)
        del temps
    return [p for p, _ in direct + fixed]


def _by_bytes(items: list, limit: int) -> Iterator[list]:
    batch, size = [], 0
    for item in items:
        n = item[0].dest.numel() * item[0].dest.element_size()
        if batch and size + n > limit:
            yield batch
            batch, size = [], 0
        batch.append(item)
        size += n
    if batch:
        yield batch


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
        full = torch.empty(p.region.full_shape, dtype=getattr(torch, ck.out_dtype), device=device)
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
