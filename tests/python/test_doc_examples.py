"""The docs' examples run as written (issue 39).

Every fenced block of README.md, docs/*.md and plugins/vllm/README.md
carries a marker on the line before it, `<!-- example: KIND -->` or
`<!-- example: KIND (note) -->`; the kinds are described in
tests/fixtures/doc_examples.py, which parses them. This module

- fails on a block without a valid marker, so no example joins the docs
  unrun without saying why (a `not-run` needs its reason, a `vllm-venv`
  block the test file that runs it);
- runs every `run` block (sh, console, python) with this venv's Python and
  the built CLI, each in a fresh directory laid out like the repository
  (its top-level folders linked, `target/release/weightstream`, `.venv`,
  `samples/` made by the sample generator as scripts/run.sh makes it, and
  `weightstream`, `python` and `python3` first on PATH), and requires exit
  status 0 and, for shell blocks, some output; a console block's commands
  run one by one and the lines it shows under a command must be what that
  command prints;
- checks that the C excerpts in docs/c-api.md name only what the complete
  examples they abridge use (scripts/test_c.sh builds and runs those).

Placeholders the docs use for real checkpoints are given generated stand-ins
(tests/fixtures/sample_model.py's tiny Llama in the same format family),
through the explicit tables below: STAND_INS (relative paths, linked into
each block's directory under the doc's name) and the text substitutions of
`substitutions()` (what cannot be made to exist as written: /tmp/, which
becomes the block's own scratch directory, and the address and keys of the
docs' S3-compatible store and emulators). Blocks that read `s3://` (or sign
URLs with boto3) run against a local SeaweedFS (tests/s3/seaweed.py)
holding stand-ins under the docs' bucket and key names (S3_OBJECTS), with
its address and keys in the AWS environment variables; blocks that read
`gs://` or an Azure URL run against fake-gcs-server or Azurite
(tests/s3/emulators.py) holding the same, the block's own endpoint
variable pointed at it.

Runs in the plain venv: `python -m pytest tests/python/test_doc_examples.py`
(WEIGHTSTREAM_BIN names the CLI, as for the rest of tests/python).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import doc_examples as docs  # tests/fixtures (conftest puts it on sys.path)
from harness import ROOT, ws_bin

sys.path.insert(0, str(ROOT / "tests" / "s3"))
from emulators import Azurite, FakeGCS, clean_env, closed_metadata  # noqa: E402
from seaweed import ACCESS_KEY, SECRET_KEY, SeaweedS3  # noqa: E402

BLOCKS = docs.all_blocks()
RUN = [b for b in BLOCKS if b.kind == "run"]

# Relative placeholder paths -> the generated stand-in (a name in the
# sample generator's output) that each block's directory links them to.
STAND_INS = {
    "DeepSeek-V3-FP8": "tiny-llama-fp8",  # block FP8 (128x128 weight_scale_inv) + config.json
    "Qwen3-8B-FP8": "tiny-llama-fp8",
    "model-q4_0.gguf": "tiny-llama-q4_0.gguf",
    "model.gguf": "tiny-llama-q4_0.gguf",
}
# (bucket, key) -> stand-in, uploaded to each local store (S3, GCS, Azure)
# a block uses; a key ending in "/" is a prefix holding the stand-in
# directory's files.
S3_OBJECTS = {
    ("models", "Llama-3.1-8B-Q4_0.gguf"): "tiny-llama-q4_0.gguf",
    ("models", "tiny-fp8/"): "tiny-llama-fp8",
    ("my-models", "m-q4_k_m.gguf"): "tiny-llama-q4_k_m.gguf",
}
# The docs' S3-compatible example (docs/storage.md) names a store on
# 127.0.0.1:8333 with keys K and S; the local server has a free port and
# its own keys.
S3_EXAMPLE_ENDPOINT = "http://127.0.0.1:8333"
# The GCS and Azure examples name the emulators' default ports.
EXAMPLE_ENDPOINTS = {"s3": S3_EXAMPLE_ENDPOINT, "gcs": "http://127.0.0.1:4443", "azure": "http://127.0.0.1:10000"}
STORES = {"s3": SeaweedS3, "gcs": FakeGCS, "azure": Azurite}


def substitutions(scratch: Path, kind: str | None, server) -> dict[str, str]:
    """Text replaced in a block before it runs: what cannot exist as written."""
    subs = {"/tmp/": f"{scratch}/"}  # each block writes into its own scratch directory, not the shared /tmp
    if kind is not None:
        subs[EXAMPLE_ENDPOINTS[kind]] = server.endpoint
    if kind == "s3":
        subs.update({"AWS_ACCESS_KEY_ID=K ": f"AWS_ACCESS_KEY_ID={ACCESS_KEY} ",
                     "AWS_SECRET_ACCESS_KEY=S": f"AWS_SECRET_ACCESS_KEY={SECRET_KEY}"})
    return subs


def store_of(block: docs.Block) -> str | None:
    """The object store a block reads, if any."""
    if "gs://" in block.body:
        return "gcs"
    if any(s in block.body for s in ("az://", "abfs://", "abfss://", ".blob.core.windows.net")):
        return "azure"
    if "s3://" in block.body or "boto3" in block.body:
        return "s3"
    return None


# -- every block is classified ------------------------------------------------


def test_every_block_carries_a_valid_marker():
    bad = []
    for b in BLOCKS:
        if b.kind is None:
            bad.append(f"{b.where} [{b.lang or 'no language'}]: "
                       + (f"unreadable marker {b.marker!r}" if b.marker else "no <!-- example: KIND --> marker before it"))
        elif b.kind not in docs.KINDS:
            bad.append(f"{b.where}: unknown kind {b.kind!r} (one of {', '.join(docs.KINDS)})")
        elif b.kind == "not-run" and not b.note:
            bad.append(f"{b.where}: a not-run block must say why: <!-- example: not-run (reason) -->")
        elif b.kind == "run" and not b.runnable_lang:
            bad.append(f"{b.where}: a run block must be sh, bash, console or python, not {b.lang!r}")
    assert not bad, "blocks in the docs without a valid classification (see tests/fixtures/doc_examples.py):\n" + \
        "\n".join(bad)


def test_vllm_venv_blocks_name_the_test_that_runs_them():
    for b in BLOCKS:
        if b.kind not in docs.VENV_KINDS:
            continue
        test = ROOT / (b.note or "")
        assert b.note and test.is_file(), f"{b.where}: the note must name the test file that runs it, not {b.note!r}"
        # That file selects its blocks by this marker (doc_examples.blocks_for).
        assert "blocks_for(" in test.read_text(), f"{b.where}: {b.note} does not select blocks with blocks_for()"


def test_c_excerpts_name_only_what_their_complete_example_uses():
    """docs/c-api.md abridges docs/examples/*.c, which scripts/test_c.sh
    compiles and runs: every API name in an excerpt must be in its file."""
    excerpts = [b for b in docs.blocks(ROOT / "docs/c-api.md") if b.lang == "c"]
    assert excerpts
    ident = re.compile(r"\b(?:ws|WS|llama|LLAMA)_\w+")
    for b in excerpts:
        m = re.search(r"docs/examples/\w+\.c", b.note or "")
        assert m, f"{b.where}: the note must name the example it abridges"
        names = set(ident.findall(b.body))
        assert names, b.where
        missing = names - set(ident.findall((ROOT / m[0]).read_text()))
        assert not missing, f"{b.where}: {sorted(missing)} not in {m[0]}"


def test_every_stand_in_is_used():
    text = "\n".join(b.body for b in RUN)
    assert [p for p in STAND_INS if p not in text] == []
    assert [k for _, k in S3_OBJECTS if k not in text] == []


# -- the run blocks run -------------------------------------------------------


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    """The stand-ins, and samples/ as scripts/run.sh makes it."""
    d = tmp_path_factory.mktemp("doc-models")
    gen = [sys.executable, str(ROOT / "tests/fixtures/sample_model.py")]
    subprocess.run(gen + ["--out", str(d / "stand-ins"), "--formats", "q4_0,q4_k_m,fp8,bf16"], check=True,
                   capture_output=True)
    subprocess.run(gen + ["--out", str(d / "samples"), "--preset", "tiny", "--formats", "q4_0"], check=True,
                   capture_output=True)
    (d / "bin").mkdir()
    (d / "bin" / "weightstream").symlink_to(ws_bin())
    return d


@pytest.fixture(scope="module")
def stores(models, tmp_path_factory):
    """Each started on first use: a local S3, GCS or Azure server holding
    S3_OBJECTS."""
    servers = {}

    def get(kind: str):
        if kind not in servers:
            server = servers[kind] = STORES[kind](tmp_path_factory.mktemp(f"doc-{kind}")).start()
            for bucket in sorted({b for b, _ in S3_OBJECTS}):
                server.make_bucket(bucket)
            for (bucket, key), name in S3_OBJECTS.items():
                src = models / "stand-ins" / name
                if key.endswith("/"):
                    server.put_tree(bucket, key, src)
                else:
                    server.put_file(bucket, key, src)
        return servers[kind]

    yield get
    for server in servers.values():
        server.stop()


def repository_tree(cwd: Path, models: Path) -> None:
    """A directory where the paths the docs use exist: the repository's
    top-level folders (linked), the built CLI where the build puts it, the
    venv, samples/ and the stand-ins under the docs' names."""
    for entry in ROOT.iterdir():
        if entry.name.startswith(".") or entry.name in ("target", "samples"):
            continue
        (cwd / entry.name).symlink_to(entry)
    (cwd / "target" / "release").mkdir(parents=True)
    (cwd / "target" / "release" / "weightstream").symlink_to(ws_bin())
    (cwd / ".venv").symlink_to(Path(sys.prefix))
    (cwd / "samples").symlink_to(models / "samples")
    for placeholder, name in STAND_INS.items():
        (cwd / placeholder).symlink_to(models / "stand-ins" / name)


def shell(cmd: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    # -e and pipefail: a failing command anywhere in the block fails it, as
    # a reader would see it fail. The timeout only stops a hang.
    return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", cmd], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def normalized(lines) -> list[str]:
    return [" ".join(l.split()) for l in lines if l.strip()]


@pytest.mark.parametrize("block", RUN, ids=[b.where for b in RUN])
def test_run_block(block, models, stores, tmp_path):
    cwd, scratch = tmp_path / "repo", tmp_path / "scratch"
    cwd.mkdir()
    scratch.mkdir()
    repository_tree(cwd, models)
    env = clean_env()
    kind = store_of(block)
    server = stores(kind) if kind else None
    if kind == "s3":
        env = server.env()
    elif kind is not None:
        # The block sets the emulator's variables itself; no metadata
        # server is looked for off the machine.
        env.update(closed_metadata())
    env["PATH"] = os.pathsep.join([str(models / "bin"), str(Path(sys.executable).parent), env.get("PATH", "")])
    env["TMPDIR"] = str(scratch)
    text = block.body
    for old, new in substitutions(scratch, kind, server).items():
        text = text.replace(old, new)

    if block.lang in docs.SHELL:
        r = shell(text, cwd, env)
        print(r.stdout, r.stderr)  # shown with pytest -rP
        assert r.returncode == 0, f"{block.where} failed ({r.returncode}):\n{text}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        assert r.stdout.strip(), f"{block.where} printed nothing:\n{r.stderr[-3000:]}"
    elif block.lang in docs.CONSOLE:
        for cmd, shown in docs.console_steps(text):
            r = shell(cmd, cwd, env)
            assert r.returncode == 0, f"{block.where}: `{cmd}` failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
            if shown:  # what the doc shows a command printing is what it prints
                assert normalized(r.stdout.splitlines()) == normalized(shown), f"{block.where}: `{cmd}` printed\n{r.stdout}"
    else:
        script = scratch / "example.py"
        script.write_text(text)
        r = subprocess.run([sys.executable, str(script)], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"{block.where} failed ({r.returncode}):\n{text}\n{r.stderr[-3000:]}"
