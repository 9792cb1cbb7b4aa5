"""The GPU round's kernel sweep (bench/gpu/sweep.py) passes every kernel
exactly the arguments the Rust executor passes it (`Launch::args`, listed
by `weightstream formats --json`), checked here on the CPU: a kernel given
too few arguments reads past the list on the device (issue 33). CuPy's
array constructors are stood in for by numpy's: only the packing is
under test, not the device."""

import importlib
import random
import subprocess
import sys
import types

import numpy as np
import pytest

from harness import ROOT, ws_bin


@pytest.fixture(scope="module")
def sweep():
    cupy = types.SimpleNamespace(
        uint8=np.uint8,
        float16=np.float16,
        float32=np.float32,
        uint16=np.uint16,
        uint32=np.uint32,
        ones=np.ones,
        empty=np.empty,
        asarray=np.asarray,
        ndarray=np.ndarray,
        random=types.SimpleNamespace(
            randint=lambda lo, hi, size, dtype=np.int64: np.random.randint(lo, hi, size, dtype=dtype),
            uniform=np.random.uniform,
            standard_normal=lambda n, dtype: np.random.standard_normal(n).astype(dtype),
        ),
    )
    bench = types.ModuleType("cuda.bench")
    stubs = {"cupy": cupy, "cuda": types.ModuleType("cuda"), "cuda.bench": bench}
    saved = {k: sys.modules.get(k) for k in stubs}
    sys.modules.update(stubs)
    sys.path.insert(0, str(ROOT / "bench/gpu"))
    try:
        yield importlib.import_module("sweep")
    finally:
        sys.path.remove(str(ROOT / "bench/gpu"))
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
        sys.modules.pop("sweep", None)


def test_every_swept_kernel_gets_exactly_its_arguments(sweep):
    import launch_args

    sweep.read_table(ws_bin())
    kernels = [k for k in sweep.kernels(None, "both") if k != "d2d_copy"]
    assert len(kernels) >= 60
    assert "q4_0:f16" in kernels and "bf16:f16" in kernels and "gptq_q4_0:f16" not in kernels
    assert not any(k.endswith(":f16") for k in sweep.kernels(None))
    n = 8192 * 256
    for kernel in kernels:
        fn, src, values, _ = sweep.resolve(kernel, n)
        # ws_f16's suffix names its source (F16 -> BF16).
        assert (fn.endswith("_f16") and fn != "ws_f16") == kernel.endswith(":f16"), (kernel, fn)
        names = sweep.ARGS[fn]
        packed = launch_args.pack(names, {"src": src, "dst": None, "n": n, **values})
        assert len(packed) == len(names), kernel
        if fn.startswith(("ws_fp8", "ws_e2m1")):
            assert len(names) == 15, (fn, names)
        if fn.startswith("ws_int"):
            assert len(names) == 17, (fn, names)
        if fn == "ws_gptq":
            assert len(names) == 12 and packed[1] is values["dst"], (fn, names)
    # A value missing or left over is an error, not a short list.
    with pytest.raises(KeyError, match="cols_magic|cols"):
        launch_args.pack(sweep.ARGS["ws_fp8_e4m3"], {"src": 0, "dst": 0, "n": 0, "scales": 0, "first": 0})
    with pytest.raises(KeyError, match="not arguments"):
        launch_args.pack(sweep.ARGS["ws_q4_0"], {"src": 0, "dst": 0, "n": 0, "scales": 0})


def test_the_python_divisor_divides_exactly():
    """launch_args.divisor mirrors launch.rs `divisor`; the kernels' quotient
    formula with it gives n // d (edges, then random pairs)."""
    sys.path.insert(0, str(ROOT / "bench/gpu"))
    try:
        import launch_args
    finally:
        sys.path.remove(str(ROOT / "bench/gpu"))
    edges = [0, 1, 2, 3, 5, 7, 17, 127, 128, 129, 255, 641, 6700417, 2**64 - 2, 2**64 - 1]
    for k in range(1, 64):
        edges += [2**k - 1, 2**k, 2**k + 1]
    for d in (d for d in edges if d > 0):
        for n in edges:
            assert launch_args.quotient(n, d) == n // d, (n, d)
    rng = random.Random(7)
    for _ in range(20000):
        d = rng.getrandbits(rng.randint(1, 64)) or 1
        n = rng.getrandbits(rng.randint(1, 64))
        assert launch_args.quotient(n, d) == n // d, (n, d)


def test_formats_json_lists_every_kernel_with_its_arguments():
    import json

    table = json.loads(subprocess.run([str(ws_bin()), "formats", "--json"], check=True, capture_output=True, text=True).stdout)
    kernels = {k["function"]: k for k in table["kernels"]}
    for f in table["block_formats"]:
        assert kernels[f["cuda_function"]]["args"] == ["src", "dst", "n"]
        assert kernels[f["cuda_function"]]["module"] == f["cuda_module"]
    assert kernels["ws_int4"]["args"][-2:] == ["zeros", "round_f16"]
    # Each output's kernel takes the same arguments (one body, two instantiations).
    for name, k in kernels.items():
        if name.endswith("_f16") and name.removesuffix("_f16") in kernels:
            assert k["args"] == kernels[name.removesuffix("_f16")]["args"], name
