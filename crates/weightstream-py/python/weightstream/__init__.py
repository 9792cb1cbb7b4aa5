"""weightstream: quantized checkpoints (GGUF Q4_0-Q8_0, K-quants, IQ types, MXFP4/NVFP4,
ternary, F16/F32/BF16, FP8
safetensors) loaded as BF16 tensors, dequantized on the GPU when one is
asked for, on the CPU otherwise, with the same bits either way.

    tensors = weightstream.load_file("model-q4_0.gguf", device="cuda:0")

    with weightstream.open("./DeepSeek-V3-FP8") as ckpt:
        for name, tensor in ckpt:
            ...

Tensors are torch tensors (torch.bfloat16) when torch is installed; without
torch, numpy arrays (ml_dtypes.bfloat16 if ml_dtypes is installed, else the
raw BF16 bits as uint16). On a GPU the kernels write straight into
torch-allocated tensors, ordered after torch's current stream.
"""
from __future__ import annotations

import json
import os
import logging
import numbers
import queue
import threading
from typing import Any, Iterator, Optional, Union

from ._native import Checkpoint as _Native
from ._native import WeightstreamError, cuda_status
from ._native import fetched_total as _fetched_total
from ._native import release_staging as _release_staging
from ._native import source_name as _source_name
from ._native import __version__

__all__ = ["open", "load_file", "Checkpoint", "WeightstreamError", "cuda_status", "fetched_total", "release_staging", "__version__"]

from ._buffers import _address, _check_destination, _empty, _error, _out_dtype, _parse_device, _torch  # noqa: F401 (also the submodules' names)

_END_OF_BATCH = object()
_log = logging.getLogger("weightstream")


def _log_notes(notes) -> None:
    """How files are read, as (text, fallback) pairs: why auto chose a source
    (info), or a source used instead of the one asked for (a warning)."""
    for text, fallback in notes:
        _log.log(logging.WARNING if fallback else logging.INFO, "%s", text)


def _rows_per_head(name: str, u) -> int:
    """`load_into`'s un-permutation for `name`: None or 0 (none), or a
    positive whole number of rows per head; anything else refused (2.5
    would have been truncated to 2, -1 overflowed in the native call)."""
    if u is None:
        return 0
    if isinstance(u, bool) or not isinstance(u, numbers.Integral) or u < 0:
        raise ValueError(f"load_into: unpermute for {name!r} is {u!r}: the rows per head, a whole number >= 0 (0 or None: none)")
    return int(u)


class Checkpoint:
    """An opened checkpoint: a .gguf file, a .safetensors file, or a directory
    of shards. Only headers are read when it opens."""

    def __init__(self, path, device="cpu", *, source: str = "auto", skip_unsupported: bool = False,
                 threads: Optional[int] = None, staging_slots: Optional[int] = None,
                 staging_bytes: Optional[int] = None, readers: Optional[int] = None,
                 batch_bytes: int = 2 << 30, ignore_transforms: bool = False,
                 cache: Optional[Union[str, os.PathLike]] = None, dtype=None):
        if not isinstance(path, (str, os.PathLike)):
            # str() would turn None, 123 or b"x" into a path that happens not to exist.
            raise TypeError(f"path must be a str or os.PathLike, not {type(path).__name__}")
        path = os.fspath(path)
        if not isinstance(path, str):
            raise TypeError("path must be a str or os.PathLike giving a str, not bytes")
        # What loads write: BF16 (the default) or float16 (`dtype=torch.float16`),
        # each value rounded once from the format's exact value. Checked
        # before anything is opened.
        self._out = _out_dtype(dtype)
        # ignore_transforms: open a GGUF file whose metadata declares a transform
        # of the weights weightstream does not apply (prism.hadamard.*, ...),
        # ignoring it: the weights load as stored, untransformed.
        # cache: a directory keeping a URL's fetched bytes (docs/storage.md).
        self._native = _Native(path, source, skip_unsupported, threads, staging_slots, staging_bytes, readers,
                               ignore_transforms, None if cache is None else os.fspath(cache))
        # The object's name only: a presigned URL's query is its credential.
        self.path = _source_name(path)
        _log_notes((f"{p}: {name}: {note}", fallback) for p, name, note, fallback in self._native.sources() if note)
        self.device = device
        self._kind, self._index = _parse_device(device)
        self._names = self._native.names()
        self._pos = {n: i for i, n in enumerate(self._names)}
        self._shapes = self._native.shapes()
        self._dtypes = self._native.dtypes()
        self._batch_bytes = batch_bytes
        # File bytes read by this checkpoint's loads so far.
        self.bytes_read = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    @property
    def out_dtype(self) -> str:
        """What this checkpoint's loads write unless a call says otherwise:
        "bfloat16" (the default) or "float16" (`dtype=torch.float16`)."""
        return "float16" if self._out == "f16" else "bfloat16"

    def keys(self) -> list[str]:
        """The tensors a load produces (data tensors; FP8 scales are consumed
        and activation scales left out), in file order."""
        return list(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __contains__(self, name) -> bool:
        return name in self._pos

    def shape(self, name: str) -> list[int]:
        return list(self._shapes[self._index_of(name)])

    def dtype(self, name: str) -> str:
        """The stored dtype (Q4_0, F8_E4M3, ...); every tensor loads as BF16."""
        return self._dtypes[self._index_of(name)]

    def format(self) -> str:
        return self._native.format()

    def metadata(self, tokenizer: bool = True) -> dict[str, Any]:
        """GGUF key-values (arrays as lists), or the safetensors __metadata__.
        `tokenizer=False` leaves out the GGUF `tokenizer.*` keys: the
        vocabulary, merges and scores (128k-256k tokens in current models),
        which a caller building the model's config does not need."""
        return json.loads(self._native.metadata_json(tokenizer))

    def config(self) -> Optional[dict[str, Any]]:
        """config.json beside safetensors shards, if there is one."""
        c = self._native.config_json()
        return None if c is None else json.loads(c)

    def skipped(self) -> list[tuple[str, str]]:
        return self._native.skipped()

    def sources(self) -> list[dict[str, Any]]:
        """Per file: the source reading it ('read', 'mmap', 'direct', 'gds')
        and, where `auto` chose it or it stands in for a refused one, why."""
        return [{"path": p, "source": name, "note": note, "fallback": fallback} for p, name, note, fallback in self._native.sources()]

    def fetched(self) -> Optional[dict[str, int]]:
        """{"bytes", "requests"}: what the remote files fetched from their
        store so far, opening included (the egress, where `bytes_read` is
        what loads asked for: a column slice fetches its rows' span); None
        when every file is local."""
        f = self._native.fetched()
        return None if f is None else {"bytes": f[0], "requests": f[1]}

    def _index_of(self, name: str) -> int:
        try:
            return self._pos[name]
        except KeyError:
            raise KeyError(f"{name!r} is not a tensor of {self.path}") from None

    def _stream(self, kind: str, index: int) -> int:
        """torch's current stream on the device (thread-local in torch: read it
        on the caller's thread)."""
        return _torch().cuda.current_stream(index).cuda_stream if kind == "cuda" else 0

    def _run(self, indices: list[int], tensors: list, kind: str, index: int, stream: int, callback=None, slices=None,
             unpermute=None, out: Optional[str] = None) -> int:
        """Fill `tensors` (allocated for `indices`, cut to `slices`, rows
        un-permuted per `unpermute`) in place; returns the file bytes read."""
        ptrs, nbytes = (list(x) for x in zip(*(_address(t) for t in tensors))) if tensors else ([], [])
        if kind == "cpu":
            _, read, notes = self._native.load_cpu(indices, ptrs, nbytes, callback, slices, unpermute, out or self._out)
        else:
            _, read, notes = self._native.load_cuda(index, indices, ptrs, nbytes, stream, callback, slices, unpermute,
                                                    out or self._out)
        _log_notes(notes)
        self.bytes_read += read
        return read

    def _load(self, indices: list[int], kind: str, index: int) -> list:
        tensors = [_empty(self._shapes[i], kind, index, self._out) for i in indices]
        self._run(indices, tensors, kind, index, self._stream(kind, index))
        return tensors

    def matrix(self, name: str) -> tuple[int, int]:
        """`(rows, cols)` of the tensor seen as a matrix (innermost dimension
        against all the others): the coordinates of `get_slice`."""
        return tuple(self._native.matrix(self._index_of(name)))

    def _slice_of(self, name: str, rows, cols) -> tuple[int, int, int, int]:
        r, c = self.matrix(name)
        r0, r1 = (0, r) if rows is None else rows
        c0, c1 = (0, c) if cols is None else cols
        return (r0, r1, c0, c1)

    def slice_shape(self, name: str, rows=None, cols=None) -> list[int]:
        """The shape `get_slice(name, rows, cols)` returns."""
        return list(self._native.slice_shape(self._index_of(name), self._slice_of(name, rows, cols)))

    def slice_bytes(self, name: str, rows=None, cols=None) -> int:
        """File bytes a load of that slice reads (the whole tensor's without one)."""
        return self._native.src_bytes(self._index_of(name), self._slice_of(name, rows, cols))

    def get_slice(self, name: str, rows=None, cols=None, device=None, out=None, dtype=None):
        """Rows `[r0, r1)` and columns `[c0, c1)` (each a pair, None = all) of
        the tensor's matrix view, as BF16; only their bytes are read and
        dequantized. Columns may start and end inside the format's blocks
        (32 or 256 elements for GGUF quants): the covering blocks are read
        and the result trimmed. `out`: a contiguous BF16 tensor of
        `slice_shape(...)` on the target device to fill instead of a new one.
        `dtype`: torch.float16 for float16 (default: the checkpoint's)."""
        kind, index = (self._kind, self._index) if device is None else _parse_device(device)
        sl = self._slice_of(name, rows, cols)
        i = self._index_of(name)
        o = self._out if dtype is None else _out_dtype(dtype)
        if out is not None:
            _check_destination(out, kind, index, "get_slice: out", o)
        t = _empty(self._native.slice_shape(i, sl), kind, index, o) if out is None else out
        self._run([i], [t], kind, index, self._stream(kind, index), slices=[sl], out=o)
        return t

    def load_into(self, names, outs, slices=None, device=None, unpermute=None, dtype=None) -> int:
        """Fill `outs[k]` with tensor `names[k]` (or, with `slices[k]` =
        `(rows, cols)`, that slice of it, as `get_slice`), all in one call:
        the library reads ahead and dequantizes across every tensor with its
        threads, straight into the given memory (a model's own parameters).
        Each out is a contiguous BF16 tensor of the slice's shape (size
        checked) on the target device. `unpermute[k]`, where not 0: the
        rows per head of a llama-family GGUF q/k weight, whose rows
        llama.cpp's converter permuted within each head; they are written
        back in Hugging Face order (transformers' reverse_permute_weights;
        the slice's rows must be whole heads). `dtype`: torch.float16 to
        write float16 into float16 outs (default: the checkpoint's dtype,
        BF16 unless opened with another). Returns the file bytes read."""
        kind, index = (self._kind, self._index) if device is None else _parse_device(device)
        names, outs = list(names), list(outs)
        slices = [None] * len(names) if slices is None else list(slices)
        unpermute = None if unpermute is None else [_rows_per_head(n, u) for n, u in zip(names, unpermute)]
        if not len(names) == len(outs) == len(slices) or (unpermute is not None and len(unpermute) != len(names)):
            raise ValueError(f"load_into: {len(names)} names, {len(outs)} outs, {len(slices)} slices"
                             + ("" if unpermute is None else f", {len(unpermute)} un-permutations"))
        o = self._out if dtype is None else _out_dtype(dtype)
        for n, t in zip(names, outs):
            _check_destination(t, kind, index, f"load_into: the out for {n!r}", o)
        idx = [self._index_of(n) for n in names]
        sl = [None if s is None else self._slice_of(n, *s) for n, s in zip(names, slices)]
        return self._run(idx, outs, kind, index, self._stream(kind, index), slices=sl, unpermute=unpermute, out=o)

    def gptq_target(self, name: str) -> Optional[tuple[int, int]]:
        """`(bits, group)` of the GPTQ layout the tensor's blocks map onto
        exactly (Q4_0: `(4, 32)`, uint4b8; Q8_0: `(8, 32)`, uint8b128; the
        table in docs/vllm.md), or None: the keep-quantized mode of the vLLM plugin serves the others
        as BF16."""
        t = self._native.repack_target(self._index_of(name))
        return None if t is None or t[0] != "gptq" else (t[1], t[2])

    def fp4_target(self, name: str) -> Optional[int]:
        """The group of the FP4 layout (compressed-tensors' `nvfp4-` and
        `mxfp4-pack-quantized`) the tensor's blocks map onto exactly (NVFP4:
        16, E4M3FN scales; MXFP4: 32, E8M0 scales), or None."""
        t = self._native.repack_target(self._index_of(name))
        return None if t is None or t[0] != "fp4" else t[2]

    def get_gptq(self, name: str, rows=None, cols=None, device=None):
        """Rows (output features) and columns (input features, whole groups)
        of a GGUF weight whose blocks map onto GPTQ exactly (`gptq_target`)
        in GPTQ's layout, by bit movement only: `(qweight, scales)`, qweight
        int32 `[cols / (32 / bits), rows]` (input features packed low bits
        first), scales fp16 `[cols / group, rows]` (each block's d). The
        value of element (r, k) is `scales[k // group, r] * (code -
        2^(bits-1))`, exactly the block's. On this checkpoint's device
        unless `device`: on a CUDA device the rows' bytes are copied there
        and moved by a kernel (bitwise the CPU's result). torch tensors, or
        numpy arrays on the CPU where torch is not installed."""
        from ._repack import get

        return get(self, name, "gptq", rows, cols, device)

    def get_fp4(self, name: str, rows=None, cols=None, device=None):
        """As `get_gptq`, for a GGUF MXFP4 or NVFP4 weight (`fp4_target`),
        in compressed-tensors' FP4 layout: `(weight_packed, weight_scale)`,
        weight_packed uint8 `[rows, cols / 2]` (input features 2i and 2i+1
        in the low and high nibble of byte i: E2M1 codes), weight_scale
        uint8 `[rows, cols / group]` (NVFP4: E4M3FN bits, with a global
        scale of 1; MXFP4: E8M0 exponents). Element (r, k) is
        `e2m1(code) * scale`, exactly the block's; a scale byte with no
        exact image (0xFF) is refused, naming its file offset."""
        from ._repack import get

        return get(self, name, "fp4", rows, cols, device)

    def get_tensor(self, name: str, device=None):
        """One tensor as BF16 (on this checkpoint's device unless `device`)."""
        kind, index = (self._kind, self._index) if device is None else _parse_device(device)
        return self._load([self._index_of(name)], kind, index)[0]

    def __getitem__(self, name: str):
        """`ckpt[name]` is `ckpt.get_tensor(name)` (so `dict(ckpt)` works too;
        `dict(iter(ckpt))` streams instead)."""
        return self.get_tensor(name)

    def load(self, names=None) -> dict[str, Any]:
        """Every tensor (or `names`) as a dict name -> BF16 tensor."""
        idx = list(range(len(self._names))) if names is None else [self._index_of(n) for n in names]
        return dict(zip((self._names[i] for i in idx), self._load(idx, self._kind, self._index)))

    def _batches(self) -> list[list[int]]:
        """Consecutive tensors, at most `batch_bytes` of BF16 per batch (a
        larger tensor is a batch of its own)."""
        batches, size = [[]], 0
        for i, shape in enumerate(self._shapes):
            n = 2
            for d in shape:
                n *= d
            if batches[-1] and size + n > self._batch_bytes:
                batches.append([])
                size = 0
            batches[-1].append(i)
            size += n
        return [b for b in batches if b]

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        """(name, tensor) pairs in file order, each as soon as it is complete.

        The load runs on a background thread (the GIL is released while it
        works), batch by batch: at most two batches of `batch_bytes` exist at
        once beyond what the consumer keeps, so a model loads into its own
        parameters without a second full copy."""
        kind, index = self._kind, self._index
        stream = self._stream(kind, index)
        finished: queue.Queue = queue.Queue()
        room = threading.Semaphore(2)  # batches allocated and not yet consumed
        stop = threading.Event()  # the consumer went away
        failure: list[BaseException] = []

        def work():
            try:
                for batch in self._batches():
                    room.acquire()
                    if stop.is_set():
                        return
                    tensors = [_empty(self._shapes[i], kind, index, self._out) for i in batch]

                    def done(k, first=batch[0], ts=tensors):
                        finished.put((k, ts[k - first]))

                    self._run(batch, tensors, kind, index, stream, done)
                    finished.put(_END_OF_BATCH)
            except BaseException as e:  # raised again on the consumer's side
                failure.append(e)
            finally:
                finished.put(None)

        threading.Thread(target=work, name="weightstream-load", daemon=True).start()
        try:
            while True:
                item = finished.get()
                if item is None:
                    break
                if item is _END_OF_BATCH:
                    room.release()
                    continue
                k, tensor = item
                yield self._names[k], tensor
        finally:
            stop.set()
            room.release()
        if failure:
            raise failure[0]

    def __repr__(self) -> str:
        return f"weightstream.Checkpoint({self.path!r}, {len(self)} tensors, {self.format()}, device={self.device!r})"


def open(path, device="cpu", **options) -> Checkpoint:
    """Open a checkpoint (headers only). Options:

    - source: 'auto' (measure the page cache: read through it when the file
      is warm, O_DIRECT when cold; cuFile on a GPU with nvidia-fs), 'read',
      'mmap', 'direct' (O_DIRECT) or 'gds' (cuFile into GPU memory);
      `Checkpoint.sources()` says what each file got and why;
    - skip_unsupported: leave out tensors that cannot become BF16;
    - threads: CPU dequantization threads;
    - readers, staging_slots, staging_bytes: threads reading ahead, buffers
      read ahead, bytes per read (CPU and GPU);
    - batch_bytes: BF16 per batch when iterating;
    - dtype: torch.float16 (or "float16") for float16 tensors, each value
      rounded once from the format's exact value (F16 tensors as stored);
      default BF16;
    - cache: a directory where a URL's fetched bytes are kept, keyed by URL
      and object version, and read from on the next load of that version
      (default: $WEIGHTSTREAM_CACHE_DIR, if set; docs/storage.md)."""
    return Checkpoint(path, device, **options)


def load_file(path, device="cpu", **options) -> dict[str, Any]:
    """Every tensor of a checkpoint as BF16 (or `dtype=torch.float16`), like
    safetensors.torch.load_file."""
    return Checkpoint(path, device, **options).load()


def fetched_total() -> dict[str, int]:
    """{"bytes", "requests"}: what every remote checkpoint this process
    opened has fetched from its store so far (Checkpoint.fetched, summed)."""
    b, n = _fetched_total()
    return {"bytes": b, "requests": n}


def release_staging() -> int:
    """Free the pinned staging rings this process keeps for later GPU loads
    (a closed Checkpoint's ring is kept so the next one need not pin again;
    docs/storage.md); returns how many were freed. For a process that
    loads no more, e.g. a server after its one load."""
    return _release_staging()
