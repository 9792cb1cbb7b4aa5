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
    before the copy), virtual dimensions left out, and the tensor copied
    into (a view of the model's parameter, or None where the copy went
    through a parameter subclass's own copy_)."""

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
        """(offsets, shape, in order) in the original's dimensions (None,
        shape, False: unknown); in order: the view's dimensions are the
        original's in their order (no permutation before the copy)."""
        real = [] if self.place is None else [(p, n) for p, n in zip(self.place, self.shape) if p != VIRTUAL]
        if self.place is None or sorted(p[0] for p, _ in real) != list(range(len(real))):
            return None, tuple(self.shape), False
        in_order = [p[0] for p, _ in real] == list(range(len(real)))
        real.sort(key=lambda r: r[0][0])
        return tuple(p[1] for p, _ in real), tuple(int(n) for _, n in real), in_order

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
                dest = args[0]
                plain = isinstance(dest, torch.Tensor) and not isinstance(dest, _Probe)
                copied.log.append(("copy", *copied._copied(), dest if plain else None))
                return args[0]
        if src is not None and getattr(func, "__name__", "").endswith("_") and not getattr(func, "__name__", "").startswith("__"):
            # An in-place change of the weight's values (vLLM's gpt-oss zeroes
            # the down bias on every tensor-parallel rank but the first)
            # before it is copied: its values are the loaders' to make.
            src.log.append(("in place", func.__name__))
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


@dataclass
class Probed:
    """What the model's loaders did with a weight: the region they keep of
    it (None: see `why`), and the tensor that region was copied into."""

    region: Optional[Region]
    why: str = ""
    # The tensor the region was copied into, when it received the region's
    # values in the file's order (no permutation on the way).
    dest: Optional[torch.Tensor] = None
    # None where the model's load_weights reports nothing (returns None).
    loaded: Optional[frozenset] = frozenset()


def probe_all(model, items: list[tuple[str, tuple, bool]]) -> list[Probed]:
    """`probe` for every (name, shape, swap), in one call of the model's
    load_weights (its per-call set-up, 0.7 ms, once; each probe keeps its
    own log). A loader that fails on one probe fails the call: then each
    weight is probed alone, so that only that one is read whole."""
    logs: list[list] = [[] for _ in items]
    probes = [_make(shape, swap, log) for (_, shape, swap), log in zip(items, logs)]
    try:
        loaded = model.load_weights(list(zip((n for n, _, _ in items), probes)))
    except Exception:
        return [probe(model, name, shape, swap) for name, shape, swap in items]
    loaded = None if loaded is None else frozenset(loaded)
    return [_result(log, tuple(int(d) for d in shape), swap, loaded) for (_, shape, swap), log in zip(items, logs)]


def _make(shape, swap: bool, log: list) -> _Probe:
    given = [int(d) for d in shape]
    if swap:
        given[-2], given[-1] = given[-1], given[-2]
    return _Probe.make(given, log, [(d, 0) for d in range(len(given))])


def probe(model, name: str, shape, swap: bool = False) -> Probed:
    """Ask the model's own loaders what they keep of weight `name` of full
    `shape`. The region is None with why "skipped" when the model takes
    nothing of it, None with a reason when it cannot be expressed as a
    region. `swap`: the model is given the tensor with its last two
    dimensions swapped (gpt-oss MXFP4 expert stacks, stored [E, out, in],
    handed over as [E, in, out]); it is probed in that shape and the region
    is given in `shape`'s (the stored) coordinates. `loaded`: the parameter
    names the model's load_weights reported."""
    log: list = []
    try:
        loaded = model.load_weights([(name, _make(shape, swap, log))])
    except Exception as e:  # a loader that cannot run on a probe: read whole
        return Probed(None, f"the loader cannot be probed ({type(e).__name__}: {e})")
    return _result(log, tuple(int(d) for d in shape), swap, None if loaded is None else frozenset(loaded))


def _result(log: list, shape: tuple, swap: bool, loaded: Optional[frozenset]) -> Probed:
    copies = [e for e in log if e[0] == "copy"]
    if not copies:
        return Probed(None, "skipped", loaded=loaded)
    if len(copies) > 1:
        return Probed(None, f"copied into {len(copies)} places", loaded=loaded)
    _, offsets, sub, in_order, dest = copies[0]
    if offsets is None:
        return Probed(None, "reshaped before the copy", loaded=loaded)
    region = _region(shape, list(offsets), list(sub), swap)
    # The destination takes the region's values in file order only when
    # the copy's source was the region itself, not a permutation of it, and
    # the loaders changed none of its values in place first.
    changed = any(e[0] == "in place" for e in log)
    direct = dest if in_order and not swap and not changed else None
    return Probed(region, "" if region is not None else "cut along a middle dimension", direct, loaded)


def _region(shape: tuple, offsets: list, sub: list, swap: bool) -> Optional[Region]:
    """The region of a copy at `offsets` of size `sub` (None: not one)."""
    if swap:
        offsets[-2], offsets[-1], sub[-2], sub[-1] = offsets[-1], offsets[-2], sub[-1], sub[-2]
    if len(shape) == 0:
        return Region((0, 1), (0, 1), shape)
    if len(shape) == 1:
        return Region((0, 1), (offsets[0], offsets[0] + sub[0]), shape)
    cols = (offsets[-1], offsets[-1] + sub[-1])
    middle = [d for d in range(1, len(shape) - 1) if offsets[d] != 0 or sub[d] != shape[d]]
    if len(shape) == 3 and middle:
        # Each outer index's own row range: [E, rows, cols] cut in rows.
        first = offsets[0] * shape[1] + offsets[1]
        return Region((first, first + sub[1]), cols, shape, (sub[0], shape[1]))
    if middle:
        return None
    inner = 1
    for d in shape[1:-1]:
        inner *= d
    return Region((offsets[0] * inner, (offsets[0] + sub[0]) * inner), cols, shape)
