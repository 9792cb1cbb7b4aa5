"""`Checkpoint.get_gptq(device="cuda")` and `get_fp4(device="cuda")` (issue
43's GPU repack kernels, kernels/cuda/gptq.cu and fp4.cu): on a GPU, the
tensors they move on the device are bitwise the CPU repack's, for every
type with a target gguf-py can write, whole tensors and rectangles (a
row-parallel rank's columns, half a ternary or NVFP4 block), in torch's
current stream's order. Without a GPU (CI) it skips; scripts/gpu_round.sh
runs it, and the host grid checks the kernel sources themselves on the
CPU (kernels/tests/gptq_parity.rs, fp4_parity.rs)."""
from __future__ import annotations

import gguf
import numpy as np
import pytest
import torch

import weightstream

Q = gguf.GGMLQuantizationType
# (type, bits, group, byte offset of the fp16 d).
TYPES = [(Q.Q4_0, 4, 32, 0), (Q.Q8_0, 8, 32, 0), (Q.Q5_0, 8, 32, 0), (Q.IQ4_NL, 8, 32, 0), (Q.Q1_0, 4, 128, 0),
         (Q.TQ1_0, 4, 128, 52), (Q.TQ2_0, 4, 128, 64)]


def _checkpoint(path, rows: int, cols: int) -> None:
    """One random tensor per type, finite d everywhere."""
    rng = np.random.default_rng(43)
    w = gguf.GGUFWriter(str(path), arch="llama")
    for qtype, _, _, d_at in TYPES:
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        raw = rng.integers(0, 256, (rows, cols // block, size), dtype=np.uint8)
        d = rng.uniform(-2.0, 2.0, (rows, cols // block)).astype(np.float16)
        raw[:, :, d_at:d_at + 2] = d.view(np.uint8).reshape(rows, -1, 2)
        w.add_tensor(qtype.name, raw.reshape(rows, -1), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: scripts/gpu_round.sh runs it")
@pytest.mark.parametrize("qtype,bits,group,d_at", TYPES, ids=[t[0].name for t in TYPES])
def test_cuda_repack_equals_cpu_repack_bitwise(tmp_path, qtype, bits, group, d_at):
    rows, cols = 37, 1024
    path = tmp_path / "m.gguf"
    _checkpoint(path, rows, cols)
    with weightstream.open(str(path)) as ck:
        assert ck.gptq_target(qtype.name) == (bits, group)
        for r, c in [((0, rows), (0, cols)), ((3, 20), (group, cols - group)), ((36, 37), (cols - group, cols)),
                     ((5, 5), (0, cols))]:
            q_cpu, s_cpu = ck.get_gptq(qtype.name, rows=r, cols=c)
            before = ck.bytes_read
            q_gpu, s_gpu = ck.get_gptq(qtype.name, rows=r, cols=c, device="cuda:0")
            assert q_gpu.device.type == "cuda" and q_gpu.dtype == torch.int32 and s_gpu.dtype == torch.float16
            assert torch.equal(q_gpu.cpu(), q_cpu), (qtype.name, r, c)
            assert torch.equal(s_gpu.cpu().view(torch.int16), s_cpu.view(torch.int16)), (qtype.name, r, c)
            assert ck.bytes_read - before > 0 or r[0] == r[1]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: scripts/gpu_round.sh runs it")
def test_cuda_repack_on_a_side_stream_and_a_checkpoint_opened_on_cuda(tmp_path):
    path = tmp_path / "m.gguf"
    _checkpoint(path, 8, 256)
    with weightstream.open(str(path)) as cpu, weightstream.open(str(path), device="cuda:0") as gpu:
        want = cpu.get_gptq("Q4_0")
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            q, sc = gpu.get_gptq("Q4_0")  # the checkpoint's device, on torch's current (side) stream
        s.synchronize()
        assert q.device.type == "cuda"
        assert torch.equal(q.cpu(), want[0]) and torch.equal(sc.cpu().view(torch.int16), want[1].view(torch.int16))


FP4 = [(Q.MXFP4, 32, 17, [0]), (Q.NVFP4, 16, 36, [0, 1, 2, 3])]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: scripts/gpu_round.sh runs it")
@pytest.mark.parametrize("qtype,group,size,scale_at", FP4, ids=[t[0].name for t in FP4])
def test_cuda_fp4_repack_equals_cpu_repack_bitwise(tmp_path, qtype, group, size, scale_at):
    """Random blocks, every scale byte with an image (0x7F and set sign
    bits included: the kernel maps them), code 8 included (moves as 0)."""
    rows, cols = 37, 1024
    block = gguf.GGML_QUANT_SIZES[qtype][0]
    raw = np.random.default_rng(44).integers(0, 256, (rows, cols // block, size), dtype=np.uint8)
    for at in scale_at:
        raw[:, :, at][raw[:, :, at] == 0xFF] = 0x7F
    path = tmp_path / "fp4.gguf"
    w = gguf.GGUFWriter(str(path), arch="llama")
    w.add_tensor("w", raw.reshape(rows, -1), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with weightstream.open(str(path)) as ck:
        assert ck.fp4_target("w") == group
        for r, c in [((0, rows), (0, cols)), ((3, 20), (group, cols - group)), ((36, 37), (cols - group, cols)),
                     ((5, 5), (0, cols))]:
            p_cpu, s_cpu = ck.get_fp4("w", rows=r, cols=c)
            p_gpu, s_gpu = ck.get_fp4("w", rows=r, cols=c, device="cuda:0")
            assert p_gpu.device.type == "cuda" and p_gpu.dtype == torch.uint8 and s_gpu.dtype == torch.uint8
            assert torch.equal(p_gpu.cpu(), p_cpu) and torch.equal(s_gpu.cpu(), s_cpu), (qtype.name, r, c)
