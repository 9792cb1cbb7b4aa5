"""`Checkpoint.get_fp4` (issue 43's FP4 route): GGUF MXFP4 and NVFP4 blocks
moved into compressed-tensors' FP4 layout hold exactly gguf-py's
dequantized values, read as vLLM reads that layout (E2M1 codes packed two
to a byte, low nibble first, times an E8M0 or E4M3FN scale), for any
rectangle of whole groups, from every source; scale bytes without an
exact image are refused with the file offset; no other type is repacked.
(plugins/vllm/tests/test_fp4_route.py compares the same tensors with
compressed-tensors' own packing.)"""
from __future__ import annotations

import gguf
import ml_dtypes
import numpy as np
import pytest

import weightstream

Q = gguf.GGMLQuantizationType
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32)
# (type, group, scale bytes' offsets in a block, scale dtype as vLLM reads it)
TYPES = {Q.MXFP4: (32, [0], ml_dtypes.float8_e8m0fnu), Q.NVFP4: (16, [0, 1, 2, 3], ml_dtypes.float8_e4m3fn)}


def _blocks(qtype, rows: int, cols: int, seed: int) -> np.ndarray:
    """Random blocks; every scale byte but 0xFF (0x7F and sign bits too)."""
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    raw = np.random.default_rng(seed).integers(0, 256, (rows, cols // block, size), dtype=np.uint8)
    for at in TYPES[qtype][1]:
        raw[:, :, at][raw[:, :, at] == 0xFF] = 0x7F
    return raw.reshape(rows, -1)


def _write(path, tensors: dict) -> None:
    w = gguf.GGUFWriter(str(path), arch="llama")
    for name, (raw, qtype) in tensors.items():
        w.add_tensor(name, raw, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def _values(packed, scales, qtype) -> np.ndarray:
    """What vLLM's FP4 kernels read from the tensors: e2m1(code) * scale,
    float32 (exact)."""
    p = np.asarray(packed)
    codes = np.stack([p & 0x0F, p >> 4], axis=-1).reshape(p.shape[0], 2 * p.shape[1])
    s = np.asarray(scales).view(TYPES[qtype][2]).astype(np.float32)
    return E2M1[codes] * np.repeat(s, TYPES[qtype][0], axis=1)


@pytest.mark.parametrize("source", ["mmap", "read"])
@pytest.mark.parametrize("qtype", list(TYPES), ids=lambda q: q.name)
def test_every_rectangle_of_whole_groups_holds_the_blocks_values(tmp_path, source, qtype):
    group = TYPES[qtype][0]
    rows, cols = 13, 256
    raw = _blocks(qtype, rows, cols, 43)
    path = tmp_path / "m.gguf"
    _write(path, {"w": (raw, qtype), "other": (np.zeros((2, 36), np.uint8), Q.Q4_0)})
    want = gguf.quants.dequantize(raw, qtype).astype(np.float32)
    with weightstream.open(str(path), source=source) as ck:
        assert ck.fp4_target("w") == group and ck.gptq_target("w") is None
        assert ck.fp4_target("other") is None
        for r, c in [((0, rows), (0, cols)), ((3, 9), (group, cols - group)), ((12, 13), (cols - group, cols)),
                     ((0, 13), (2 * group, 3 * group)), ((5, 5), (0, cols))]:
            before = ck.bytes_read
            packed, scales = ck.get_fp4("w", rows=r, cols=c)
            assert packed.dtype.itemsize == 1 and tuple(packed.shape) == (r[1] - r[0], (c[1] - c[0]) // 2)
            assert tuple(scales.shape) == (r[1] - r[0], (c[1] - c[0]) // group)
            got = _values(packed.numpy() if hasattr(packed, "numpy") else packed,
                          scales.numpy() if hasattr(scales, "numpy") else scales, qtype)
            exp = want[r[0]:r[1], c[0]:c[1]]
            assert np.array_equal(got.view(np.uint32), exp.view(np.uint32)), (qtype.name, r, c)
            # A column range reads only its blocks' bytes.
            block, size = gguf.GGML_QUANT_SIZES[qtype]
            span = (-(-c[1] // block) - c[0] // block) * size
            assert ck.bytes_read - before == (r[1] - r[0]) * span
        with pytest.raises(weightstream.WeightstreamError, match="only MXFP4 and NVFP4"):
            ck.get_fp4("other")
        with pytest.raises(weightstream.WeightstreamError):
            ck.get_fp4("w", cols=(0, group // 2))


@pytest.mark.parametrize("qtype,at,byte", [(Q.MXFP4, 0, 0xFF), (Q.NVFP4, 2, 0xFF)], ids=["MXFP4", "NVFP4"])
def test_a_scale_byte_without_an_exact_image_is_refused_with_its_offset(tmp_path, qtype, at, byte):
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    raw = _blocks(qtype, 4, 4 * block, 7)
    raw[2, size + at] = byte  # row 2, block 1
    path = tmp_path / "m.gguf"
    _write(path, {"w": (raw, qtype)})
    with weightstream.open(str(path)) as ck:
        offset = next(t for t in gguf.GGUFReader(str(path)).tensors if t.name == "w").data_offset
        with pytest.raises(weightstream.WeightstreamError) as e:
            ck.get_fp4("w")
        assert "'w'" in str(e.value) and str(offset + 2 * 4 * size + size + at) in str(e.value), str(e.value)
        # The same byte from a column range that starts after it is fine;
        # one that covers it names the same offset.
        ck.get_fp4("w", cols=(2 * block, 4 * block))
        with pytest.raises(weightstream.WeightstreamError) as e:
            ck.get_fp4("w", rows=(1, 3), cols=(block, 2 * block))
        assert str(offset + 2 * 4 * size + size + at) in str(e.value), str(e.value)
