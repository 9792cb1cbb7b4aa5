"""The GPU sweep's kernel arguments, packed in the order the Rust executor
packs them (`Launch::args` in kernels/src/launch.rs, whose names
`weightstream formats --json` lists per kernel), so the sweep cannot pass
a kernel fewer or other arguments than it takes: CuPy cannot check the
count for a fatbin kernel, and a short list makes the driver read past it.

No CuPy here: tests/python/test_sweep_args.py checks the packing on the CPU.
"""

from __future__ import annotations

DIVIDED = ("cols", "block_rows", "block_cols")


def divisor(d: int) -> tuple[int, int]:
    """(magic, shifts) of divisor d for scale_grid.cuh's `quotient`, as
    launch.rs `divisor` computes them: l = ceil(log2 d), magic =
    floor(2^64 (2^l - d) / d) + 1, shifts = min(l, 1) | max(l - 1, 0) << 32."""
    if d == 0:
        return 0, 0
    l = (d - 1).bit_length()
    magic = ((1 << 64) * ((1 << l) - d)) // d + 1
    return magic & ((1 << 64) - 1), min(l, 1) | (max(l - 1, 0) << 32)


def quotient(n: int, d: int) -> int:
    """n // d the way the kernels compute it (one multiply-high, a subtract,
    an add and two shifts), for checking `divisor`."""
    magic, shifts = divisor(d)
    sh1, sh2 = shifts & 0xFFFFFFFF, shifts >> 32
    t = (magic * n) >> 64
    return (t + ((n - t) >> sh1)) >> sh2


def pack(names: list[str], values: dict) -> tuple:
    """The argument tuple for a kernel whose `formats --json` entry lists
    `names`: each from `values`, the divisors' magic numbers and shifts
    derived from `cols`, `block_rows` and `block_cols`. A name with no
    value is an error, not a silent zero."""
    derived = {}
    for base in DIVIDED:
        if base in values:
            derived[f"{base}_magic"], derived[f"{base}_shifts"] = divisor(int(values[base]))
    out = []
    for name in names:
        if name in values:
            out.append(values[name])
        elif name in derived:
            out.append(derived[name])
        else:
            raise KeyError(f"no value for kernel argument '{name}' (the kernel takes {', '.join(names)})")
    unused = set(values) - set(names)
    if unused:
        raise KeyError(f"values {sorted(unused)} are not arguments of this kernel ({', '.join(names)})")
    return tuple(out)
