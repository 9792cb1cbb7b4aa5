"""What pins a remote read, and what the local cache trusts (issue 55,
items 2 and 7), against SeaweedFS behind the fault proxy of test_s3.py.

- S3's version id `null` (a bucket whose versioning is suspended) names no
  version: a GET of `versionId=null` serves whatever was written last,
  and answers `null` again. Such objects are pinned by their ETag: an
  object replaced (same size) between the open and the load fails with
  `remote_changed`, where it once gave the new bytes under the old
  header; and the cache keys the entry on the ETag, so a replacement is
  fetched afresh, whole or partly cached, where the old version's bytes
  were once served (or mixed with the new one's inside one load).
- Side files (a tokenizer, a README beside the weights) are read pinned
  to the version their size probe saw, never more bytes than it.
- A zero-length object is `remote_empty`, naming it (once `truncated`).
- A process SIGKILLed while it fills a cache entry leaves nothing the
  next load trusts that it did not record."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pytest

import weightstream
from harness import ROOT, SEED, ws_bin

sys.path.insert(0, str(ROOT / "tests" / "python"))
import hf_tiny  # noqa: E402  (tests/fixtures/hf_tiny.py)
import sample_model  # noqa: E402
from test_s3 import BUCKET, HANG, bits, env_of, serve, shut  # noqa: E402

SUSPENDED = "suspended"


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    """Two same-size versions of one GGUF (the same shapes, other values)
    and a Hugging Face directory (its side files)."""
    d = tmp_path_factory.mktemp("pin_models")
    a, b = d / "a-q4_k_m.gguf", d / "b-q4_k_m.gguf"
    for path, seed in ((a, SEED), (b, SEED + 1)):
        sample_model.write_gguf(path, sample_model.PRESETS["tiny"], "q4_k_m", np.random.default_rng(seed), real=True)
    assert a.stat().st_size == b.stat().st_size and a.read_bytes() != b.read_bytes()
    return {"kquant.gguf": a, "other.gguf": b, "hf-llama/": hf_tiny.tiny_llama(d / "hf-llama", SEED)}


@pytest.fixture(scope="module")
def s3(models, tmp_path_factory):
    server = serve("s3", tmp_path_factory.mktemp("s3p"), models)
    server.make_bucket(SUSPENDED)
    c = server.client()
    c.put_bucket_versioning(Bucket=SUSPENDED, VersioningConfiguration={"Status": "Enabled"})
    c.put_bucket_versioning(Bucket=SUSPENDED, VersioningConfiguration={"Status": "Suspended"})
    yield server
    shut(server)


@pytest.fixture
def env(s3, monkeypatch):
    env_of(s3, monkeypatch, endpoint=s3.proxy.endpoint)


def suspended_object(s3, models, key: str) -> str:
    """`key` in the suspended bucket, holding version A; its URL."""
    s3.put_file(SUSPENDED, key, models["kquant.gguf"])
    head = s3.client().head_object(Bucket=SUSPENDED, Key=key)["ResponseMetadata"]["HTTPHeaders"]
    # The premise: SeaweedFS, as S3, answers the version id `null` here.
    assert head.get("x-amz-version-id") == "null", head
    return f"s3://{SUSPENDED}/{key}"


def local_bits(models, name: str) -> dict:
    return bits(weightstream.load_file(models[name]))


def test_a_null_version_is_no_pin_a_replacement_mid_load_is_refused(s3, models, env):
    u = suspended_object(s3, models, "pinned.gguf")
    ck = weightstream.open(u)  # the header: version A's
    s3.put_file(SUSPENDED, "pinned.gguf", models["other.gguf"])  # version B, the same size
    with pytest.raises(weightstream.WeightstreamError) as e:
        ck.load()
    assert e.value.kind == "remote_changed" and u in str(e.value), e.value
    # What pinned it: If-Match on the ETag, not `versionId=null`.
    gets = [(p, r) for m, p, r in s3.proxy.take_log() if m == "GET" and r and "pinned.gguf" in unquote(p)]
    assert gets and not [p for p, _ in gets if "versionId" in p], gets


@pytest.mark.parametrize("partial", [False, True], ids=["whole-entry", "partial-entry"])
def test_the_cache_keys_a_null_version_on_its_etag(s3, models, env, tmp_path, partial):
    """A same-size replacement is a new entry: never the old version's
    bytes, whole or (a rank's half cached) mixed with the new one's."""
    key = f"cached-{partial}.gguf"
    u = suspended_object(s3, models, key)
    cache = tmp_path / "cache"
    if partial:
        names = weightstream.open(u).keys()
        weightstream.open(u, cache=cache).load(names[0::2])
    else:
        assert bits(weightstream.load_file(u, cache=cache)) == local_bits(models, "kquant.gguf")
    s3.put_file(SUSPENDED, key, models["other.gguf"])
    assert bits(weightstream.load_file(u, cache=cache)) == local_bits(models, "other.gguf")
    assert len(list(cache.glob("*.wsc"))) == 2, "each version its own entry"


def test_side_files_are_read_pinned(s3, models, env):
    """Replaced between its size probe (HEAD) and its GET, by an object
    past the size limit: refused, never read as the probed one."""
    from weightstream._native import read_side_files
    key = "hf-llama/tokenizer_config.json"
    u = f"s3://{BUCKET}/{key}"
    local = (models["hf-llama/"] / "tokenizer_config.json").read_bytes()
    assert read_side_files(u, ["tokenizer_config.json"], 1 << 20) == [local]

    def replace_on_get(method, path, rng):
        if method == "GET" and unquote(path).split("?")[0].endswith(key):
            s3.proxy.on_request = None
            s3.put_bytes(BUCKET, key, b" " * (2 << 20))
    s3.proxy.on_request = replace_on_get
    try:
        with pytest.raises(weightstream.WeightstreamError) as e:
            read_side_files(u, ["tokenizer_config.json"], 1 << 20)
    finally:
        s3.proxy.on_request = None
        s3.put_bytes(BUCKET, key, local)
    assert e.value.kind == "remote_changed" and u in str(e.value), e.value


def test_an_empty_object_is_remote_empty(s3):
    s3.put_bytes(BUCKET, "empty/model.gguf", b"")
    for u in (f"s3://{BUCKET}/empty/model.gguf", f"s3://{BUCKET}/empty/"):
        r = subprocess.run([str(ws_bin()), "inspect", "--json", u], capture_output=True, text=True,
                           env=s3.env(), timeout=HANG)
        assert r.returncode != 0, r.stdout
        err = json.loads(r.stderr.strip().splitlines()[-1])["error"]
        assert err["kind"] == "remote_empty" and f"s3://{BUCKET}/empty/model.gguf" in err["message"], err


def test_a_load_killed_mid_fill_leaves_nothing_trusted(s3, models, env, tmp_path):
    """The entry holds ranges a first load recorded; a convert through the
    cache is SIGKILLed once bytes it fetched are in the entry (it asks for
    more after writing them), before it records them; the next load gives
    the local file's bits, and fetches what the killed one never recorded."""
    cache = tmp_path / "cache"
    u = f"s3://{BUCKET}/kquant.gguf"
    size = models["kquant.gguf"].stat().st_size
    e = s3.env(endpoint=s3.proxy.endpoint)
    e.update(WEIGHTSTREAM_CACHE_DIR=str(cache), WEIGHTSTREAM_REMOTE_PART_SIZE=str(64 << 10),
             WEIGHTSTREAM_REMOTE_CONCURRENCY="1")
    # Every third tensor fetched and recorded (`del` closes the entry).
    code = f"import weightstream as w; c = w.open({u!r}); c.load(c.keys()[1::3]); del c"
    subprocess.run([sys.executable, "-c", code], env=e, check=True, timeout=HANG)
    (entry,) = cache.glob("*.wsc")
    before = entry.read_bytes()[:size]
    assert before.strip(b"\0") and before != models["kquant.gguf"].read_bytes(), "a partial entry"
    state: dict = {}

    def kill_once_filled(method, path, rng):
        if rng and "kquant.gguf" in unquote(path) and "p" in state and "killed" not in state:
            if entry.read_bytes()[:size] != before:
                state["killed"] = True
                state["p"].kill()
    s3.proxy.on_request = kill_once_filled
    try:
        state["p"] = subprocess.Popen([str(ws_bin()), "convert", u, "-o", tmp_path / "k.safetensors"], env=e,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        rc = state["p"].wait(timeout=HANG)
    finally:
        s3.proxy.on_request = None
    assert state.get("killed") and rc == -signal.SIGKILL, rc
    assert list(cache.glob("*.wsc")) == [entry]
    s3.proxy.take_log()
    assert bits(weightstream.load_file(u, cache=cache)) == local_bits(models, "kquant.gguf")
    assert [r for m, p, r in s3.proxy.take_log() if m == "GET" and r and "kquant.gguf" in unquote(p)]
