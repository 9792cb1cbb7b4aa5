"""Compile a tree's kernels for sm_90 and disassemble them, without cargo
(bench/gpu/sass_budget.py's build half).

The kernels include `formats.cuh`, which kernels/build.rs writes from the
block table (kernels/build/mirror.rs `formats_cuh`). Running the Rust build
script here would mean a cargo build (minutes on the 2-core machine), so
`formats_cuh` writes the same namespaces from the same table,
crates/weightstream-blocks/src/block.rs's `block_formats!` rows, read as
text; that parse is also where the bytes per output come from. The host-only
`WS_BLOCK_LAYOUTS` macro is left out: no device code uses it.

The nvcc flags are those of kernels/build/nvcc.rs `compile`, for sm_90 only
and as a cubin; `check_flags` fails if that file stops passing one of them,
so the model cannot silently measure differently built code.
"""
from __future__ import annotations

import concurrent.futures
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FLAGS = ["-std=c++17", "-O3", "--fmad=false"]
ARCH = "sm_90"
ROW = re.compile(r"^\s*(\w+)\s*/\s*(\w+)\s*=\s*ggml\s+(\d+),\s*(\d+),\s*(\d+),\s*\{([^}]*)\};", re.M)


@dataclass
class Format:
    module: str
    ggml_id: int
    elems: int
    bytes: int
    fields: list[tuple[str, int]]


def block_formats(tree: Path) -> dict[str, Format]:
    """{module: Format} from the tree's block table, in table order."""
    text = (tree / "crates/weightstream-blocks/src/block.rs").read_text()
    out = {}
    for m in ROW.finditer(text):
        fields = []
        for f in m.group(6).split(","):
            if f.strip():
                name, offset = f.split("@")
                fields.append((name.strip(), int(offset)))
        out[m.group(2)] = Format(m.group(2), int(m.group(3)), int(m.group(4)), int(m.group(5)), fields)
    if len(out) < 20:
        raise SystemExit(f"sass_build: only {len(out)} block formats parsed from block.rs: has its table changed shape?")
    return out


def formats_cuh(formats: dict[str, Format]) -> str:
    """The device half of kernels/build/mirror.rs `formats_cuh`."""
    lines = ["#pragma once", "", "#include <stdint.h>", "", "namespace ws {", "", "constexpr uint32_t QK_K = 256;", ""]
    for f in formats.values():
        fields = ", ".join(f"{n} = {o}" for n, o in f.fields)
        lines.append(f"namespace {f.module} {{ constexpr uint32_t GGML_ID = {f.ggml_id}, ELEMS = {f.elems}, BYTES = {f.bytes}, {fields}; }}")
    lines += ["", "}  // namespace ws", ""]
    return "\n".join(lines)


def check_flags(tree: Path):
    text = (tree / "kernels/build/nvcc.rs").read_text()
    missing = [f for f in FLAGS if f'"{f}"' not in text]
    if missing:
        raise SystemExit(f"sass_build: kernels/build/nvcc.rs no longer passes {missing}: update FLAGS in {__file__}")


def tools() -> tuple[Path, Path]:
    """nvcc (WEIGHTSTREAM_NVCC: scripts/env.sh points it at the pinned
    wheel) and the cuobjdump beside it (the pinned nvidia-cuda-cuobjdump
    and nvidia-cuda-nvdisasm wheels install into the same nvidia/cu13/bin)."""
    nvcc = os.environ.get("WEIGHTSTREAM_NVCC")
    if not nvcc:
        raise SystemExit("sass_build: WEIGHTSTREAM_NVCC is unset (source scripts/env.sh after scripts/setup.sh)")
    cuobjdump = Path(nvcc).parent / "cuobjdump"
    if not (cuobjdump.is_file() and (cuobjdump.parent / "nvdisasm").is_file()):
        raise SystemExit(f"sass_build: no cuobjdump and nvdisasm beside {nvcc}: re-run scripts/setup.sh "
                         "(requirements/cuda-toolchain.txt pins them)")
    return Path(nvcc), cuobjdump


def sass(tree: Path) -> str:
    """`cuobjdump -sass` of every kernels/cuda/*.cu of `tree`, for sm_90."""
    check_flags(tree)
    nvcc, cuobjdump = tools()
    sources = sorted((tree / "kernels/cuda").glob("*.cu"))
    with tempfile.TemporaryDirectory(prefix="sass-budget-") as tmp:
        inc = Path(tmp)
        (inc / "formats.cuh").write_text(formats_cuh(block_formats(tree)))

        def one(src: Path) -> str:
            cubin = inc / f"{src.stem}.cubin"
            r = subprocess.run([str(nvcc), "-cubin", *FLAGS, f"-arch={ARCH}", "-I", str(inc), "-o", str(cubin), str(src)],
                               capture_output=True, text=True)
            if r.returncode:
                raise SystemExit(f"sass_build: nvcc failed on {src}:\n{r.stdout}{r.stderr}")
            # cuobjdump runs nvdisasm (its own wheel, installed beside it).
            env = {**os.environ, "NVDISASM_PATH": str(cuobjdump.parent)}
            r = subprocess.run([str(cuobjdump), "-sass", str(cubin)], capture_output=True, text=True, env=env)
            if r.returncode:
                raise SystemExit(f"sass_build: cuobjdump failed on {cubin.name}:\n{r.stdout}{r.stderr}")
            return r.stdout

        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            return "\n".join(pool.map(one, sources))


def archive(commit: str, dest: Path):
    """The files `sass` reads, as they were at `commit`, under dest."""
    paths = ["kernels/cuda", "kernels/build/nvcc.rs", "crates/weightstream-blocks/src/block.rs"]
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", commit, *paths], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=tar, check=True)
