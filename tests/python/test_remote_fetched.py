"""What a load from object storage really fetched (issue 59 item 3),
against SeaweedFS behind the fault proxy of test_s3.py, which counts the
GET body bytes it sends back.

The load's `src_bytes` (and the Python `bytes_read`, the vLLM plugin's
`file bytes read`) is what the plan asked for. Over a network what a fleet
operator pays is what the store sent: headers, retried parts, and, for a
column slice (a tensor-parallel rank's part of a row-parallel weight),
the whole span of its rows. `fetched` reports that, counted where the
bytes arrive, and these tests hold it to the proxy's own count."""
from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

import weightstream
from harness import ws_bin
from test_s3 import HANG, env_of, serve_sample, shut, url

NAME = "q4_0.gguf"


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    server = serve_sample(tmp_path_factory, NAME)
    yield server
    shut(server)


def load_json(s3, *args) -> dict:
    r = subprocess.run([str(ws_bin()), "load", "--device", "cpu", "--json", *map(str, args)],
                       env=s3.env(endpoint=s3.proxy.endpoint), capture_output=True, text=True, timeout=HANG)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def proxy_count(s3) -> dict:
    """{"bytes", "requests"}: the ranged GETs' body bytes and their count
    since the last call (a listing is a GET too, of no object's data)."""
    gets = [x for x in s3.proxy.take_log() if x[0] == "GET" and x[2]]
    return {"bytes": s3.proxy.take_sent(), "requests": len(gets)}


def test_the_cli_reports_what_the_store_sent(s3, tmp_path):
    proxy_count(s3)
    out = load_json(s3, url(NAME))
    sent = proxy_count(s3)
    assert out["fetched"] == sent
    # The whole file, once: the head fetched to parse the header serves
    # the data reads that start inside it (it was once fetched again).
    assert sent["bytes"] == s3.local.stat().st_size
    # A local file fetches nothing from any store.
    assert load_json(s3, s3.local)["fetched"] is None
    # Through the cache: the first load fills it, the second is served by it.
    first = load_json(s3, url(NAME), "--cache", tmp_path / "cache")
    assert first["fetched"] == proxy_count(s3) and first["fetched"]["bytes"] > out["src_bytes"]
    again = load_json(s3, url(NAME), "--cache", tmp_path / "cache")
    assert again["fetched"] == proxy_count(s3) == {"bytes": 0, "requests": 0}


def test_python_fetched_counts_a_column_slice_as_the_store_sent_it(s3, monkeypatch):
    """A rank's half of a row-parallel weight: the plan reads half of each
    row, while the store sends the rows' span (one ranged GET, not one per
    row). `fetched()` says so; `bytes_read` keeps the plan's count."""
    env_of(s3, monkeypatch, endpoint=s3.proxy.endpoint)
    local = weightstream.open(s3.local, device="cpu")
    assert local.fetched() is None
    name = "blk.0.ffn_down.weight"
    rows, cols = local.matrix(name)
    want = np.asarray(local.get_slice(name, cols=(0, cols // 2))).view(np.uint16)
    proxy_count(s3)
    ck = weightstream.open(url(NAME), device="cpu")
    opened = ck.fetched()
    assert opened == proxy_count(s3) and opened["requests"] >= 1
    got = np.asarray(ck.get_slice(name, cols=(0, cols // 2))).view(np.uint16)
    assert np.array_equal(got, want)
    sent = proxy_count(s3)
    after = ck.fetched()
    assert {k: after[k] - opened[k] for k in after} == sent
    half = ck.slice_bytes(name, cols=(0, cols // 2))
    assert ck.bytes_read == half
    assert half < sent["bytes"] <= ck.slice_bytes(name)
