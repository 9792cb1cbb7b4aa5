"""weightstream.transformers onto a CUDA device: every parameter filled on
the GPU bit for bit what the CPU load gives (and the BF16 reference),
tied embeddings still one tensor, and the model runs there with the
reference model's logits. Skipped without a GPU; scripts/gpu_round.sh runs
it (its python step) on the GPU machine, where llama.cpp's tools are not:
these checkpoints are written by gguf-py and the packed generators alone."""
from __future__ import annotations

import pytest
import torch
import transformers
from safetensors.torch import load_file
from transformers import AutoConfig, AutoModelForCausalLM

import weightstream.transformers as wst
from harness import SEED

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: scripts/gpu_round.sh runs it")
transformers.logging.set_verbosity_error()
TOKENS = torch.tensor([[1, 17, 42, 99, 7, 300, 5, 250]])
# GGUF (gguf-py's quantizers) and block FP8; the NVFP4 writers need
# compressed-tensors, which the GPU machine lacks (the parity step loads
# the NVFP4 fixtures on the GPU with --verify).
KINDS = ["q8_0", "q4_0", "tied-q8_0", "fp8"]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """{kind: (checkpoint, BF16 reference dir)} from the shared generators
    (tests/fixtures/hf_models.py)."""
    import hf_models

    root = tmp_path_factory.mktemp("cuda")
    return hf_models.build_all(root, SEED)


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.detach().contiguous().view(torch.int16)


@pytest.mark.parametrize("kind", KINDS)
def test_cuda_load_equals_the_cpu_load_bitwise(checkpoints, kind):
    path, ref = checkpoints[kind]
    # These GGUFs carry no tokenizer (their vocabulary size is the config's).
    config = AutoConfig.from_pretrained(ref) if (path / "model.gguf").exists() else None
    gpu = wst.load_model(path, device="cuda:0", config=config)
    cpu = wst.load_model(path, device="cpu", config=config).state_dict()
    want = load_file(ref / "model.safetensors")
    got = gpu.state_dict()
    assert set(got) == set(cpu)
    for name, t in got.items():
        assert t.device == torch.device("cuda", 0), name
        assert torch.equal(bits(t).cpu(), bits(cpu[name])), f"{name}: the CUDA load differs from the CPU load"
    for name, t in want.items():
        assert torch.equal(bits(got[name]).cpu(), bits(t)), f"{name} differs from the reference"
    if kind.startswith("tied"):
        assert gpu.lm_head.weight is gpu.model.embed_tokens.weight
    expected = AutoModelForCausalLM.from_pretrained(ref, dtype=torch.bfloat16).to("cuda:0")
    with torch.no_grad():
        assert torch.equal(gpu(TOKENS.cuda()).logits, expected(TOKENS.cuda()).logits)
