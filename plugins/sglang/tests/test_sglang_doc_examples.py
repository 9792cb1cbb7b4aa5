"""The SGLang examples of the docs, run as written in this venv.

The blocks are the ones marked `<!-- example: sglang-venv
(plugins/sglang/tests/test_sglang_doc_examples.py) -->` (docs/sglang.md;
tests/fixtures/doc_examples.py parses them).

- A shell line `python -m sglang.launch_server ARGS`: SGLang's server
  starts with the doc's ARGS plus `--host 127.0.0.1 --port N` and CPU_ARGS
  (this machine's CPU and 2 cores: the doc's line is the GPU one), its
  /v1/models must answer (up to SERVER_START_S: a limit for a hung start,
  not a timing assertion), one completion is asked for, and the server's
  whole process group is stopped and checked gone.
- A Python block runs as a script in its own process group, with
  SGLANG_USE_CPU_ENGINE=1 (SGLang's CPU platform) in its environment.

Each runs in a fresh directory where the doc's checkpoint paths are
STAND_INS: tests/fixtures/hf_models.py's tiny models of the same format
with a word-level tokenizer covering their whole vocabulary.
"""
from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import pytest

import doc_examples
from doc_servers import run_python, serve_and_complete, write_tokenizer

SERVER = ["python", "-m", "sglang.launch_server"]
SERVER_START_S = 600  # generous: SGLang imports in two processes on 2 busy cores
ENV = {"SGLANG_USE_CPU_ENGINE": "1"}
# What a 2-core CPU needs beside the doc's arguments: the CPU device (its
# attention falls back to torch_native without AMX), no CUDA graphs, and a
# small KV pool and context (the default takes a share of the machine).
CPU_ARGS = ["--device", "cpu", "--disable-cuda-graph", "--mem-fraction-static", "0.3", "--max-total-tokens", "1024",
            "--context-length", "128", "--max-running-requests", "4", "--chunked-prefill-size", "-1"]
GGUF = ["model.gguf", "config.json"]
STAND_INS = {"Llama-3.1-8B-Q4_0": ("q4_0", GGUF)}
BLOCKS = doc_examples.blocks_for(__file__)


def test_the_docs_have_sglang_examples_for_this_file():
    assert {b.lang for b in BLOCKS} == {"sh", "python"}, BLOCKS
    text = "\n".join(b.body for b in BLOCKS)
    assert all(name in text for name in STAND_INS)


@pytest.fixture(scope="module")
def cwd_template(variants, tmp_path_factory) -> Path:
    import hf_models

    root = tmp_path_factory.mktemp("doc-stand-ins")
    for name, (kind, files) in STAND_INS.items():
        d = root / name
        d.mkdir()
        for f in files:
            (d / f).symlink_to(variants[kind][0] / f)
        write_tokenizer(d, hf_models.CONFIG["vocab_size"])
    return root


def run_block(block, cwd: Path, tmp_path: Path) -> None:
    env = {**os.environ, **ENV}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])  # "python": this venv's
    if block.lang in doc_examples.PYTHON:
        run_python(block.where, block.body, cwd, env, tmp_path, SERVER_START_S)
        return
    for i, cmd in enumerate(c for c in block.body.splitlines() if c.strip() and not c.startswith("#")):
        argv = shlex.split(cmd, comments=True)
        assert argv[:3] == SERVER, f"{block.where}: only server lines are run here: {cmd}"
        serve_and_complete(argv + CPU_ARGS, cwd, env, tmp_path / f"server-{i}.log", SERVER_START_S)


@pytest.fixture(scope="module")
def outcomes(cwd_template, tmp_path_factory) -> dict:
    """{block: None, or the exception it raised}: every block run at once,
    each in its own processes and directory. Most of a start is one
    process importing SGLang, one core of two: two side by side take
    about the time of one (the test command's time budget)."""
    from concurrent.futures import ThreadPoolExecutor

    def one(block):
        try:
            run_block(block, cwd_template, tmp_path_factory.mktemp("doc-example"))
        except BaseException as e:  # noqa: BLE001 (handed to the block's own test)
            return e
        return None

    with ThreadPoolExecutor(max_workers=len(BLOCKS)) as pool:
        return dict(zip([b.where for b in BLOCKS], pool.map(one, BLOCKS)))


@pytest.mark.parametrize("block", BLOCKS, ids=[b.where for b in BLOCKS])
def test_doc_example(block, outcomes):
    if outcomes[block.where] is not None:
        raise outcomes[block.where]
