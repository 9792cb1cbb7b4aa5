"""Every source gives the same bits from the CLI, and the choice `auto`
makes follows the page cache: read when the file is warm, O_DIRECT when it
is cold. (The byte-level checks, every alignment residue and the partial
last block, are in crates/weightstream-io/tests/direct.rs; the same from
Python in crates/weightstream-py/tests/test_python_sources.py.)"""
from __future__ import annotations

import json

import pytest

from harness import direct_or_refused, drop_cache, run_ws

FIXTURES = ["all_types.gguf", "v2.gguf", "plain.safetensors", "sharded", "fp8_deepseek", "fp8_compressed_tensors", "fp8_single"]


@pytest.mark.parametrize("name", FIXTURES)
def test_direct_loads_verify_bitwise(fixtures, name):
    out, _ = fixtures
    # 1 MiB reads, three readers: several reads per larger tensor, all unaligned.
    r = json.loads(run_ws("load", out / name, "--device", "cpu", "--source", "direct", "--readers", "3",
                          "--staging-mib", "1", "--verify", "--skip-unsupported", "--json").stdout)
    assert r["verify"]["identical"], r["verify"]
    assert r["source"] == "direct"
    assert all(direct_or_refused(s) for s in r["sources"]), r["sources"]


def test_phases_say_where_the_time_went(fixtures):
    out, _ = fixtures
    path = out / "all_types.gguf"
    args = ("load", path, "--device", "cpu", "--skip-unsupported")
    ring = json.loads(run_ws(*args, "--source", "direct", "--readers", "3", "--staging-mib", "1", "--json").stdout)
    p = ring["phases"]
    # The read-ahead ring ran: one busy time per reader it started.
    assert 1 <= len(p["readers_busy"]) <= 3, p
    assert all(0 <= b <= ring["seconds"] for b in p["readers_busy"]), p
    assert 0 < p["first_byte"] <= p["pipeline"] <= ring["seconds"], p
    assert p["alloc"] == 0 and p["drain"] == 0, p
    text = run_ws(*args, "--source", "direct", "--readers", "3", "--staging-mib", "1").stdout
    assert "phases (ms): ring " in text and "readers busy " in text, text
    # A mapped load has no readers: all of it is the pipeline.
    mapped = json.loads(run_ws(*args, "--source", "mmap", "--json").stdout)
    assert mapped["phases"]["readers_busy"] == [] and 0 < mapped["phases"]["pipeline"] <= mapped["seconds"], mapped["phases"]
    refused = run_ws(*args, "--write-combined", "--json", check=False)
    assert refused.returncode != 0 and "needs --device cuda" in refused.stdout + refused.stderr


def test_auto_follows_the_page_cache(fixtures):
    out, _ = fixtures
    path = out / "all_types.gguf"
    drop_cache(path)
    cold = json.loads(run_ws("load", path, "--device", "cpu", "--skip-unsupported", "--json").stdout)
    (entry,) = cold["sources"]
    assert entry["note"].startswith("auto: "), entry
    assert direct_or_refused(entry), entry
    path.read_bytes()
    warm = json.loads(run_ws("load", path, "--device", "cpu", "--skip-unsupported", "--json").stdout)
    (entry,) = warm["sources"]
    assert entry["source"] == "read" and "100% of the file is in the page cache" in entry["note"], entry
    text = run_ws("load", path, "--device", "cpu", "--skip-unsupported").stdout
    assert "source: read (auto: 100% of the file is in the page cache" in text, text
