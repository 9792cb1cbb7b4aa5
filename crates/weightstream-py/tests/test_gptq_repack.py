"""`Checkpoint.get_gptq` (issue 43): blocks moved into GPTQ's layout hold
exactly gguf-py's dequantized values (Q4_0, Q8_0), or the BF16 weightstream
dequantizes (every type with a target gguf-py can write: Q5_0, IQ4_NL,
Q1_0, TQ1_0, TQ2_0), for any rectangle of whole groups, from every source;
a column range reads only its blocks; no other type is repacked."""
from __future__ import annotations

import gguf
import numpy as np
import pytest

import weightstream
from test_block_slices import _bits

Q = gguf.GGMLQuantizationType


def _gguf(path, tensors: dict) -> None:
    w = gguf.GGUFWriter(str(path), arch="llama")
    for name, (x, qtype) in tensors.items():
        w.add_tensor(name, gguf.quants.quantize(x, qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def _values(qweight, scales, bits: int) -> np.ndarray:
    """What vLLM's uint4b8 / uint8b128 GPTQ kernels compute from the
    tensors: scale * (code - 2^(bits-1)), as [out, in] float32 (exact: a
    code times an fp16)."""
    q = np.asarray(qweight).view(np.uint32)
    pack = 32 // bits
    codes = np.stack([(q >> (bits * i)) & ((1 << bits) - 1) for i in range(pack)], axis=1).reshape(q.shape[0] * pack, q.shape[1])
    s = np.asarray(scales).astype(np.float32)
    s = np.repeat(s, codes.shape[0] // max(s.shape[0], 1), axis=0)
    return ((codes.astype(np.float32) - 2 ** (bits - 1)) * s).T


@pytest.mark.parametrize("source", ["mmap", "read"])
def test_every_rectangle_of_whole_groups_holds_the_blocks_values(tmp_path, source):
    rng = np.random.default_rng(43)
    x4 = rng.standard_normal((37, 160)).astype(np.float32)
    x8 = rng.standard_normal((24, 96)).astype(np.float32)
    x4[3, :32] = 0  # a block whose d is 0
    x8[5, 32:64] *= 1e4
    path = tmp_path / "m.gguf"
    _gguf(path, {"a": (x4, Q.Q4_0), "b": (x8, Q.Q8_0)})
    reader = {t.name: t for t in gguf.GGUFReader(str(path)).tensors}
    with weightstream.open(str(path), source=source) as ck:
        for name, bits in (("a", 4), ("b", 8)):
            t = reader[name]
            want = gguf.quants.dequantize(t.data, t.tensor_type).reshape(int(t.shape[1]), -1)
            rows, cols = want.shape
            assert ck.gptq_target(name) == (bits, 32)
            for r in [(0, rows), (1, rows - 2), (rows // 2, rows), (4, 4)]:
                for c in [(0, cols), (32, cols), (0, 32), (64, 96), (32, 32)]:
                    before = ck.bytes_read
                    q, s = ck.get_gptq(name, rows=r, cols=c)
                    assert tuple(q.shape) == ((c[1] - c[0]) * bits // 32, r[1] - r[0])
                    assert tuple(s.shape) == ((c[1] - c[0]) // 32, r[1] - r[0])
                    got = _values(q, s, bits)
                    assert np.array_equal(got, want[r[0]:r[1], c[0]:c[1]]), (name, r, c)
                    block_bytes = 18 if bits == 4 else 34
                    assert ck.bytes_read - before == (r[1] - r[0]) * (c[1] - c[0]) // 32 * block_bytes


def test_other_types_and_ragged_columns_are_refused(tmp_path):
    rng = np.random.default_rng(1)
    path = tmp_path / "m.gguf"
    _gguf(path, {"a": (rng.standard_normal((4, 64)).astype(np.float32), Q.Q4_1),
                 "b": (rng.standard_normal((4, 64)).astype(np.float32), Q.Q4_0)})
    with weightstream.open(str(path)) as ck:
        assert ck.gptq_target("a") is None
        with pytest.raises(weightstream.WeightstreamError, match="map onto GPTQ exactly") as e:
            ck.get_gptq("a")
        assert e.value.kind == "unsupported"
        with pytest.raises(weightstream.WeightstreamError, match="group of 32"):
            ck.get_gptq("b", cols=(16, 64))
        with pytest.raises(weightstream.WeightstreamError, match="outside the matrix"):
            ck.get_gptq("b", rows=(0, 5))


def _bf16_of(values: np.ndarray) -> np.ndarray:
    """float32 -> BF16 bits, round to nearest even (exact inputs here:
    d times a small integer, rounded once as the kernels round)."""
    b = values.astype(np.float32).view(np.uint32)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


@pytest.mark.parametrize("qtype,bits,group", [(Q.Q5_0, 8, 32), (Q.IQ4_NL, 8, 32), (Q.Q1_0, 4, 128), (Q.TQ1_0, 4, 128),
                                              (Q.TQ2_0, 4, 128)])
def test_other_exact_types_hold_the_dequantized_values(tmp_path, qtype, bits, group):
    rng = np.random.default_rng(int(qtype))
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    rows, cols = 6, 512
    raw = rng.integers(0, 256, (rows, cols // block, size), dtype=np.uint8)
    d_at = {Q.TQ1_0: 52, Q.TQ2_0: 64}.get(qtype, 0)
    raw[:, :, d_at:d_at + 2] = rng.uniform(1e-3, 2.0, (rows, cols // block)).astype(np.float16).view(np.uint8).reshape(rows, -1, 2)
    path = tmp_path / "m.gguf"
    w = gguf.GGUFWriter(str(path), arch="llama")
    w.add_tensor("w", raw.reshape(rows, -1), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with weightstream.open(str(path)) as ck:
        assert ck.gptq_target("w") == (bits, group)
        whole = _bits(ck.get_tensor("w"))
        for r, c in [((0, rows), (0, cols)), ((1, 5), (group, cols - group)), ((2, 3), (cols - group, cols))]:
            q, s = ck.get_gptq("w", rows=r, cols=c)
            got = _bf16_of(_values(q, s, bits))
            assert np.array_equal(got, whole[r[0]:r[1], c[0]:c[1]]), (qtype, r, c)
