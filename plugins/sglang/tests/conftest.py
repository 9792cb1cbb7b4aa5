"""The SGLang suite runs in .venv-sglang (sglang 0.5.23, the weightstream
wheel, the plugin and the test-only sgl_kernel stand-in):
scripts/test.sh sets it up with scripts/setup_sglang.sh. Its checkpoints
are the vLLM suite's (tests/fixtures/hf_models.py)."""
import os
import secrets
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
sys.path.insert(0, str(ROOT / "tests" / "s3"))
SEED = int(os.environ.get("WEIGHTSTREAM_SEED") or secrets.randbits(16))


def pytest_report_header(config):
    return f"weightstream SGLang suite seed: {SEED} (WEIGHTSTREAM_SEED={SEED} reproduces this run)"


@pytest.fixture(scope="session")
def variants(tmp_path_factory):
    import hf_models as models

    return models.build_all(tmp_path_factory.mktemp("models"), SEED)


@pytest.fixture(scope="session")
def q4_k_m(tmp_path_factory):
    """(checkpoint, BF16 reference) of the real llama-quantize's Q4_K_M."""
    import hf_models as models
    import real_quants

    out = models.build_kquants(tmp_path_factory.mktemp("kquants"), SEED,
                               lambda src, dst, ftype: real_quants.quantize(src, dst, ftype), ftypes=("Q4_K_M",))
    return out["Q4_K_M"][:2]
