"""The local cache of remote reads (issue 42, part 2), against the
emulators of test_s3.py, each behind the fault proxy that counts requests:
a second load through the cache asks the store for metadata only (no GET
of data) and gives the same bits; a replaced object is fetched afresh; an
entry left by a killed load or cut short is never served as whole; two
processes filling one entry leave a correct one; a size limit removes the
least recently used entries first."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pytest

import weightstream
from harness import ROOT, SEED, ws_bin

sys.path.insert(0, str(ROOT / "tests" / "python"))
import sample_model  # noqa: E402
from test_s3 import BUCKET, HANG, SERVERS, bits, env_of, serve, shut  # noqa: E402

NAMES = ["kquant.gguf", "sharded/"]


@pytest.fixture(scope="module")
def models(fixtures, tmp_path_factory) -> dict[str, Path]:
    out, _ = fixtures
    d = tmp_path_factory.mktemp("cache_models")
    q4k = d / "tiny-q4_k_m.gguf"
    sample_model.write_gguf(q4k, sample_model.PRESETS["tiny"], "q4_k_m", np.random.default_rng(SEED), real=True)
    other = d / "other-q4_k_m.gguf"
    sample_model.write_gguf(other, sample_model.PRESETS["tiny"], "q4_k_m", np.random.default_rng(SEED + 1), real=True)
    return {"kquant.gguf": q4k, "sharded/": out / "sharded", "other.gguf": other}


@pytest.fixture(scope="module", params=list(SERVERS))
def store(request, models, tmp_path_factory):
    server = serve(request.param, tmp_path_factory.mktemp(request.param), models)
    yield server
    shut(server)


@pytest.fixture(scope="module")
def s3(models, tmp_path_factory):
    server = serve("s3", tmp_path_factory.mktemp("s3c"), models)
    yield server
    shut(server)


def data_gets(log, names) -> list:
    """GETs of object bytes: ranged, or of an object by name (a whole small
    JSON file); listings are GETs of the bucket, not of an object."""
    return [(m, p, r) for m, p, r in log
            if m == "GET" and (r or unquote(p).split("?")[0].endswith(tuple(names)))]


def object_names(models, name: str) -> list[str]:
    local = models[name]
    return [p.name for p in local.iterdir()] if local.is_dir() else [name]


def url(store, name: str) -> str:
    return store.url(BUCKET, name)


def entries(cache: Path) -> set[str]:
    return {p.name for p in cache.glob("*.wsc")}


@pytest.mark.parametrize("name", NAMES)
def test_a_second_load_reads_the_cache_alone(store, models, name, tmp_path, monkeypatch):
    env_of(store, monkeypatch, endpoint=store.proxy.endpoint)
    cache = tmp_path / "cache"
    want = bits(weightstream.load_file(models[name]))
    store.proxy.take_log()
    assert bits(weightstream.load_file(url(store, name), cache=cache)) == want
    first = store.proxy.take_log()
    assert data_gets(first, object_names(models, name)), first
    assert bits(weightstream.load_file(url(store, name), cache=cache)) == want
    second = store.proxy.take_log()
    assert data_gets(second, object_names(models, name)) == [], second
    # What the store is still asked: the version (a HEAD or a listing).
    assert second and all(m in ("HEAD", "GET") for m, _, _ in second), second


def ws(store, *args, cache: Path | None = None, env=None, **kw) -> subprocess.CompletedProcess:
    e = store.env(endpoint=store.proxy.endpoint)
    if cache is not None:
        e["WEIGHTSTREAM_CACHE_DIR"] = str(cache)
    e.update(env or {})
    return subprocess.run([str(ws_bin()), *map(str, args)], capture_output=True, text=True, env=e, timeout=HANG, **kw)


def convert(store, name: str, out: Path, **kw) -> bytes:
    r = ws(store, "convert", url(store, name), "-o", out, **kw)
    assert r.returncode == 0, r.stderr
    return out.read_bytes()


def test_the_cli_flag_and_the_variable_name_one_cache(s3, tmp_path):
    cache = tmp_path / "cache"
    want = convert(s3, "kquant.gguf", tmp_path / "plain.safetensors")
    s3.proxy.take_log()
    r = ws(s3, "load", "--device", "cpu", "--json", "--cache", cache, url(s3, "kquant.gguf"))
    assert r.returncode == 0, r.stderr
    assert "local cache" in r.stdout, r.stdout
    assert data_gets(s3.proxy.take_log(), ["kquant.gguf"])
    assert convert(s3, "kquant.gguf", tmp_path / "cached.safetensors", cache=cache) == want
    assert data_gets(s3.proxy.take_log(), ["kquant.gguf"]) == []
    assert len(entries(cache)) == 1


def test_a_replaced_object_is_fetched_afresh(s3, models, tmp_path, monkeypatch):
    env_of(s3, monkeypatch, endpoint=s3.proxy.endpoint)
    cache = tmp_path / "cache"
    s3.put_file(BUCKET, "replaced.gguf", models["kquant.gguf"])
    first = bits(weightstream.load_file(url(s3, "replaced.gguf"), cache=cache))
    assert first == bits(weightstream.load_file(models["kquant.gguf"]))
    s3.put_file(BUCKET, "replaced.gguf", models["other.gguf"])
    s3.proxy.take_log()
    second = bits(weightstream.load_file(url(s3, "replaced.gguf"), cache=cache))
    assert data_gets(s3.proxy.take_log(), ["replaced.gguf"])
    assert second == bits(weightstream.load_file(models["other.gguf"])) and second != first
    assert len(entries(cache)) == 2, "each version its own entry"


def test_an_entry_cut_short_or_left_by_a_killed_load_is_not_trusted(s3, models, tmp_path):
    cache = tmp_path / "cache"
    want = convert(s3, "kquant.gguf", tmp_path / "want.safetensors")
    # A load killed after its third data GET (by the proxy, as it arrives).
    proc: dict = {}
    seen = {"n": 0}

    def kill_on_third(method, path, rng):
        if method == "GET" and rng and "kquant.gguf" in unquote(path):
            seen["n"] += 1
            if seen["n"] == 3:
                proc["p"].kill()
    s3.proxy.on_request = kill_on_third
    try:
        e = s3.env(endpoint=s3.proxy.endpoint)
        e.update(WEIGHTSTREAM_CACHE_DIR=str(cache), WEIGHTSTREAM_REMOTE_PART_SIZE=str(64 << 10),
                 WEIGHTSTREAM_REMOTE_CONCURRENCY="1")
        proc["p"] = subprocess.Popen([str(ws_bin()), "convert", url(s3, "kquant.gguf"), "-o", tmp_path / "k.safetensors"],
                                     env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert proc["p"].wait(timeout=HANG) != 0
    finally:
        s3.proxy.on_request = None
    assert len(entries(cache)) == 1
    s3.proxy.take_log()
    assert convert(s3, "kquant.gguf", tmp_path / "after-kill.safetensors", cache=cache) == want
    assert data_gets(s3.proxy.take_log(), ["kquant.gguf"]), "what the killed load never recorded is fetched"
    # A whole entry cut short (a disk that filled, a copy that stopped).
    (entry,) = cache.glob("*.wsc")
    with open(entry, "r+b") as f:
        f.truncate(entry.stat().st_size // 2)
    # A temporary file of a creation that never finished, beside it.
    (cache / ".tmp.1.2.3").write_bytes(b"\0" * 100)
    assert convert(s3, "kquant.gguf", tmp_path / "after-cut.safetensors", cache=cache) == want
    assert data_gets(s3.proxy.take_log(), ["kquant.gguf"])
    assert convert(s3, "kquant.gguf", tmp_path / "whole.safetensors", cache=cache) == want
    assert data_gets(s3.proxy.take_log(), ["kquant.gguf"]) == [], "the refilled entry serves the next load"


def test_two_processes_filling_one_entry_leave_a_correct_one(s3, tmp_path):
    cache = tmp_path / "cache"
    want = convert(s3, "kquant.gguf", tmp_path / "want.safetensors")

    def slow(method, path, rng):
        if rng:
            time.sleep(0.005)  # lengthen the overlap; correctness does not depend on it
    s3.proxy.on_request = slow
    try:
        e = s3.env(endpoint=s3.proxy.endpoint)
        e.update(WEIGHTSTREAM_CACHE_DIR=str(cache), WEIGHTSTREAM_REMOTE_PART_SIZE=str(64 << 10))
        procs = [subprocess.Popen([str(ws_bin()), "convert", url(s3, "kquant.gguf"), "-o", tmp_path / f"{i}.safetensors"],
                                  env=e, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for i in range(2)]
        for p in procs:
            assert p.wait(timeout=HANG) == 0, p.stderr.read()
    finally:
        s3.proxy.on_request = None
    assert all((tmp_path / f"{i}.safetensors").read_bytes() == want for i in range(2))
    assert len(entries(cache)) == 1
    s3.proxy.take_log()
    assert convert(s3, "kquant.gguf", tmp_path / "third.safetensors", cache=cache) == want
    assert data_gets(s3.proxy.take_log(), ["kquant.gguf"]) == []


def test_a_size_limit_evicts_the_least_recently_used(s3, models, tmp_path):
    cache = tmp_path / "cache"
    for k in ("a.gguf", "b.gguf", "c.gguf"):
        s3.put_file(BUCKET, k, models["kquant.gguf"])

    def load(key: str, **env) -> str:
        before = entries(cache)
        convert(s3, key, tmp_path / f"{key}-{len(before)}.safetensors", cache=cache, env=env)
        return (entries(cache) - before).pop() if entries(cache) - before else ""
    a, b = load("a.gguf"), load("b.gguf")
    # Used: b 50 s ago, a 100 s ago; then a again, now (which marks it used).
    now = time.time()
    os.utime(cache / a, (now - 100, now - 100))
    os.utime(cache / b, (now - 50, now - 50))
    assert load("a.gguf") == ""
    one = (cache / a).stat().st_blocks * 512
    c = load("c.gguf", WEIGHTSTREAM_CACHE_MAX_BYTES=str(one * 5 // 2))
    assert entries(cache) == {a, c}, "b, the least recently used, went"


def test_tensor_parallel_ranks_share_one_entry(s3, models, tmp_path, monkeypatch):
    """Two threads standing in for two ranks load through one cache at once;
    the next load reads everything from it."""
    env_of(s3, monkeypatch, endpoint=s3.proxy.endpoint)
    cache = tmp_path / "cache"
    want = bits(weightstream.load_file(models["kquant.gguf"]))
    got: list = [None, None]

    def rank(i):
        got[i] = bits(weightstream.load_file(url(s3, "kquant.gguf"), cache=cache))
    ts = [threading.Thread(target=rank, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert got == [want, want]
    s3.proxy.take_log()
    assert bits(weightstream.load_file(url(s3, "kquant.gguf"), cache=cache)) == want
    assert data_gets(s3.proxy.take_log(), ["kquant.gguf"]) == []


def test_ranks_reading_parts_fill_one_entry_for_a_whole_load(s3, models, tmp_path, monkeypatch):
    """Two "ranks" each load half of the tensors (a tensor-parallel rank
    reads its share); a later whole load finds every tensor's bytes."""
    env_of(s3, monkeypatch, endpoint=s3.proxy.endpoint)
    cache = tmp_path / "cache"
    u = url(s3, "kquant.gguf")
    names = weightstream.open(u).keys()
    for share in (names[0::2], names[1::2]):
        weightstream.open(u, cache=cache).load(share)
    assert len(entries(cache)) == 1
    s3.proxy.take_log()
    assert bits(weightstream.load_file(u, cache=cache)) == bits(weightstream.load_file(models["kquant.gguf"]))
    assert data_gets(s3.proxy.take_log(), ["kquant.gguf"]) == []


def test_presigned_urls_of_one_object_share_an_entry(s3, models, tmp_path, monkeypatch):
    """The entry is keyed by the URL without its query: a fresh signature
    of the same object version is a hit."""
    import boto3
    from botocore.config import Config

    from seaweed import ACCESS_KEY, REGION, SECRET_KEY
    client = boto3.client("s3", endpoint_url=s3.proxy.endpoint, aws_access_key_id=ACCESS_KEY,
                          aws_secret_access_key=SECRET_KEY, region_name=REGION,
                          config=Config(s3={"addressing_style": "path"}, proxies={}))
    for k in list(os.environ):
        if k.startswith("AWS_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    cache = tmp_path / "cache"
    want = bits(weightstream.load_file(models["kquant.gguf"]))
    signed = [client.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": "kquant.gguf"},
                                            ExpiresIn=600 + i) for i in range(2)]
    assert signed[0] != signed[1]
    assert bits(weightstream.load_file(signed[0], cache=cache)) == want
    s3.proxy.take_log()
    assert bits(weightstream.load_file(signed[1], cache=cache)) == want
    log = s3.proxy.take_log()
    # Over HTTP the version comes from a one-byte ranged GET (a presigned
    # URL is signed for GET only): that one, and no other.
    assert [r for _, _, r in data_gets(log, ["kquant.gguf"])] == ["bytes=0-0"], log
    assert len(entries(cache)) == 1


def test_a_size_limit_that_is_not_a_number_is_refused(s3, tmp_path):
    r = ws(s3, "inspect", "--json", "--cache", tmp_path / "cache", url(s3, "kquant.gguf"),
           env={"WEIGHTSTREAM_CACHE_MAX_BYTES": "50GB"})
    assert r.returncode != 0
    assert "WEIGHTSTREAM_CACHE_MAX_BYTES=50GB" in r.stderr, r.stderr
