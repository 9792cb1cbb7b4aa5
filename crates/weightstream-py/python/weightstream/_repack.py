"""The keep-quantized repacks (`Checkpoint.get_gptq`, `Checkpoint.get_fp4`):
output buffers of the layout's shapes, allocated where the move runs, and
filled by the native kernels (weightstream-repack on the CPU, kernels/cuda
gptq.cu and fp4.cu on a GPU)."""
from __future__ import annotations

#: layout -> (kind names for refusals, (qweight dtype, scales dtype) as
#: torch and numpy name them).
_LAYOUTS = {
    "gptq": ("Q4_0, Q8_0, Q5_0, IQ4_NL, Q1_0, Q2_0, TQ1_0 and TQ2_0 map onto GPTQ", ("int32", "float16")),
    "fp4": ("MXFP4 and NVFP4 map onto the FP4 layout", ("uint8", "uint8")),
}


def _shapes(layout: str, bits: int, group: int, r0: int, r1: int, c0: int, c1: int):
    rows, cols = r1 - r0, c1 - c0
    if layout == "gptq":
        return (cols * bits // 32, rows), (cols // group, rows)
    return (rows, cols // 2), (rows, cols // group)


def get(ck, name: str, layout: str, rows, cols, device):
    from ._buffers import _address, _error, _parse_device, _torch

    kind, index = (ck._kind, ck._index) if device is None else _parse_device(device)
    target = ck._native.repack_target(ck._index_of(name))
    which, dtypes = _LAYOUTS[layout]
    if target is None or target[0] != layout:
        raise _error("unsupported", f"{name!r} is {ck.dtype(name)}: only {which} exactly")
    _, bits, group = target
    r0, r1, c0, c1 = ck._slice_of(name, rows, cols)
    qshape, sshape = _shapes(layout, bits, group, r0, r1, c0, c1)
    torch = _torch()
    native = ck._native.repack
    if kind == "cuda":
        if torch is None:
            raise _error("invalid_argument", "device='cuda' needs PyTorch: install torch, or repack with device='cpu'")
        dev = torch.device("cuda", index)
        q, s = (torch.empty(shape, dtype=getattr(torch, dt), device=dev) for shape, dt in zip((qshape, sshape), dtypes))
        ck.bytes_read += native(ck._index_of(name), layout, (r0, r1, c0, c1), *_address(q), *_address(s), index,
                                ck._stream(kind, index))
        return q, s
    import numpy as np

    q, s = (np.empty(shape, dtype=dt) for shape, dt in zip((qshape, sshape), dtypes))
    ck.bytes_read += native(ck._index_of(name), layout, (r0, r1, c0, c1), *_address(q), *_address(s))
    return (q, s) if torch is None else (torch.from_numpy(q), torch.from_numpy(s))
