"""Shared fixtures: the built CLI, generated fixture files, a printed seed."""
from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))

import generate  # noqa: E402

SEED = int(os.environ.get("WEIGHTSTREAM_SEED") or secrets.randbits(32))


def pytest_report_header(config):
    return f"weightstream fixture seed: {SEED} (WEIGHTSTREAM_SEED={SEED} reproduces this run)"


def ws_bin() -> Path:
    p = Path(os.environ.get("WEIGHTSTREAM_BIN") or ROOT / "target" / "release" / "weightstream")
    if not p.exists():
        pytest.fail(f"{p} is missing: build it with scripts/setup.sh (or set WEIGHTSTREAM_BIN)")
    return p


def run_ws(*args, check: bool = True, **kw) -> subprocess.CompletedProcess:
    r = subprocess.run([str(ws_bin()), *map(str, args)], capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"weightstream {' '.join(map(str, args))} failed ({r.returncode}):\n{r.stderr}")
    return r


def inspect_json(path) -> dict:
    return json.loads(run_ws("inspect", "--json", path).stdout)


@pytest.fixture(scope="session")
def fixtures(tmp_path_factory):
    out = tmp_path_factory.mktemp("fixtures")
    manifest = generate.generate(out, SEED)
    return out, manifest
