#!/usr/bin/env python3
"""Kernel sweep with nvbench (PyPI `cuda-bench`): every weightstream kernel,
loaded from the fatbins the Rust build embeds, over outputs of 1 MiB to
1 GiB, beside a device-to-device copy of the same output size measured in
the same run. Bytes counted are bytes read plus bytes written.

    python3 bench/gpu/sweep.py --fatbins .gpu-carry/fatbin --ws .gpu-carry/bin/weightstream --csv sweep.csv

The block formats (Q4_0 ... Q6_K) come from `weightstream formats --json`:
the same one definition the kernels are built from.

--out picks the output: bf16 (the default: the kernels `ws_<name>`), f16
(their float16 instantiations `ws_<name>_f16`, reported as `<name>:f16`;
the BF16 -> float16 conversion `bf16:f16` joins them, and the F16 -> BF16
conversion and the repacks, which have no float16 twin, leave) or both.

Each measurement is bounded: --timeout (nvbench's own option: wall
seconds per measurement, nvbench's default 15) and --max-noise (nvbench's
stdrel target, percent relative standard deviation, default 0.5) are passed
to nvbench with defaults of 2 s and 1 %, so the whole sweep takes at most
about (kernels x sizes) x (timeout + setup); --kernels and --sizes pick a
part of it. Extra arguments go to nvbench (e.g. --devices 0, --min-samples
20, --csv sweep.csv).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import cuda.bench as bench
import launch_args
import cupy as cp
import numpy as np

SIZES_MIB = [1, 4, 16, 64, 256, 1024]
OTHER_KERNELS = ["fp8_e4m3_block", "fp8_e4m3_tensor", "fp8_e5m2_block", "nvfp4_st", "mxfp4_st", "int4_g128_zp", "int8_channel_f16",
                 "f16", "f32", "gptq_q4_0", "gptq_q8_0", "fp4_mxfp4", "fp4_nvfp4"]
BLOCK = 256

# Kernels with no float16 instantiation: F16 -> BF16 (F16 -> F16 is a
# copy) and the repacks, which write their own formats.
NO_F16 = ("f16", "gptq_", "fp4_")

FUNCTIONS = {}
ARGS = {}  # kernel function -> its argument names, in order (`formats --json`)
BLOCK_FORMATS = {}  # kernel name (ws_<name>) -> `weightstream formats --json` entry
SM_COUNT = 1


def read_table(ws: Path) -> dict[str, list[str]]:
    """The block formats, every kernel's arguments (Launch::args) and which
    fatbin (kernel source) defines each kernel, from `weightstream formats
    --json`: {module: [functions]}."""
    table = json.loads(subprocess.run([str(ws), "formats", "--json"], check=True, capture_output=True, text=True).stdout)
    for f in table["block_formats"]:
        BLOCK_FORMATS[f["cuda_function"].removeprefix("ws_")] = f
    modules: dict[str, list[str]] = {}
    for k in table["kernels"]:
        modules.setdefault(k["module"], []).append(k["function"])
        ARGS[k["function"]] = k["args"]
    return modules


def load(fatbins: Path, ws: Path):
    global SM_COUNT
    for module, names in read_table(ws).items():
        m = cp.RawModule(path=str(fatbins / f"{module}.fatbin"))
        for n in names:
            FUNCTIONS[n] = m.get_function(n)
    SM_COUNT = cp.cuda.Device().attributes["MultiProcessorCount"]


def kernels(only: list[str] | None = None, out: str = "bf16") -> list[str]:
    """Every kernel (the D2D copy first, always: the fractions need it), or
    those named, for output `out` (bf16, f16 or both): a float16 kernel is
    named `<kernel>:f16`."""
    every = [*BLOCK_FORMATS, *OTHER_KERNELS]
    if only:
        unknown = [k for k in only if k not in every and k not in ("d2d_copy", "bf16")]
        if unknown:
            sys.exit(f"sweep: unknown kernels {unknown}: choose from {','.join(every)},bf16")
        every = [k for k in every if k in only]
    f16 = [f"{k}:f16" for k in every if not k.startswith(NO_F16)]
    if not only or "bf16" in only:
        f16.append("bf16:f16")
    picked = {"bf16": every, "f16": f16, "both": every + f16}[out]
    return ["d2d_copy", *picked]


def geometry(groups: int) -> tuple[int, int]:
    """The Rust executor's launch geometry (weightstream_kernels::geometry)."""
    blocks = max(1, min(-(-groups // BLOCK), SM_COUNT * 32))
    return blocks, BLOCK


def quant_blocks(n: int, fmt: dict) -> cp.ndarray:
    """Random blocks whose f16 fields (d, dmin, m) are 0.1: ordinary values."""
    b = cp.random.randint(0, 256, (n // fmt["elements"], fmt["bytes"]), dtype=cp.uint8)
    for f in fmt["fields"]:
        if f["name"] in ("d", "dmin", "m"):
            b[:, f["offset"]:f["offset"] + 2] = cp.asarray(np.array([0x2E66], dtype=np.uint16).view(np.uint8))
    return b.ravel()


def inputs(kernel: str, n: int):
    """(function, source array, its other arguments by name, bytes read):
    `launch_args.pack` puts them in the kernel's order."""
    if kernel in BLOCK_FORMATS:
        fmt = BLOCK_FORMATS[kernel]
        src = quant_blocks(n, fmt)
        return fmt["cuda_function"], src, {}, src.nbytes
    if kernel == "f16":
        src = (cp.random.standard_normal(n, dtype=cp.float32)).astype(cp.float16).view(cp.uint8)
        return "ws_f16", src, {}, src.nbytes
    if kernel == "bf16":
        # BF16 -> float16 only (BF16 -> BF16 is a copy).
        src = (cp.random.standard_normal(n, dtype=cp.float32)).view(cp.uint32) >> 16
        src = src.astype(cp.uint16).view(cp.uint8)
        return "ws_bf16_f16", src, {}, src.nbytes
    if kernel == "f32":
        src = cp.random.standard_normal(n, dtype=cp.float32).view(cp.uint8)
        return "ws_f32", src, {}, src.nbytes
    if kernel.startswith("gptq_"):
        return gptq_inputs(kernel.removeprefix("gptq_"), n)
    if kernel.startswith("fp4_"):
        return fp4_inputs(kernel.removeprefix("fp4_"), n)
    return scaled_inputs(kernel, n)


def resolve(kernel: str, n: int):
    """`inputs` of a swept kernel name: `<kernel>:f16` is the same kernel
    body writing float16, `ws_<name>_f16` (launch.rs `Launch::function`)."""
    base, _, out = kernel.partition(":")
    fn, src, values, read = inputs(base, n)
    if out == "f16" and not fn.endswith("_f16"):
        fn += "_f16"
    return fn, src, values, read


def gptq_inputs(fmt_name: str, n: int):
    """`inputs` for the keep-quantized mode's repack (cuda/gptq.cu): n
    elements of Q4_0 (to uint4b8) or Q8_0 (to uint8b128) blocks, rows of
    4096 input features, into GPTQ's qweight (the `dst` it returns: int32
    words, not BF16) and fp16 scales, both written."""
    fmt = BLOCK_FORMATS[fmt_name]
    bits, cols = (4 if fmt_name == "q4_0" else 8), 4096
    src = quant_blocks(n, fmt)
    qweight = cp.empty(n * bits // 32, dtype=cp.uint32)
    scales = cp.empty(n // 32, dtype=cp.uint16)
    values = {"dst": qweight, "scales": scales, "rows": n // cols, "width": cols, "col_start": 0, "format": fmt["ggml_id"],
              "block_elems": fmt["elements"], "block_bytes": fmt["bytes"], "bits": bits, "group": 32}
    return "ws_gptq", src, values, src.nbytes


def fp4_inputs(fmt_name: str, n: int):
    """`inputs` for the keep-quantized mode's FP4 repack (cuda/fp4.cu): n
    elements of MXFP4 or NVFP4 blocks, rows of 4096 input features, into
    compressed-tensors' packed codes (the `dst` it returns: bytes as u32
    words) and scale bytes, both written."""
    fmt = BLOCK_FORMATS[fmt_name]
    group, cols = (32 if fmt_name == "mxfp4" else 16), 4096
    src = cp.random.randint(0, 256, n // fmt["elements"] * fmt["bytes"], dtype=cp.uint8)
    values = {"dst": cp.empty(n // 8, dtype=cp.uint32), "scales": cp.empty(n // group, dtype=cp.uint8), "rows": n // cols,
              "width": cols, "col_start": 0, "format": fmt["ggml_id"], "block_elems": fmt["elements"],
              "block_bytes": fmt["bytes"], "group": group}
    return "ws_fp4", src, values, src.nbytes


def scaled_inputs(kernel: str, n: int):
    """`inputs` for the scaled kernels: FP8 with per-tensor or 128x128
    block scales, and the safetensors packs (format/packed.rs): E2M1 pairs
    in groups of 16 or 32, INT4 in groups of 128 with zero points, INT8 per
    channel with F16 rounding; f32 scales (and zero points) as the executor
    uploads them."""
    cols = 8192
    rows = n // cols
    if kernel in ("nvfp4_st", "mxfp4_st", "int4_g128_zp", "int8_channel_f16"):
        group = {"nvfp4_st": 16, "mxfp4_st": 32, "int4_g128_zp": 128, "int8_channel_f16": cols}[kernel]
        bits = 8 if kernel.startswith("int8") else 4
        src = cp.random.randint(0, 256, n * bits // 8, dtype=cp.uint8)
        scales = cp.random.uniform(0.5, 2, rows * (cols // group)).astype(cp.float32)
        zeros = cp.random.randint(-8, 8, scales.size).astype(cp.float32)
        grid = {"scales": scales, "first": 0, "cols": cols, "block_rows": 1, "block_cols": group, "grid_cols": cols // group}
        if kernel.endswith("_st"):
            return "ws_e2m1", src, grid, src.nbytes + scales.nbytes
        if bits == 4:
            return "ws_int4", src, {**grid, "zeros": zeros, "round_f16": 0}, src.nbytes + 2 * scales.nbytes
        # No zero points (a null pointer), F16 rounding on.
        return "ws_int8", src, {**grid, "zeros": 0, "round_f16": 1}, src.nbytes + scales.nbytes
    src = cp.random.randint(0, 256, n, dtype=cp.uint8)
    src[(src & 0x7F) == 0x7F] ^= 1
    if kernel.endswith("_tensor"):
        scales = cp.ones(1, dtype=cp.float32)
        geom = (rows, cols, 1)
    else:
        scales = cp.random.uniform(0.5, 2, (-(-rows // 128)) * (cols // 128)).astype(cp.float32)
        geom = (128, 128, cols // 128)
    fn = "ws_fp8_e4m3" if "e4m3" in kernel else "ws_fp8_e5m2"
    grid = {"scales": scales, "first": 0, "cols": cols, "block_rows": geom[0], "block_cols": geom[1], "grid_cols": geom[2]}
    return fn, src, grid, src.nbytes + scales.nbytes


def register(args):
    @bench.register
    @bench.axis.string("kernel", kernels(args.kernels, args.out))
    @bench.axis.int64("out_MiB", args.sizes)
    def dequant(state):
        kernel = state.get_string("kernel")
        n = state.get_int64("out_MiB") * (1 << 20) // 2  # 16-bit outputs
        dst = cp.empty(n, dtype=cp.uint16)
        state.add_element_count(n)
        if kernel == "d2d_copy":
            src = cp.empty(n, dtype=cp.uint16)
            src.fill(0x3F80)
            state.add_global_memory_reads(src.nbytes)
            state.add_global_memory_writes(dst.nbytes)

            def launch(l):
                cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, dst.nbytes, cp.cuda.runtime.memcpyDeviceToDevice, l.get_stream().addressof())

            state.exec(launch)
            return
        fn, src, values, read = resolve(kernel, n)
        state.add_global_memory_reads(read)
        # The repacks write their codes (their `dst`) and scales instead of BF16.
        written = values["dst"].nbytes + values["scales"].nbytes if fn in ("ws_gptq", "ws_fp4") else dst.nbytes
        state.add_global_memory_writes(written)
        f = FUNCTIONS[fn]
        grid, block = geometry(-(-n // 8))
        packed = launch_args.pack(ARGS[fn], {"src": src, "dst": dst, "n": n, **values})  # values' dst wins (the repacks)
        params = tuple(np.uint64(v) if isinstance(v, int) else v for v in packed)

        def launch(l):
            with cp.cuda.ExternalStream(l.get_stream().addressof()):
                f((grid,), (block,), params)

        state.exec(launch)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fatbins", type=Path, required=True)
    ap.add_argument("--ws", type=Path, required=True, help="the weightstream CLI (for `formats --json`)")
    ap.add_argument("--kernels", type=lambda s: [k for k in s.split(",") if k], help="comma-separated (default every kernel)")
    ap.add_argument("--out", choices=("bf16", "f16", "both"), default="bf16",
                    help="the kernels' output: bf16 (default), f16 (the _f16 instantiations) or both")
    ap.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=SIZES_MIB,
                    help=f"output MiB, comma-separated (default {','.join(map(str, SIZES_MIB))})")
    ap.add_argument("--timeout", type=float, default=2.0, help="nvbench --timeout: wall seconds per measurement (default 2)")
    ap.add_argument("--max-noise", type=float, default=1.0, help="nvbench --max-noise: percent relative stdev to stop at (default 1)")
    args, rest = ap.parse_known_args()
    load(args.fatbins, args.ws)
    register(args)
    # Before any --benchmark, so they apply to every benchmark.
    bench.run_all_benchmarks([sys.argv[0], "--timeout", str(args.timeout), "--max-noise", str(args.max_noise), *rest])


if __name__ == "__main__":
    main()
