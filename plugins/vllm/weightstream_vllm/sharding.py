"""Parallel loads: each rank reads and dequantizes only the part of each
weight its layers keep, and nothing of the weights it does not hold.

vLLM's weight loaders take full tensors and narrow them to the rank's shard
(column-parallel layers along the output dimension, fused q/k/v and
gate/up per shard, row-parallel along the input dimension, vocab-parallel
embeddings and heads by vocabulary range). Rather than re-deriving that
layout from layer types or names, each weight is first passed through the
model's own `load_weights` as a *probe*: a tensor on the meta device that
records the `narrow`s the loaders take of it and the region the final
`copy_` reads. That region (a row range, a column range or both of the
weight's matrix view) is what this rank reads from the file. A weight the
loaders copy nowhere is not read at all: another pipeline stage's layer
(vLLM's models skip `is_pp_missing_parameter` names) or an expert that
another expert-parallel rank holds (FusedMoE's expert map, linear or
round-robin placement, says -1). A region whose column edge falls inside a
block (a K-quant FFN width per rank that is not whole 256-value
super-blocks) reads the blocks covering it and is trimmed after
dequantization.

The real load then hands `load_weights` a full-shape tensor in which only
that region is filled (uninitialised elsewhere: on the CPU the untouched
pages of a large `torch.empty` are never committed, on the GPU the caching
allocator reuses the memory). The loaders narrow to exactly the region the
probe recorded, the same code path with the same layer state, so nothing
else is ever read from it.

Where the probe sees anything but one plain region (a fused checkpoint
tensor copied into several shards, an operation other than `narrow`
before the copy), the weight is read whole, and the log says so.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

import torch


VIRTUAL = "v"  # an offset entry for a size-1 dimension unsqueeze added


class _Probe(torch.Tensor):
    """A meta tensor standing for a full checkpoint tensor. `offsets[d]` is
    where this view starts along dimension d of the original (None once an
    operation other than narrow, unsqueeze or unbinding an unsqueezed
    dimension made the view's place unknown; VIRTUAL for a dimension
    unsqueeze added: FusedMoE's loader unsqueezes one expert's weight and
    unbinds it again); `log` collects ("copy", offsets, shape) for every
    copy out of a probe, virtual dimensions left out."""

    log: list
    offsets: Optional[list]

    @staticmethod
    def make(shape, log: list, offsets: Optional[list]) -> "_Probe":
        p = torch.empty(tuple(shape), dtype=torch.bfloat16, device="meta").as_subclass(_Probe)
        p.log = log
        p.offsets = offsets
        return p

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (torch.Tensor.narrow, torch.narrow) and isinstance(args[0], _Probe):
            src = args[0]
            dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
            start = kwargs.get("start", args[2] if len(args) > 2 else None)
            length = kwargs.get("length", args[3] if len(args) > 3 else None)
            dim = dim % src.dim()
            start = int(start)
            shape = list(src.shape)
            shape[dim] = int(length)
            offsets = None if src.offsets is None else [
                o if o == VIRTUAL else o + (start if d == dim else 0) for d, o in enumerate(src.offsets)]
            return _Probe.make(shape, src.log, offsets)
        if func in (torch.Tensor.unsqueeze, torch.unsqueeze) and isinstance(args[0], _Probe):
            src = args[0]
            dim = kwargs.get("dim", args[1] if len(args) > 1 else None) % (src.dim() + 1)
            shape = list(src.shape)
            shape.insert(dim, 1)
            offsets = None if src.offsets is None else src.offsets[:dim] + [VIRTUAL] + src.offsets[dim:]
            return _Probe.make(shape, src.log, offsets)
        if func in (torch.Tensor.unbind, torch.unbind) and isinstance(args[0], _Probe):
            src = args[0]
            dim = kwargs.get("dim", args[1] if len(args) > 1 else 0) % src.dim()
            shape = list(src.shape)
            del shape[dim]
            known = src.offsets is not None and src.offsets[dim] == VIRTUAL
            offsets = src.offsets[:dim] + src.offsets[dim + 1:] if known else None
            return tuple(_Probe.make(shape, src.log, offsets) for _ in range(src.shape[dim]))
        if func is torch.Tensor.copy_:
            src = args[1] if len(args) > 1 else kwargs.get("src")
            if isinstance(src, _Probe):
                if src.offsets is None:
                    src.log.append(("copy", None, tuple(src.shape)))
                else:
                    real = [d for d, o in enumerate(src.offsets) if o != VIRTUAL]
                    src.log.append(("copy", tuple(src.offsets[d] for d in real), tuple(src.shape[d] for d in real)))
                return args[0]
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **kwargs)
        # Any other tensor made from a probe: still a probe, place unknown.
        if isinstance(out, torch.Tensor) and out.device.type == "meta" and any(isinstance(a, _Probe) for a in args):
            probe = next(a for a in args if isinstance(a, _Probe))
            return _Probe.make(out.shape, probe.log, None)
        return out


@dataclass
class Region:
    """What a rank keeps of a weight: rows and columns of its matrix view
    (the innermost dimension against the others), or nothing at all."""

    rows: tuple[int, int]
    cols: tuple[int, int]
    full_shape: tuple[int, ...]

    def is_whole(self, matrix: tuple[int, int]) -> bool:
        return self.rows == (0, matrix[0]) and self.cols == (0, matrix[1])

    def view(self, full: torch.Tensor) -> torch.Tensor:
        """The region of a full-shape tensor, as the loaders narrow it."""
        m = full.reshape(-1, full.shape[-1]) if full.dim() > 1 else full.reshape(1, -1)
        return m[self.rows[0]:self.rows[1], self.cols[0]:self.cols[1]]


def probe(model, name: str, shape) -> tuple[Optional[Region], str]:
    """Ask the model's own loaders what they keep of weight `name` of full
    `shape`. Returns (region, why): region None with why "skipped" when the
    model takes nothing of it, None with a reason when it cannot be
    expressed as one region."""
    log: list = []
    shape = tuple(int(d) for d in shape)
    p = _Probe.make(shape, log, [0] * len(shape))
    try:
        model.load_weights([(name, p)])
    except Exception as e:  # a loader that cannot run on a probe: read whole
        return None, f"the loader cannot be probed ({type(e).__name__}: {e})"
    copies = [e for e in log if e[0] == "copy"]
    if not copies:
        return None, "skipped"
    if len(copies) > 1:
        return None, f"copied into {len(copies)} places"
    _, offsets, sub = copies[0]
    if offsets is None:
        return None, "reshaped before the copy"
    if len(shape) == 0:
        return Region((0, 1), (0, 1), shape), ""
    if len(shape) == 1:
        return Region((0, 1), (offsets[0], offsets[0] + sub[0]), shape), ""
    # N-D: only the outermost and innermost dimensions may be cut.
    if any(offsets[d] != 0 or sub[d] != shape[d] for d in range(1, len(shape) - 1)):
        return None, "cut along a middle dimension"
    inner = 1
    for d in shape[1:-1]:
        inner *= d
    return Region((offsets[0] * inner, (offsets[0] + sub[0]) * inner), (offsets[-1], offsets[-1] + sub[-1]), shape), ""


@dataclass
class Planned:
    ck_name: str
    hf_name: str
    region: Optional[Region]  # None: read whole
    note: str
    # An expert of a 3-D stack (experts.py): the region's rows are the
    # stack's, its full_shape the expert's.
    expert: Optional[int] = None


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


def plan(ck, model, names: list[tuple], fixup_rows: Callable[[str], int],
         transposed: Callable[[str], bool] = lambda n: False) -> list[Planned]:
    """For each (checkpoint name, HF name[, expert]): the region this rank
    reads.

    `fixup_rows(ck_name)` > 0 means the tensor's rows are transformed in
    groups of that many after loading (GGUF q/k un-permutation per head):
    a row range must then cover whole groups. `transposed(ck_name)`: the
    model is given the tensor with its last two dimensions swapped (gpt-oss
    MXFP4 expert stacks); it is probed in that shape and read whole."""
    out = []
    for ck_name, hf_name, *rest in names:
        if rest and rest[0] is not None:
            out.append(_plan_expert(ck, model, ck_name, hf_name, rest[0]))
            continue
        shape = list(ck.shape(ck_name))
        swap = transposed(ck_name)
        if swap:
            shape[-2], shape[-1] = shape[-1], shape[-2]
        region, why = probe(model, hf_name, shape)
        matrix = ck.matrix(ck_name)
        if swap and why != "skipped":
            out.append(Planned(ck_name, hf_name, None, "stored transposed"))
            continue
        if region is None:
            out.append(Planned(ck_name, hf_name, None, why))
            continue
        group = fixup_rows(ck_name)
        if group and (region.rows[0] % group or region.rows[1] % group):
            out.append(Planned(ck_name, hf_name, None, f"rows {region.rows} split a head of {group} rows"))
            continue
        if region.is_whole(matrix):
            out.append(Planned(ck_name, hf_name, None, "replicated"))
            continue
        try:
            ck.slice_shape(ck_name, region.rows, region.cols)
        except Exception as e:  # a region weightstream refuses (an N-D cut)
            out.append(Planned(ck_name, hf_name, None, str(e)))
            continue
        out.append(Planned(ck_name, hf_name, region, "sliced"))
    return out


def load(ck, planned: list[Planned], device: str, fixup: Callable[[str, Any], Any], transforms: Callable[[str], bool]) -> Iterator[tuple[str, Any]]:
    """(HF name, full-shape tensor with this rank's region filled) pairs.

    `fixup(ck_name, t)` transforms a loaded tensor, or the rows of it a
    region holds, before use (GGUF q/k un-permutation); `transforms(name)`
    says whether it changes anything for that tensor. Weights the model
    skips are not read at all."""
    for p in planned:
        if p.note == "skipped":
            continue
        if p.region is None:
            yield p.hf_name, fixup(p.ck_name, ck.get_tensor(p.ck_name, device=device))
            continue
        full = torch.empty(p.region.full_shape, dtype=torch.bfloat16, device=device)
        if p.expert is not None:  # the rows are the stack's: a 2-D (or one-expert) part
            m = full.reshape(-1, full.shape[-1])
            r0 = p.region.rows[0] - p.expert * m.shape[0]
            view = m[r0:r0 + p.region.rows[1] - p.region.rows[0], p.region.cols[0]:p.region.cols[1]]
            view.copy_(ck.get_slice(p.ck_name, p.region.rows, p.region.cols, device=device).reshape(view.shape))
            yield p.hf_name, full
            continue
        view = p.region.view(full)
        if view.is_contiguous() and not transforms(p.ck_name):
            # A row range: dequantized straight into place.
            ck.get_slice(p.ck_name, p.region.rows, p.region.cols, device=device, out=view)
        else:
            part = ck.get_slice(p.ck_name, p.region.rows, p.region.cols, device=device)
            view.copy_(fixup(p.ck_name, part.reshape(view.shape)))
        yield p.hf_name, full
