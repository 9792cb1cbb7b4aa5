"""Every source gives the same bits, from the CLI and from Python, and the
choice `auto` makes follows the page cache: read when the file is warm,
O_DIRECT when it is cold. (The byte-level checks, every alignment residue and
the partial last block, are in crates/weightstream-io/tests/direct.rs.)"""
from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import numpy as np
import pytest

import weightstream
from conftest import ROOT, run_ws

sys.path.insert(0, str(ROOT / "bench" / "io"))
from storage import drop_cache as _drop_cache  # noqa: E402  (bench/io/storage.py)


def drop_cache(p: Path) -> None:
    """This file's pages only: the tests leave the rest of the cache alone."""
    _drop_cache(p, system=False)


FIXTURES = ["all_types.gguf", "v2.gguf", "plain.safetensors", "sharded", "fp8_deepseek", "fp8_compressed_tensors", "fp8_single"]


def direct_or_refused(entry: dict) -> bool:
    """The direct source, or the read source standing in for it with a reason."""
    return entry["source"] == "direct" or (entry["source"] == "read" and "refused" in (entry["note"] or ""))


@pytest.mark.parametrize("name", FIXTURES)
def test_direct_loads_verify_bitwise(fixtures, name):
    out, _ = fixtures
    # 1 MiB reads, three readers: several reads per larger tensor, all unaligned.
    r = json.loads(run_ws("load", out / name, "--device", "cpu", "--source", "direct", "--readers", "3",
                          "--staging-mib", "1", "--verify", "--skip-unsupported", "--json").stdout)
    assert r["verify"]["identical"], r["verify"]
    assert r["source"] == "direct"
    assert all(direct_or_refused(s) for s in r["sources"]), r["sources"]


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


def test_python_sources_give_the_same_bits(fixtures, caplog):
    out, _ = fixtures
    path = out / "fp8_deepseek"
    want = weightstream.load_file(path, source="mmap")
    drop_cache(path)
    with caplog.at_level(logging.INFO, logger="weightstream"):
        ck = weightstream.open(path, source="auto", readers=3, staging_slots=2, staging_bytes=4096 + 18)
    assert all(direct_or_refused(s) for s in ck.sources()), ck.sources()
    assert any("auto: " in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]
    for source in ["read", "direct", "gds"]:
        got = weightstream.load_file(path, source=source, readers=2, staging_bytes=8192)
        assert set(got) == set(want)
        for k in want:
            assert np.array_equal(np.asarray(got[k]).view(np.uint16), np.asarray(want[k]).view(np.uint16)), (source, k)
    got = ck.load()
    for k in want:
        assert np.array_equal(np.asarray(got[k]).view(np.uint16), np.asarray(want[k]).view(np.uint16)), k


def test_unknown_sources_are_refused_with_the_choices(fixtures):
    out, _ = fixtures
    with pytest.raises(weightstream.WeightstreamError, match="use auto, read, mmap, direct, gds"):
        weightstream.open(out / "all_types.gguf", source="dma")
    r = run_ws("load", out / "all_types.gguf", "--source", "dma", check=False)
    assert r.returncode != 0 and "auto, read, mmap, direct, gds" in r.stderr
