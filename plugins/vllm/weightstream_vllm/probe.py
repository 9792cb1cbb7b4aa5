"""The probe: what a model's own `load_weights` keeps of a weight, asked
with a meta-device tensor that records the `narrow`s (and basic slices,
permutations, unsqueezes) the loaders take of it and the region the final
`copy_` reads. sharding.py plans each rank's reads from it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch


VIRTUAL = "v"  # the place of a size-1 dimension unsqueeze added


def _slice_range(index, size: int):
    """(start, length) of a basic slice with step 1 (None: anything else)."""
    if not isinstance(index, slice):
        return None
    start, stop, step = index.indices(size)
    return (start, max(0, stop - start)) if step == 1 else None


def _item_narrows(index, shape) -> Optional[list[tuple[int, int, int]]]:
    """`t[index]` as narrows (dim, start, length), where it is one: slices
    of step 1 and one Ellipsis (vLLM's gpt-oss takes its expert range and
    tensor-parallel part so: `w[a:b, ...]`, `w[:, :, a:b]`)."""
    items = index if isinstance(index, tuple) else (index,)
    if sum(i is Ellipsis for i in items) > 1:
        return None
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items = items[:at] + (slice(None),) * (len(shape) - len(items) + 1) + items[at + 1:]
    if len(items) > len(shape):
        return None
    out = []
    for d, i in enumerate(items):
        r = _slice_range(i, shape[d])
        if r is None:
            return None
        out.append((d, *r))
    return out


class _Probe(torch.Tensor):
    """A meta tensor standing for a full checkpoint tensor. `place[d]` says
    where dimension d of this view lies in the original: (original
    dimension, start), VIRTUAL for a size-1 dimension unsqueeze added
    (FusedMoE's loader unsqueezes one expert's weight and unbinds it
    again); `place` is None once an operation other than narrow, basic
    slicing, unsqueeze, unbinding an unsqueezed dimension, a permutation of
    dimensions or contiguous made the view's place unknown. `log` collects
    ("copy", offsets, shape) for every copy out of a probe, in the
    original's dimension order (vLLM's gpt-oss permutes its expert stacks
    before the copy), virtual dimensions left out."""

    log: list
    place: Optional[list]

    @staticmethod
    def make(shape, log: list, place: Optional[list]) -> "_Probe":
        p = torch.empty(tuple(shape), dtype=torch.bfloat16, device="meta").as_subclass(_Probe)
        p.log = log
        p.place = place
        return p

    def _narrowed(self, narrows) -> "_Probe":
        shape, place = list(self.shape), None if self.place is None else list(self.place)
        for dim, start, length in narrows:
            dim %= self.dim()
            shape[dim] = int(length)
            if place is not None and place[dim] != VIRTUAL:
                place[dim] = (place[dim][0], place[dim][1] + int(start))
        return _Probe.make(shape, self.log, place)

    def _permuted(self, dims) -> "_Probe":
        dims = [d % self.dim() for d in dims]
        return _Probe.make([self.shape[d] for d in dims], self.log, None if self.place is None else [self.place[d] for d in dims])

    def _copied(self) -> tuple:
        """(offsets, shape) in the original's dimensions (None, shape: unknown)."""
        real = [] if self.place is None else [(p, n) for p, n in zip(self.place, self.shape) if p != VIRTUAL]
        if self.place is None or sorted(p[0] for p, _ in real) != list(range(len(real))):
            return None, tuple(self.shape)
        real.sort(key=lambda r: r[0][0])
        return tuple(p[1] for p, _ in real), tuple(int(n) for _, n in real)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        src = args[0] if args and isinstance(args[0], _Probe) else None

        def arg(i, name, default=None):
            return kwargs.get(name, args[i] if len(args) > i else default)

        if src is not None:
            if func in (torch.Tensor.narrow, torch.narrow):
                return src._narrowed([(arg(1, "dim"), arg(2, "start"), arg(3, "length"))])
            if func is torch.Tensor.__getitem__:
                narrows = _item_narrows(args[1], tuple(src.shape))
                if narrows is not None:
                    return src._narrowed(narrows)
            if func in (torch.Tensor.permute, torch.permute):
                dims = args[1:] if len(args) > 2 or (len(args) == 2 and isinstance(args[1], int)) else arg(1, "dims")
                return src._permuted(dims)
            if func in (torch.Tensor.transpose, torch.transpose, torch.Tensor.t, torch.t):
                d0, d1 = (arg(1, "dim0"), arg(2, "dim1")) if func in (torch.Tensor.transpose, torch.transpose) else (0, 1)
                dims = list(range(src.dim()))
                if src.dim() > 1:
                    dims[d0 % src.dim()], dims[d1 % src.dim()] = dims[d1 % src.dim()], dims[d0 % src.dim()]
                return src._permuted(dims)
            if func is torch.Tensor.contiguous:
                return _Probe.make(src.shape, src.log, src.place)
            if func in (torch.Tensor.unsqueeze, torch.unsqueeze):
                dim = arg(1, "dim") % (src.dim() + 1)
                shape = list(src.shape)
                shape.insert(dim, 1)
                place = None if src.place is None else src.place[:dim] + [VIRTUAL] + src.place[dim:]
                return _Probe.make(shape, src.log, place)
            if func in (torch.Tensor.unbind, torch.unbind):
                dim = arg(1, "dim", 0) % src.dim()
                shape = list(src.shape)
                del shape[dim]
                known = src.place is not None and src.place[dim] == VIRTUAL
                place = src.place[:dim] + src.place[dim + 1:] if known else None
                return tuple(_Probe.make(shape, src.log, place) for _ in range(src.shape[dim]))
        if func is torch.Tensor.copy_:
            copied = arg(1, "src")
            if isinstance(copied, _Probe):
                copied.log.append(("copy", *copied._copied()))
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
    (the innermost dimension against the others). `repeat` = (count,
    stride): the row range `count` times, `stride` rows apart: a 3-D
    weight cut along its middle dimension (vLLM's gpt-oss under tensor
    parallelism keeps its part of every expert's gate_up rows)."""

    rows: tuple[int, int]
    cols: tuple[int, int]
    full_shape: tuple[int, ...]
    repeat: tuple[int, int] = (1, 0)

    def pieces(self) -> list[tuple[tuple[int, int], tuple[int, int]]]:
        """(rows, cols) of each contiguous part of the matrix view."""
        count, stride = self.repeat
        return [((self.rows[0] + k * stride, self.rows[1] + k * stride), self.cols) for k in range(count)]

    def is_whole(self, matrix: tuple[int, int]) -> bool:
        return self.repeat[0] == 1 and self.rows == (0, matrix[0]) and self.cols == (0, matrix[1])

    def bytes(self, ck, name: str) -> int:
        """File bytes reading this region of `name` takes."""
        return sum(ck.slice_bytes(name, rows, cols) for rows, cols in self.pieces())


def probe(model, name: str, shape, swap: bool = False) -> tuple[Optional[Region], str]:
    """Ask the model's own loaders what they keep of weight `name` of full
    `shape`. Returns (region, why): region None with why "skipped" when the
    model takes nothing of it, None with a reason when it cannot be
    expressed as a region. `swap`: the model is given the tensor with its
    last two dimensions swapped (gpt-oss MXFP4 expert stacks, stored [E,
    out, in], handed over as [E, in, out]); it is probed in that shape and
    the region is given in `shape`'s (the stored) coordinates."""
    log: list = []
    shape = tuple(int(d) for d in shape)
    given = list(shape)
    if swap:
        given[-2], given[-1] = given[-1], given[-2]
    p = _Probe.make(given, log, [(d, 0) for d in range(len(shape))])
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
    if swap:
        offsets, sub = list(offsets), list(sub)
        offsets[-2], offsets[-1], sub[-2], sub[-1] = offsets[-1], offsets[-2], sub[-1], sub[-2]
    if len(shape) == 0:
        return Region((0, 1), (0, 1), shape), ""
    if len(shape) == 1:
        return Region((0, 1), (offsets[0], offsets[0] + sub[0]), shape), ""
    cols = (offsets[-1], offsets[-1] + sub[-1])
    middle = [d for d in range(1, len(shape) - 1) if offsets[d] != 0 or sub[d] != shape[d]]
    if len(shape) == 3 and middle:
        # Each outer index's own row range: [E, rows, cols] cut in rows.
        first = offsets[0] * shape[1] + offsets[1]
        return Region((first, first + sub[1]), cols, shape, (sub[0], shape[1])), ""
    if middle:
        return None, "cut along a middle dimension"
    inner = 1
    for d in shape[1:-1]:
        inner *= d
    return Region((offsets[0] * inner, (offsets[0] + sub[0]) * inner), cols, shape), ""
