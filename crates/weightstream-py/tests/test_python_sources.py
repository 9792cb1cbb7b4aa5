"""Every source gives the same bits from Python as mmap, `auto` says what
it chose, and an unknown source is refused with the choices (by the CLI
too). (The CLI's loads through each source, and `auto` following the page
cache, are in tests/python/test_sources.py.)"""
from __future__ import annotations

import logging

import numpy as np
import pytest

import weightstream
from harness import direct_or_refused, drop_cache, run_ws


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
