"""vLLM serving a model kept in S3 (issue 34) from a real SeaweedFS (started
here; tests/s3/seaweed.py): `--model` a local directory holding only
config.json, `--load-format weightstream --model-loader-extra-config
'{"file": "s3://models/fp8/"}'` (vLLM 0.32 refuses `--model s3://...` with
any load format but its Run:ai and modelexpress ones). No local copy of the
weights is made: weightstream reads them with ranged GETs. The tokens equal
the local load's at TP=1 and TP=2, and the two TP=2 ranks together fetch
about one copy of the weights (each only its slices), not two."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tests" / "s3"))
from faultproxy import FaultProxy  # noqa: E402
from seaweed import SeaweedS3  # noqa: E402

GENERATE = ROOT / "plugins/vllm/tests/generate_s3.py"
S3_MODEL = "s3://models/fp8/"


@pytest.fixture(scope="module")
def s3(variants, tmp_path_factory):
    with SeaweedS3(tmp_path_factory.mktemp("seaweed")) as server, FaultProxy(server.port) as proxy:
        server.make_bucket("models")
        server.put_tree("models", "fp8/", variants["fp8"][0])
        server.put_file("models", "q4_0/model.gguf", variants["q4_0"][0] / "model.gguf")
        server.proxy = proxy
        yield server


def env_for(s3, tp: int) -> dict:
    e = dict(os.environ)
    e.update(s3.env(endpoint=s3.proxy.endpoint))
    if tp > 1:
        e["VLLM_CPU_OMP_THREADS_BIND"] = "|".join(str(i % (os.cpu_count() or 1)) for i in range(tp))
    return e


def run(cmd: list, env: dict) -> list[str]:
    r = subprocess.run([sys.executable, GENERATE, *map(str, cmd)], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-4000:]
    return [l for l in r.stdout.splitlines() if l.startswith(("TOKENS ", "FAILED "))]


def tokens(lines: list[str], n: int = 2) -> list:
    assert [l.split(" ", 2)[:2] for l in lines] == [["TOKENS", str(i)] for i in range(n)], "\n".join(lines)
    return [json.loads(l.split(" ", 2)[2]) for l in lines]


def config_only(checkpoint, d):
    """A --model directory with the checkpoint's config.json and nothing else."""
    d.mkdir()
    (d / "config.json").write_bytes((checkpoint / "config.json").read_bytes())
    return d


@pytest.fixture(scope="module")
def runs(variants, tmp_path_factory) -> str:
    """The local FP8 checkpoint, then the same from S3 (--model: its config.json alone)."""
    local = variants["fp8"][0]
    config_dir = config_only(local, tmp_path_factory.mktemp("fp8") / "config")
    return json.dumps([[str(local), "weightstream", {}],
                       [str(config_dir), "weightstream", {"model_loader_extra_config": {"file": S3_MODEL}}]])


def test_tp1_from_s3_gives_the_local_tokens(s3, runs, variants, tmp_path):
    """FP8 safetensors (a prefix) and a Q4_0 GGUF (one key), in one vLLM process."""
    gguf_local = variants["q4_0"][0]
    gguf_config = config_only(gguf_local, tmp_path / "q4_0")
    more = [[str(gguf_local), "weightstream", {}],
            [str(gguf_config), "weightstream", {"model_loader_extra_config": {"file": "s3://models/q4_0/model.gguf"}}]]
    fp8_want, fp8_got, gguf_want, gguf_got = tokens(run([json.dumps(json.loads(runs) + more)], env_for(s3, 1)), 4)
    assert fp8_got == fp8_want
    assert gguf_got == gguf_want


def test_tp2_from_s3_gives_the_local_tokens_and_ranks_fetch_their_slices(s3, runs, variants):
    s3.proxy.take_log()
    want, got = tokens(run([runs, "--tp", "2"], env_for(s3, 2)))
    assert got == want
    weights = sum(p.stat().st_size for p in variants["fp8"][0].glob("*.safetensors"))
    gets = []
    for method, _, rng in s3.proxy.take_log():
        if method == "GET" and rng and rng.startswith("bytes="):
            a, b = rng[len("bytes="):].split("-")
            gets.append((int(a), int(b) + 1))
    # Data reads (after each open's header reads from byte 0): both ranks
    # together about one copy of the weights (each its slices, plus the
    # replicated 1-D tensors), where two whole copies would be 2x.
    data = sum(b - a for a, b in gets if a > 0)
    assert weights / 2 < data < 1.3 * weights, (data, weights, gets)
