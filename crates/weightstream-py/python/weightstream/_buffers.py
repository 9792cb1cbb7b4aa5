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


def _empty(shape, kind: str, index: int):
    """An uninitialised BF16 tensor (torch) or array (numpy) of `shape`."""
    torch = _torch()
    if torch is not None:
        dev = torch.device("cpu") if kind == "cpu" else torch.device("cuda", index)
        return torch.empty(tuple(shape), dtype=torch.bfloat16, device=dev)
    if kind != "cpu":
        raise _error("invalid_argument", "device='cuda' needs PyTorch: install torch, or load with device='cpu'")
    import numpy as np

    try:
        import ml_dtypes

        dtype = ml_dtypes.bfloat16
    except ImportError:
        dtype = np.uint16  # the BF16 bit patterns
    return np.empty(tuple(shape), dtype=dtype)


def _address(t) -> tuple[int, int]:
    """(data address, bytes) of a contiguous tensor or array."""
    if hasattr(t, "data_ptr"):
        return t.data_ptr(), t.numel() * t.element_size()
    return t.ctypes.data, t.nbytes
