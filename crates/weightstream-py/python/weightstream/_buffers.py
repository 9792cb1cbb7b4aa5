"""Where tensors go: devices as the API names them, and the buffers the
native loads and repacks write into (torch tensors, or numpy arrays where
torch is not installed), by address."""
from __future__ import annotations

import functools

from ._native import WeightstreamError, cuda_status


@functools.lru_cache(maxsize=None)
def _torch():
    """torch, or None where it is not installed: looked for once. (Without
    the cache a load without torch tried the import again for every
    tensor it allocated, and a Ctrl-C landing inside the import machinery
    was swallowed there, "Exception ignored in ... _get_module_lock": the
    load ran on to its end. An interrupted import is not cached.)"""
    try:
        import torch
    except ImportError:
        return None
    return torch


def _parse_device(device) -> tuple[str, int]:
    """'auto' | 'cpu' | 'cuda' | 'cuda:N' | torch.device -> (kind, index).
    'auto' means what it means to the CLI: GPU 0 if there is a usable one
    (and torch, to hold its tensors), else the CPU."""
    s = str(device)
    if s == "auto":
        torch = _torch()
        usable = torch is not None and torch.cuda.is_available() and cuda_status()[0]
        return ("cuda", 0) if usable else ("cpu", 0)
    if s == "cpu":
        return "cpu", 0
    if s == "cuda":
        torch = _torch()
        return "cuda", torch.cuda.current_device() if torch is not None and torch.cuda.is_available() else 0
    if s.startswith("cuda:") and s[5:].isdigit():
        return "cuda", int(s[5:])
    raise ValueError(f"device {device!r}: use 'auto', 'cpu', 'cuda' or 'cuda:N'")


def _error(kind: str, message: str) -> WeightstreamError:
    """A WeightstreamError raised here, with the attributes the native ones
    carry (every error has a `kind`)."""
    e = WeightstreamError(message)
    e.kind, e.file, e.tensor, e.offset = kind, None, None, None
    return e


def _out_dtype(dtype) -> str:
    """A `dtype=` argument as the native calls name it: "bf16" (None, the
    default: torch.bfloat16, "bfloat16", "bf16") or "f16" (torch.float16,
    numpy.float16, "float16", "f16", "half"); anything else refused."""
    if dtype is None:
        return "bf16"
    name = getattr(dtype, "name", None) if not isinstance(dtype, str) else dtype  # numpy dtypes
    if name is None:
        name = str(dtype)  # torch.float16 -> "torch.float16"
    if isinstance(dtype, type):  # numpy.float16, ml_dtypes.bfloat16 as types
        name = dtype.__name__
    name = str(name).lower().removeprefix("torch.")
    out = {"bfloat16": "bf16", "bf16": "bf16", "float16": "f16", "f16": "f16", "half": "f16", "fp16": "f16"}.get(name)
    if out is None:
        raise ValueError(f"dtype {dtype!r}: weightstream writes torch.bfloat16 (the default) or torch.float16")
    return out


def _empty(shape, kind: str, index: int, out: str = "bf16"):
    """An uninitialised BF16 (or, `out` "f16", float16) tensor (torch) or
    array (numpy) of `shape`."""
    torch = _torch()
    if torch is not None:
        dev = torch.device("cpu") if kind == "cpu" else torch.device("cuda", index)
        return torch.empty(tuple(shape), dtype=torch.float16 if out == "f16" else torch.bfloat16, device=dev)
    if kind != "cpu":
        raise _error("invalid_argument", "device='cuda' needs PyTorch: install torch, or load with device='cpu'")
    import numpy as np

    if out == "f16":
        return np.empty(tuple(shape), dtype=np.float16)
    try:
        import ml_dtypes

        dtype = ml_dtypes.bfloat16
    except ImportError:
        dtype = np.uint16  # the BF16 bit patterns
    return np.empty(tuple(shape), dtype=dtype)


def _check_destination(t, kind: str, index: int, what: str, out: str = "bf16") -> None:
    """Refuse (ValueError) a destination the native load cannot write as
    documented: it writes BF16 (or, `out` "f16", float16) forward from the
    buffer's first address, so
    anything else (a float16 array, a reversed or strided view, a read-only
    array over `bytes`, a tensor on another device) would come back
    silently wrong, or crash the process. `what` names it in the message
    ("get_slice: out", "load_into: the out for 'x'")."""
    torch = _torch()
    if torch is not None and isinstance(t, torch.Tensor):
        want = torch.float16 if out == "f16" else torch.bfloat16
        if t.dtype != want:
            raise ValueError(f"{what} is {t.dtype}, not {want}")
        if not t.is_contiguous():
            raise ValueError(f"{what} is not contiguous (strides {tuple(t.stride())} for shape {tuple(t.shape)})")
        want = "cpu" if kind == "cpu" else f"cuda:{index}"
        dev = t.device.type if t.device.type == "cpu" else f"cuda:{t.device.index}"
        if dev != want:
            raise ValueError(f"{what} is on {dev}, and this load writes on {want}")
        return
    try:
        import numpy as np
    except ImportError:
        np = None
    if np is None or not isinstance(t, np.ndarray):
        raise ValueError(f"{what} is a {type(t).__module__}.{type(t).__name__}, not a torch tensor or numpy array")
    # ml_dtypes.bfloat16 (float16), or the raw bit patterns as uint16 (what
    # a BF16 load without ml_dtypes returns).
    names = ("float16", "uint16") if out == "f16" else ("bfloat16", "uint16")
    if t.dtype.name not in names:
        raise ValueError(f"{what} is a numpy {t.dtype} array, not {names[0]} or uint16 (its bits)")
    if not t.flags.c_contiguous:
        raise ValueError(f"{what} is not C-contiguous (strides {t.strides} for shape {t.shape})")
    if not t.flags.writeable:
        raise ValueError(f"{what} is read-only")
    if kind != "cpu":
        raise ValueError(f"{what} is a numpy array (host memory), and this load writes on cuda:{index}")


def _address(t) -> tuple[int, int]:
    """(data address, bytes) of a contiguous tensor or array."""
    if hasattr(t, "data_ptr"):
        return t.data_ptr(), t.numel() * t.element_size()
    return t.ctypes.data, t.nbytes
