"""The vLLM examples of the docs, run as written in this venv (issue 39).

The blocks are the ones marked `<!-- example: vllm-venv
(plugins/vllm/tests/test_vllm_doc_examples.py) -->` in README.md, docs/*.md and
plugins/vllm/README.md (tests/fixtures/doc_examples.py parses them;
tests/python/test_doc_examples.py requires every block to be marked).

- A shell line `python -m vllm.entrypoints.openai.api_server ARGS`: for
  the lines in FULL_SERVERS, vLLM's OpenAI server starts with the doc's
  ARGS plus `--host 127.0.0.1 --port N` (a free loopback port), /v1/models
  must answer (up to SERVER_START_S: a limit for a hung start, not a
  timing assertion), one completion of the served model is asked for, and
  the server's whole process group is stopped (SIGTERM, then SIGKILL),
  checking that nothing of it is left. Every other server line is parsed
  by the server's own argument parser (vLLM's make_arg_parser and
  validate_parsed_serve_args, as its main() does) and the engine those
  arguments make (model, load format, --hf-config-path, --tokenizer,
  --model-loader-extra-config) is started through the session's engine
  lanes (engines.py) and must generate: the same load path, without a
  second server process importing vLLM for each line (about 40 s each on
  2 cores), and a start the other tests make is made once. Any other
  shell line runs as it is, in order, in the same directory.
- A Python block runs as a script, in its own process group (vLLM's
  engine process included, stopped and checked the same way); a
  `# logs: TEXT` comment in it must be in its output.
- The same command (or Python block) in several docs runs once.
- The Python blocks and the whole servers start when the module's first
  case does, two at a time (SIDE_BY_SIDE), while the other cases run.

Each runs in a fresh directory where the doc's checkpoint paths are
generated stand-ins (STAND_INS: tests/fixtures/hf_models.py's tiny models of
the same format, built by conftest.py, with a word-level tokenizer covering
their whole vocabulary), in an environment for 2 CPU cores (ENV: vLLM's own
CPU CI switch, which skips inductor compilation and warm-up, and a 1 GiB KV
cache), with "python" this venv's. The doc's text is run unchanged but for
the absolute paths in ABSOLUTE, replaced by the generated file.

Run by the test command's vLLM step (scripts/test.sh), or alone:

    .venv-vllm/bin/python -m pytest plugins/vllm/tests/test_vllm_doc_examples.py -q -rs
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import doc_examples  # tests/fixtures, on sys.path through conftest.py
from doc_servers import run_python, serve_and_complete, write_tokenizer

SERVER = ["python", "-m", "vllm.entrypoints.openai.api_server"]
SERVER_START_S = 900  # generous: vLLM imports in two processes on 2 busy cores
ENV = {
    # vLLM's switch for its CPU CI: dynamo with the eager backend (no inductor
    # C++ compilation, minutes on 2 cores) and no warm-up run.
    "VLLM_CPU_CI_ENV": "1",
    # The KV cache, in GiB: the tiny models need little, and the default
    # takes a share of the machine's memory.
    "VLLM_CPU_KVCACHE_SPACE": "1",
}


def commands(block: doc_examples.Block) -> list[str]:
    """A shell block's commands, backslash continuations joined."""
    return [c for c in block.body.replace("\\\n", " ").splitlines() if c.strip() and not c.lstrip().startswith("#")]


def cases() -> list[tuple[str, str, list[str]]]:
    """(id, language, commands or [python source]), each distinct one once.
    Server lines of a block with nothing else are independent: one case each."""
    out, seen = [], set()
    for b in doc_examples.blocks_for(__file__):
        if b.lang in doc_examples.PYTHON:
            groups = [[b.body]]
        else:
            cmds = commands(b)
            independent = all(shlex.split(c, comments=True)[:3] == SERVER for c in cmds)
            groups = [[c] for c in cmds] if independent else [cmds]
        for i, group in enumerate(groups):
            key = (b.lang, tuple(" ".join(shlex.split(c, comments=True)) if b.lang != "python" else c for c in group))
            if key not in seen:
                seen.add(key)
                out.append((f"{b.where}" + (f"#{i + 1}" if len(groups) > 1 else ""), b.lang, group))
    return out


CASES = cases()


def test_the_docs_have_vllm_examples_for_this_file():
    assert len(CASES) >= 4, CASES
    assert len(FULL_SERVERS) == 2 and FULL_SERVERS <= {c[0] for c in CASES}, FULL_SERVERS


def full_servers() -> set[str]:
    """The server lines that start the whole server: the first one a reader
    meets, and the first with the most options (a GGUF alone, its config
    and tokenizer from elsewhere). Chosen by content, not by line number,
    so that editing the docs keeps the choice."""
    servers = [c for c in CASES if c[1] not in doc_examples.PYTHON
               and any(shlex.split(step, comments=True)[:3] == SERVER for step in c[2])]
    options = next(c for c in servers if all(o in " ".join(c[2]) for o in ("--hf-config-path", "--tokenizer")))
    return {servers[0][0], options[0]}


FULL_SERVERS = full_servers()


# The docs' checkpoint directories -> (generated model: conftest.py's
# `variants` and `packed_variants`, the files of it the directory holds,
# whether it holds tokenizer files too). The formats are the docs'.
GGUF, ST = ["model.gguf", "config.json"], ["model.safetensors", "config.json"]
STAND_INS = {
    "Llama-3.1-8B-Q4_0": ("q4_0", GGUF, True),
    "model": ("q4_0", GGUF, True),
    "gguf-dir": ("q4_0", ["model.gguf"], False),  # the .gguf alone
    "Llama-3.1-8B-config": ("q4_0", ["config.json"], True),  # the original model's config and tokenizer
    "Llama-3.1-8B-tokenizer": ("q4_0", [], True),
    "Qwen3-8B-FP8": ("fp8", ST, True),  # block FP8 (weight_scale_inv)
    "Llama-3.1-8B-Instruct-FP4": ("nvfp4-modelopt", ST + ["hf_quant_config.json"], True),
    "Qwen3-8B-NVFP4": ("nvfp4-ct", ST, True),
    "gpt-oss-20b": ("gpt-oss-mxfp4", ST, True),
    "Llama-3.1-8B-W4A16": ("int4-ct", ST, True),
}
# Absolute paths in the docs: replaced in the command by the generated file.
ABSOLUTE = {"/models/llama-q8_0.gguf"}


def test_every_stand_in_is_used():
    text = "\n".join("\n".join(steps) for _, _, steps in CASES)
    assert [p for p in [*STAND_INS, *ABSOLUTE] if p not in text] == []


# -- stand-ins ----------------------------------------------------------------


@pytest.fixture(scope="module")
def stand_ins(variants, packed_variants, tmp_path_factory) -> dict[str, Path]:
    """The docs' checkpoint directories (STAND_INS) made of generated files
    (linked), each with the tokenizer files unless it stands for a
    directory that has none."""
    import hf_models

    root = tmp_path_factory.mktemp("doc-stand-ins")
    tokenizer = root / "tokenizer"
    assert hf_models.GPT_OSS_CONFIG["vocab_size"] == hf_models.CONFIG["vocab_size"]
    write_tokenizer(tokenizer, hf_models.CONFIG["vocab_size"])
    models = {**{k: v[0] for k, v in variants.items()}, **{k: v[0] for k, v in packed_variants.items()}}
    out = {}
    for name, (kind, files, with_tokenizer) in STAND_INS.items():
        d = root / "dirs" / name
        d.mkdir(parents=True)
        for f in sorted(models[kind].iterdir()):
            if f.name in files:
                (d / f.name).symlink_to(f)
        assert sorted(p.name for p in d.iterdir()) == sorted(files), (name, kind)
        if with_tokenizer:
            for f in tokenizer.iterdir():
                (d / f.name).symlink_to(f)
        out[name] = d
    out["/models/llama-q8_0.gguf"] = variants["q8_0"][0] / "model.gguf"
    return out


# -- the server ---------------------------------------------------------------


def engine_of(argv: list[str], cwd: Path):
    """The engine a server command line makes, as a session run: parsed by
    the server's own parser, then the arguments that choose what is loaded
    and how (paths made absolute: the lanes run elsewhere), and the dtype."""
    from engines import Run
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    args = make_arg_parser(FlexibleArgumentParser()).parse_args(argv[3:])
    validate_parsed_serve_args(args)
    e = AsyncEngineArgs.from_cli_args(args)
    path = lambda p: str((cwd / p).resolve()) if p else None  # noqa: E731
    return Run.of(path(e.model), e.load_format, hf_config_path=path(e.hf_config_path),
                  tokenizer=path(e.tokenizer) if e.tokenizer != e.model else None,
                  model_loader_extra_config=e.model_loader_extra_config or None,
                  dtype=e.dtype if e.dtype != "auto" else None)


# -- the cases ----------------------------------------------------------------


def own_processes(case) -> bool:
    """A case that starts vLLM in processes of its own (a Python block, a
    whole server), not through the engine lanes."""
    return case[1] in doc_examples.PYTHON or case[0] in FULL_SERVERS


# How many own-process cases run at once: most of each is one process
# importing vLLM on one core, so two side by side take about the time of
# one (the test command's time budget); more would crowd 24 GiB.
SIDE_BY_SIDE = 2


@pytest.fixture(scope="module")
def started(request, stand_ins, engines, tmp_path_factory) -> dict:
    """{case id: the future of its run}: every own-process case this
    session runs (`-k` may pick a few) started when the module's first
    test asks, SIDE_BY_SIDE at a time, each in its own directory, while the
    other cases go on through the lanes. Each case's test waits for its
    own and raises what it raised."""
    from concurrent.futures import ThreadPoolExecutor

    selected = {item.callspec.params["case"][0] for item in request.session.items
                if item.module is request.module and "case" in getattr(getattr(item, "callspec", None), "params", {})}
    pool = ThreadPoolExecutor(max_workers=SIDE_BY_SIDE)
    futures = {c[0]: pool.submit(run_case, c, stand_ins, engines, tmp_path_factory.mktemp("doc-example"))
               for c in CASES if own_processes(c) and c[0] in selected}
    yield futures
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_doc_example(case, stand_ins, engines, started, tmp_path):
    if own_processes(case):
        started[case[0]].result()  # raises the case's own failure
    else:
        run_case(case, stand_ins, engines, tmp_path)


def run_case(case, stand_ins, engines, tmp_path: Path) -> None:
    where, lang, steps = case
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    for name, d in stand_ins.items():
        if name not in ABSOLUTE:
            (cwd / name).symlink_to(d)
    for p in ABSOLUTE:
        steps = [step.replace(p, str(stand_ins[p])) for step in steps]
    env = {**os.environ, **ENV}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])  # "python": this venv's
    if lang in doc_examples.PYTHON:
        run_python(where, steps[0], cwd, env, tmp_path, SERVER_START_S)
        return
    for i, cmd in enumerate(steps):
        argv = shlex.split(cmd, comments=True)
        if argv[:3] == SERVER and where in FULL_SERVERS:
            serve_and_complete(argv, cwd, env, tmp_path / f"server-{i}.log", SERVER_START_S)
        elif argv[:3] == SERVER:
            run = engine_of(argv, cwd)
            assert engines.tokens(run), f"{where}: no tokens from {run.describe()}"
        else:
            r = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", cmd], cwd=cwd, env=env, capture_output=True,
                               text=True, timeout=600)
            assert r.returncode == 0, f"{where}: `{cmd}` failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
