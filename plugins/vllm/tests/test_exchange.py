"""Row-parallel weights from object storage, each byte fetched by one rank
(issue 59 item 2; weightstream_vllm/exchange.py), at TP=4, against a real
SeaweedFS behind the fault proxy (which counts the bytes it sent), outside
vLLM: each rank is a process in a gloo group, as vLLM's CPU workers are.
(TP=2 runs inside vLLM: test_vllm_s3.py.)

A rank keeps columns [k C/TP, (k+1) C/TP) of every row of ffn_down and
attn_output (a llama-quantize-shaped Q4_0 GGUF: 704 columns, so at TP=4
each rank's 176 columns end inside a 32-value block). Each rank must get
exactly the bits of the local file's column slice, fetch at most 1.05x
the share a column slice reads, and the ranks together the weights once,
where a column slice fetched from the store fetches the rows' whole span
(checked too, on the same weights)."""
from __future__ import annotations

import multiprocessing as mp
import socket
import sys

import numpy as np
import pytest
import torch

import weightstream
from conftest import ROOT, SEED

sys.path.insert(0, str(ROOT / "tests" / "s3"))
import sample_model  # noqa: E402  (tests/fixtures)
from faultproxy import FaultProxy  # noqa: E402
from seaweed import SeaweedS3  # noqa: E402

URL = "s3://models/q4_0.gguf"


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    d = tmp_path_factory.mktemp("exchange")
    local = d / "q4_0.gguf"
    sample_model.write_gguf(local, sample_model.PRESETS["tiny"], "q4_0", np.random.default_rng(SEED), real=True)
    with SeaweedS3(d / "seaweed") as server, FaultProxy(server.port) as proxy:
        server.make_bucket("models")
        server.put_file("models", "q4_0.gguf", local)
        server.proxy, server.local = proxy, local
        yield server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def weights(ck) -> list[str]:
    return [n for n in ck.keys() if n.endswith(("ffn_down.weight", "attn_output.weight"))]


@pytest.mark.parametrize("tp", [4])
def test_each_rank_fetches_its_share_and_gets_its_columns(s3, tp):
    local = weightstream.open(s3.local)
    names = weights(local)
    assert len(names) == 2 * 4
    env = s3.env(endpoint=s3.proxy.endpoint)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    import exchange_worker

    s3.proxy.take_sent()
    port = free_port()
    procs = [ctx.Process(target=exchange_worker.run, args=(k, tp, port, URL, env, names, queue)) for k in range(tp)]
    for p in procs:
        p.start()
    results = dict((r[0], r[1:]) for r in (queue.get(timeout=300) for _ in procs))
    for p in procs:
        p.join(60)
    assert all(len(r) == 4 for r in results.values()), [r for r in results.values() if len(r) != 4]
    sent = s3.proxy.take_sent()
    total = sum(local.slice_bytes(n) for n in names)
    for rank, (out, fetched, share, n) in sorted(results.items()):
        assert n == len(names)  # every weight went by the exchange
        for name, (cols, bits) in out.items():
            want = local.get_slice(name, cols=tuple(cols)).reshape(-1).view(torch.int16).numpy().tobytes()
            assert bits == want, (rank, name)
        print(f"TP={tp} rank {rank}: fetched {fetched} bytes of the weights, column-slice share {share}, "
              f"{fetched / share:.3f} of it")
        assert fetched <= 1.05 * share, (rank, fetched, share)
    # Together: the weights once (plus each rank's header: 4 opens' heads).
    assert sum(r[1] for r in results.values()) <= 1.01 * total
    assert sent >= sum(r[1] for r in results.values())


def test_a_column_slice_from_the_store_fetches_the_rows_span(s3, monkeypatch):
    """What the exchange avoids: the same rank's columns, sliced directly."""
    for k, v in s3.env(endpoint=s3.proxy.endpoint).items():
        monkeypatch.setenv(k, v)
    ck = weightstream.open(URL)
    name = weights(ck)[0]
    rows, cols = ck.matrix(name)
    before = ck.fetched()["bytes"]
    ck.get_slice(name, cols=(0, cols // 2))
    got, share = ck.fetched()["bytes"] - before, ck.slice_bytes(name, cols=(0, cols // 2))
    print(f"column slice from the store: fetched {got} bytes for a share of {share} ({got / share:.2f}x)")
    assert got > 1.8 * share
