"""The transformers suite runs in .venv-vllm (torch, transformers,
accelerate, the weightstream wheel): scripts/test.sh runs it after the vLLM
suite. llama.cpp's tools come from $WEIGHTSTREAM_LLAMA_CPP or
scripts/build_llama_cpp.sh's cached build (test_c.sh has built it by then)."""
import os
import sys
from pathlib import Path

import pytest

# ROOT and the printed SEED: tests/fixtures/harness.py, which the package's
# conftest one folder up put on sys.path and whose seed header it prints.
from harness import ROOT, SEED

# Nothing here needs the network; the hub-id fallback test then fails fast
# (huggingface_hub reads this once, at import).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def gguf_models(tmp_path_factory):
    import models

    return models.build(tmp_path_factory.mktemp("gguf"), SEED)


@pytest.fixture(scope="session")
def packed_models(tmp_path_factory):
    """{kind: (safetensors dir, BF16 reference dir)}: block FP8 and NVFP4
    (ModelOpt and compressed-tensors) of one tiny Llama, made by the shared
    generators (tests/fixtures/hf_models.py, on sys.path with the harness)."""
    import hf_models as vm

    root = tmp_path_factory.mktemp("packed")
    weights = vm.hf_model(root / "bf16", SEED)
    vm.fp8_variant(root / "fp8", root / "fp8-ref", root / "bf16", weights)
    out = {"fp8": (root / "fp8", root / "fp8-ref")}
    out.update(vm.nvfp4_variants(root, root / "bf16", weights))
    return out
