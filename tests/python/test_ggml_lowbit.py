"""Q1_0 and Q2_0 (ggml ids 41 and 42), which gguf-py 0.19 cannot
dequantize: `convert` against ggml's own C dequantization (reference.ggml_c:
`to_float` of the llama.cpp the scripts build, rounded to BF16) bit for bit,
with every ISA and one or two threads, on edge blocks (every edge f16 d,
NaN, infinities and subnormals included, with bytes cycling through every
value), random blocks in odd shapes, and the files the real
`llama-quantize` writes for its Q1_0 and Q2_0 presets."""
from __future__ import annotations

import struct
import sys
from pathlib import Path

import gguf
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
import edge_cases  # noqa: E402
import malformed  # noqa: E402
import real_quants  # noqa: E402
import reference  # noqa: E402
from harness import SEED  # noqa: E402
from test_cpu_parity import ISAS, assert_bits_equal, convert  # noqa: E402

# Every f16 edge the Rust cases use (signalling and negative NaNs, the
# largest subnormal, -smallest subnormal) beside edge_cases' scales.
F16_EDGES = sorted(set(edge_cases.F16_SCALES) | {0x8001, 0x7C01, 0xFFFF, 0x1400, 0x83FF, 0x7BFF})


def edge_blocks(rng) -> bytes:
    out = bytearray()
    for d in F16_EDGES:
        for start in range(0, 256, 37):
            b = bytearray((start + j * 7) % 256 for j in range(18))
            b[0:2] = struct.pack("<H", d)
            out += b
    return bytes(out)


def write(path: Path, rng) -> Path:
    """Q1_0 and Q2_0 tensors in odd shapes: edge blocks, one block, a
    3 x 7-block matrix, 1001 random blocks as 7 x 143."""
    g = malformed.Gguf()
    g.kv = [(b"general.architecture", malformed.STRING, malformed.gstr(b"llama")),
            (b"general.alignment", malformed.U32, struct.pack("<I", 32))]
    data = bytearray()
    for type_id, (name, elems, size) in reference.GGML_C_TYPES.items():
        edges = edge_blocks(rng)
        rand = rng.integers(0, 256, 1001 * size, dtype=np.uint8).tobytes()
        for label, raw, rows in [("edges", edges, len(edges) // size), ("one_block", rand[:size], 1),
                                 ("odd", rand[:21 * size], 3), ("random", rand, 7)]:
            data += b"\0" * (-len(data) % 32)
            cols = len(raw) // size // rows * elems
            g.tensors.append((f"{name.lower()}.{label}".encode(), [cols, rows], type_id, len(data)))
            data += raw
    g.data = bytes(data)
    path.write_bytes(g.build())
    return path


def ggml_reference(path: Path, out_dtype: str = "BF16") -> dict[str, np.ndarray]:
    """Each tensor as ggml reads it (its own GGUF reader), dequantized by
    ggml's C code (Q1_0, Q2_0), gguf-py (the other block types llama-quantize
    mixes in) or numpy (floats)."""
    out = {}
    for name, (type_id, raw) in reference.ggml_gguf_tensors(path).items():
        if type_id in reference.GGML_C_TYPES:
            out[name] = reference.ggml_c(raw, type_id, out_dtype)
        else:
            q = gguf.GGMLQuantizationType(type_id)
            out[name] = (reference.floats(raw, q.name, out_dtype) if q.name in ("F32", "F16", "BF16")
                         else reference.gguf_quant(raw, q, out_dtype))
    return out


@pytest.fixture(scope="module")
def lowbit_file(tmp_path_factory):
    return write(tmp_path_factory.mktemp("lowbit") / "lowbit.gguf", np.random.default_rng(SEED))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("isa", ISAS)
def test_edges_and_odd_shapes_match_ggml_c(lowbit_file, tmp_path, isa, threads):
    got = convert(lowbit_file, tmp_path / "o.safetensors", isa, threads)
    want = ggml_reference(lowbit_file)
    assert set(got) == set(want) and len(want) == 8
    for name in want:
        assert_bits_equal(name, got[name], want[name])


def test_edges_and_odd_shapes_round_once_to_float16(lowbit_file, tmp_path):
    """Q1_0 and Q2_0 as float16 (issue 57): ggml's C values rounded once by
    numpy (tests/python/test_f16_out.py has every other format)."""
    from test_f16_out import convert_f16

    got = convert_f16(lowbit_file, tmp_path / "o.safetensors")
    want = ggml_reference(lowbit_file, "F16")
    assert set(got) == set(want) and len(want) == 8
    for name in want:
        assert_bits_equal(name, got[name], want[name])


@pytest.fixture(scope="module")
def real_files(tmp_path_factory):
    return real_quants.make(tmp_path_factory.mktemp("real_lowbit"), real_quants.GGML_C_TYPES)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("ftype", real_quants.GGML_C_TYPES)
def test_llama_quantize_files_match_ggml_c(real_files, tmp_path, ftype, isa, threads):
    path = real_files[ftype]
    want = ggml_reference(path)
    ids = {reference.ggml_gguf_tensors(path)[n][0] for n in want}
    assert {41: "Q1_0", 42: "Q2_0"}[min(ids & {41, 42})] == ftype, "llama-quantize wrote the type asked for"
    got = convert(path, tmp_path / "o.safetensors", isa, threads)
    assert set(got) == set(want)
    for name in want:
        assert_bits_equal(f"{ftype} {name}", got[name], want[name])
