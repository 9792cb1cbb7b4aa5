#!/usr/bin/env python3
"""Build bench/gpu/devcheck.cu (the GPU round's device check) with the
pinned nvcc, for sm_90 and as PTX for later GPUs:

    python3 bench/gpu/devcheck_build.py OUT      # writes the executable OUT

It includes kernels/cuda/common.cuh, which includes the generated
formats.cuh: written here from the block table, as sass_build.py does.
`scripts/gpu_round.sh prepare` carries the result; `check` builds it (the
test command), so the device check is known to compile before a GPU is lent.
The flags are the kernels' own (sass_build.FLAGS: no FMA contraction), so
the roundings it compares are compiled as the kernels compile them.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import sass_build


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    out = Path(sys.argv[1]).resolve()
    nvcc, _ = sass_build.tools()
    root = sass_build.ROOT
    lib = nvcc.parent.parent / "lib"  # nvidia/cu13/lib: the pinned runtime wheel's libcudart_static.a
    with tempfile.TemporaryDirectory(prefix="devcheck-") as tmp:
        (Path(tmp) / "formats.cuh").write_text(sass_build.formats_cuh(sass_build.block_formats(root)))
        obj = Path(tmp) / "devcheck.o"
        # Compiled by nvcc, linked by the host compiler against the static
        # runtime: the wheels ship no libcudadevrt, which nvcc's own link
        # step asks for (no relocatable device code here needs it).
        for cmd in ([str(nvcc), "-c", *sass_build.FLAGS, "-gencode", "arch=compute_90,code=[sm_90,compute_90]",
                     "-I", tmp, "-I", str(root / "kernels/cuda"), "-o", str(obj), str(root / "bench/gpu/devcheck.cu")],
                    ["g++", "-o", str(out), str(obj), f"-L{lib}", "-lcudart_static", "-ldl", "-lrt", "-pthread"]):
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode:
                raise SystemExit(f"devcheck_build: {cmd[0]} failed:\n{r.stdout}{r.stderr}")
    print(out)


if __name__ == "__main__":
    main()
