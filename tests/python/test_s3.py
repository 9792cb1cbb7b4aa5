"""Checkpoints in object storage (issues 34 and 42), against real servers
started here on 127.0.0.1: S3 (SeaweedFS, with its own credentials),
Google Cloud Storage (fake-gcs-server) and Azure Blob Storage (Azurite),
each with a bucket (container) made by the test and a fault-injecting
proxy in front of it. Tests taking the `store` fixture run once per store
(`-k gcs`, `-k azure`, `-k s3` pick one); those taking `s3` are about
S3 alone (presigned URLs, the AWS files, raw keys).

Loads of one file of every format family give the local load's bits;
every fault (missing key, wrong keys, bad URL, 5xx/SlowDown, a body cut
short, a redirect, an object replaced or the server stopped mid-load, an
index naming a shard outside its prefix) is a typed error naming the
object, with no secret printed, no partial output and no hang.

Where an emulator lacks a behaviour, the proxy supplies it: the faults
for all three, and for GCS the pin (fake-gcs-server ignores If-Match, so
the replaced-object test relies on `?generation=N`).

The transformers front (`weightstream.transformers.load_model`) needs
torch, which this suite's venv lacks: its loads run in the vLLM venv's
Python, one process per store (tests/s3/transformers_loads.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pytest

import weightstream
from harness import ROOT, SEED, run_ws, ws_bin

sys.path.insert(0, str(ROOT / "tests" / "s3"))
sys.path.insert(0, str(ROOT / "tests" / "python"))
import doc_examples  # noqa: E402  (tests/fixtures: the docs' blocks; docs/storage.md's transformers example runs here)
import hf_tiny  # noqa: E402  (tests/fixtures/hf_tiny.py)
import packed as packed_fixtures  # noqa: E402  (tests/fixtures/packed.py)
import sample_model  # noqa: E402
from emulators import Azurite, FakeGCS  # noqa: E402
from faultproxy import FaultProxy  # noqa: E402
from seaweed import SECRET_KEY, SeaweedS3  # noqa: E402
from test_split_gguf import gguf_py_split  # noqa: E402

BUCKET = "models"
# Fault tests: two retries, short timeouts; a hang would pass these.
FAULT_ENV = {"WEIGHTSTREAM_REMOTE_RETRIES": "2", "WEIGHTSTREAM_REMOTE_TIMEOUT": "5"}
HANG = 90


@pytest.fixture(scope="module")
def models(fixtures, tmp_path_factory) -> dict[str, Path]:
    """One small checkpoint per format family, by name: a file or a directory."""
    out, _ = fixtures
    d = tmp_path_factory.mktemp("s3_models")
    rng = np.random.default_rng(SEED)
    q4k = d / "tiny-q4_k_m.gguf"
    sample_model.write_gguf(q4k, sample_model.PRESETS["tiny"], "q4_k_m", rng, real=True)
    split = gguf_py_split(q4k, d / "split", max_tensors=12)
    packed_fixtures.generate(d / "packed", SEED)
    return {
        "legacy+iquant+f16+bf16.gguf": out / "all_types.gguf",  # Q4_0, Q8_0, IQ4_XS, F16, BF16, F32
        "kquant.gguf": q4k,
        "split-gguf/": split[0].parent,
        "plain.safetensors": out / "plain.safetensors",
        "sharded/": out / "sharded",
        "fp8/": out / "fp8_deepseek",
        "nvfp4/": d / "packed" / "nvfp4_modelopt",
        "mxfp4/": d / "packed" / "mxfp4_gptoss",
        "int/": d / "packed" / "int_ct",
        "hf-llama/": hf_tiny.tiny_llama(d / "hf-llama", SEED),
        # The transformers front's refusals: safetensors without their
        # config.json, and a GGUF architecture whose config transformers
        # derives only from a local file.
        "noconfig/": no_config(d / "noconfig", d / "hf-llama"),
        "gptoss/model.gguf": gpt_oss_gguf(d / "gptoss.gguf"),
    }


def no_config(out: Path, hf: Path) -> Path:
    out.mkdir()
    (out / "model.safetensors").write_bytes((hf / "model.safetensors").read_bytes())
    return out


def gpt_oss_gguf(path: Path) -> Path:
    import gguf
    w = gguf.GGUFWriter(str(path), "gpt-oss")
    w.add_block_count(1)
    w.add_tensor("token_embd.weight", np.arange(64, dtype=np.float32).reshape(4, 16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


SERVERS = {"s3": SeaweedS3, "gcs": FakeGCS, "azure": Azurite}


def serve(kind: str, work: Path, models: dict[str, Path]):
    """A started server of `kind` holding the models, with a proxy."""
    server = SERVERS[kind](work).start()
    server.proxy = proxy_for(server).__enter__()
    server.make_bucket(BUCKET)
    for name, local in models.items():
        if name.endswith("/"):
            server.put_tree(BUCKET, name, local)
        else:
            server.put_file(BUCKET, name, local)
    return server


def serve_sample(tmp_path_factory, name: str = "q4_0.gguf"):
    """A started S3 server (with its proxy) holding the tiny sample model's
    Q4_0 GGUF as `name`, its local copy as `server.local` (the tests of
    what a load fetches and of concurrent cache fillers)."""
    d = tmp_path_factory.mktemp("sample")
    local = d / name
    sample_model.write_gguf(local, sample_model.PRESETS["tiny"], "q4_0", np.random.default_rng(SEED), real=True)
    server = serve("s3", tmp_path_factory.mktemp("s3"), {name: local})
    server.local = local
    return server


def proxy_for(server) -> FaultProxy:
    return FaultProxy(server.port, host=getattr(server, "proxy_host", None))


def shut(server) -> None:
    server.proxy.__exit__(None, None, None)
    server.stop()


def served(kind: str):
    """A module fixture: a server of `kind` holding the models."""
    @pytest.fixture(scope="module", name=kind)
    def fixture(models, tmp_path_factory):
        server = serve(kind, tmp_path_factory.mktemp(kind), models)
        yield server
        shut(server)
    return fixture


s3, gcs, azure = served("s3"), served("gcs"), served("azure")


@pytest.fixture(scope="module", params=list(SERVERS))
def store(request):
    """Each store in turn: SeaweedFS (S3), fake-gcs-server, Azurite."""
    return request.getfixturevalue(request.param)


def ws(store, *args, env=None, endpoint=None, timeout=HANG, **kw):
    e = store.env(endpoint=endpoint, **kw)
    e.update(env or {})
    return subprocess.run([str(ws_bin()), *map(str, args)], capture_output=True, text=True, env=e, timeout=timeout)


def url(name: str, store=None) -> str:
    """`name` in the test bucket, in `store`'s spelling (default S3's)."""
    return store.url(BUCKET, name) if store is not None else f"s3://{BUCKET}/{name}"


def same_name(p: Path, d: Path, name: str) -> Path:
    """`p` under the object's name (convert records the source's name)."""
    (d / "local").mkdir(exist_ok=True)
    q = d / "local" / name
    q.write_bytes(p.read_bytes())
    return q


def env_of(store, monkeypatch, **kw) -> None:
    """This process's environment: `store`'s, and nothing else of any cloud."""
    for k in list(os.environ):
        if k.startswith(("AWS_", "GOOGLE_", "GCE_", "AZURE_", "AZURITE_", "STORAGE_EMULATOR_HOST")):
            monkeypatch.delenv(k)
    for k, v in store.env(**kw).items():
        monkeypatch.setenv(k, v)


def bits(tensors: dict) -> dict:
    return {k: np.asarray(v).view(np.uint16).tobytes() for k, v in tensors.items()}


@pytest.mark.parametrize("name", ["legacy+iquant+f16+bf16.gguf", "kquant.gguf", "split-gguf/", "plain.safetensors",
                                  "sharded/", "fp8/", "nvfp4/", "mxfp4/", "int/"])
def test_remote_loads_give_the_local_bits(store, models, name, monkeypatch):
    env_of(store, monkeypatch)
    want = bits(weightstream.load_file(models[name], skip_unsupported=True))
    got = bits(weightstream.load_file(url(name, store), skip_unsupported=True))
    assert got.keys() == want.keys()
    assert all(got[k] == want[k] for k in want), [k for k in want if got[k] != want[k]]


def test_cli_inspect_load_convert_take_urls(store, models, tmp_path):
    info = json.loads(ws(store, "inspect", "--json", url("sharded/", store)).stdout)
    assert [Path(f["path"]).name for f in info["files"]] == sorted(p.name for p in models["sharded/"].glob("*.safetensors"))
    assert all(f["path"].startswith(url("sharded/", store)) for f in info["files"])
    r = ws(store, "load", url("kquant.gguf", store), "--device", "cpu", "--verify", "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["verify"]["identical"] and rep["sources"][0]["source"] == store.kind, rep["sources"]
    local = tmp_path / "local.safetensors"
    run_ws("convert", same_name(models["kquant.gguf"], tmp_path, "kquant.gguf"), "-o", local)
    r = ws(store, "convert", url("kquant.gguf", store), "-o", tmp_path / "remote.safetensors")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "remote.safetensors").read_bytes() == local.read_bytes()


def test_convert_to_gguf_from_a_prefix_equals_the_local_convert(store, models, tmp_path):
    """`convert --to gguf` of a Hugging Face checkpoint under a prefix reads
    its tokenizer files from the store: the same GGUF, byte for byte, as
    the local directory's (issue 41)."""
    local = tmp_path / "local.gguf"
    run_ws("convert", models["hf-llama/"], "-o", local)
    r = ws(store, "convert", url("hf-llama/", store), "-o", tmp_path / "remote.gguf")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "remote.gguf").read_bytes() == local.read_bytes()


def test_headers_take_few_round_trips(store):
    store.proxy.take_log()
    r = ws(store, "inspect", "--json", url("legacy+iquant+f16+bf16.gguf", store), endpoint=store.proxy.endpoint)
    assert r.returncode == 0, r.stderr
    log = store.proxy.take_log()
    gets = [x for x in log if x[0] == "GET" and x[2]]
    assert 1 <= len(gets) <= 2, gets
    # One HEAD, of the key named: its listed siblings (the bucket's other
    # checkpoints) are never read, so never HEADed (GCS and Azure HEAD a
    # listed object when first read, for its pin).
    assert [m for m, _, _ in log if m == "HEAD"] == ["HEAD"], log


def failed(r, kind: str, obj: str, secrets=(SECRET_KEY, Azurite.secret)) -> dict:
    """The JSON error of a failed run: its kind, naming `obj`, no secret."""
    assert r.returncode != 0, r.stdout
    assert not [s for s in secrets if s in r.stderr + r.stdout]
    err = json.loads(r.stderr.strip().splitlines()[-1])["error"]
    assert err["kind"] == kind, err
    assert obj in err["message"], err
    return err


def no_output(d: Path) -> None:
    assert [p.name for p in d.iterdir()] == [], "partial output left behind"


def convert_fails(store, tmp_path, name, kind, obj=None, **kw):
    out = tmp_path / "out"
    out.mkdir()
    t = time.monotonic()
    r = ws(store, "convert", "--json", url(name, store), "-o", out / "m.safetensors", **kw)
    err = failed(r, kind, obj or url(name, store))
    no_output(out)
    return err, time.monotonic() - t


def test_missing_key_bucket_and_bad_url(store, tmp_path):
    convert_fails(store, tmp_path, "nope.gguf", "remote_not_found")
    missing = store.url("no-such-bucket", "m.gguf")
    failed(ws(store, "inspect", "--json", missing), "remote_not_found", missing)
    bad = url("a/../kquant.gguf", store)
    failed(ws(store, "inspect", "--json", bad), "remote_bad_url", bad)


# A valid-looking credential that is not the server's: S3's secret key
# changed, an Azure account key of other bytes (fake-gcs-server checks none).
WRONG = {"s3": "not-the-" + SECRET_KEY, "azure": "bm90LXRoZS1henVyaXRlLWtleS1idXQtYS12YWxpZC1vbmUtMDEyMzQ1Njc4OQ=="}


def test_wrong_keys_are_refused_without_printing_them(store):
    if store.kind not in WRONG:
        pytest.skip("fake-gcs-server checks no credentials (tests/s3/emulators.py); "
                    "crates/weightstream-remote/tests/secrets.rs keeps GCS keys out of errors")
    r = ws(store, "inspect", "--json", url("kquant.gguf", store), secret=WRONG[store.kind])
    failed(r, "remote_denied", url("kquant.gguf", store), secrets=(SECRET_KEY, Azurite.secret, WRONG[store.kind]))


@pytest.mark.parametrize("fault", ["slowdown", "500", "cut"])
def test_transient_faults_are_retried(store, tmp_path, fault, models):
    store.proxy.inject(fault, times=2)
    out = tmp_path / "m.safetensors"
    r = ws(store, "convert", url("kquant.gguf", store), "-o", out, endpoint=store.proxy.endpoint)
    store.proxy.inject(None)
    assert r.returncode == 0, r.stderr
    local = tmp_path / "local.safetensors"
    run_ws("convert", same_name(models["kquant.gguf"], tmp_path, "kquant.gguf"), "-o", local)
    assert out.read_bytes() == local.read_bytes()


@pytest.mark.parametrize("fault,kind", [("slowdown", "remote_server"), ("500", "remote_server"),
                                        ("cut", "remote_truncated"), ("redirect", "remote_redirect")])
def test_lasting_faults_fail_typed_and_bounded(store, tmp_path, fault, kind):
    store.proxy.inject(fault)
    try:
        _, took = convert_fails(store, tmp_path, "kquant.gguf", kind, endpoint=store.proxy.endpoint, env=FAULT_ENV)
    finally:
        store.proxy.inject(None)
    assert took < 60, took


def test_an_index_naming_a_shard_outside_the_prefix_is_refused(store, models, tmp_path):
    index = json.loads((models["sharded/"] / "model.safetensors.index.json").read_text())
    first = next(iter(index["weight_map"]))
    index["weight_map"][first] = "../kquant.gguf"
    store.put_tree(BUCKET, "escape/", models["sharded/"])
    store.put_bytes(BUCKET, "escape/model.safetensors.index.json", json.dumps(index).encode())
    convert_fails(store, tmp_path, "escape/", "remote_outside", obj=url("escape/model.safetensors.index.json", store))


def test_an_object_replaced_mid_load_fails_typed(store, models, tmp_path):
    """The proxy replaces the object after the first data GET: every later
    GET carries the old ETag (S3, Azure: 412) or asks for the old GCS
    generation (gone once replaced: 404, as fake-gcs-server ignores
    If-Match), and is refused, never mixed in."""
    store.put_file(BUCKET, "replaced.gguf", models["kquant.gguf"])
    size = models["kquant.gguf"].stat().st_size
    state = {"n": 0}

    def replace_after_first(method, path, rng):
        # unquote: object_store's GCS client escapes '.' in paths (%2E).
        if method == "GET" and rng and "replaced.gguf" in unquote(path):
            state["n"] += 1
            if state["n"] == 3:
                store.put_bytes(BUCKET, "replaced.gguf", os.urandom(size))
    store.proxy.on_request = replace_after_first
    store.proxy.take_log()
    try:
        convert_fails(store, tmp_path, "replaced.gguf", "remote_changed", endpoint=store.proxy.endpoint,
                      env={**FAULT_ENV, "WEIGHTSTREAM_REMOTE_PART_SIZE": str(64 << 10)})
    finally:
        store.proxy.on_request = None
    assert state["n"] >= 3
    if store.kind == "gcs":
        # What pins GCS reads here: every data GET names the generation.
        gets = [p for m, p, rng in store.proxy.take_log() if m == "GET" and rng]
        assert gets and all("generation=" in p for p in gets), gets


@pytest.mark.parametrize("kind", list(SERVERS))
def test_a_server_stopped_mid_load_fails_typed(models, tmp_path, kind):
    """Its own server: this one is killed after the first data GET."""
    with SERVERS[kind](tmp_path / kind) as server, proxy_for(server) as proxy:
        server.make_bucket(BUCKET)
        server.put_file(BUCKET, "kquant.gguf", models["kquant.gguf"])
        state = {"n": 0}

        def stop_after_first(method, path, rng):
            if method == "GET" and rng:
                state["n"] += 1
                if state["n"] == 3:
                    server.stop()
        proxy.on_request = stop_after_first
        out = tmp_path / "out"
        out.mkdir()
        e = server.env(endpoint=proxy.endpoint)
        e.update(FAULT_ENV, WEIGHTSTREAM_REMOTE_PART_SIZE=str(64 << 10))
        r = subprocess.run([str(ws_bin()), "convert", "--json", url("kquant.gguf", server), "-o", out / "m.safetensors"],
                           capture_output=True, text=True, env=e, timeout=HANG)
        err = json.loads(r.stderr.strip().splitlines()[-1])["error"]
        assert r.returncode != 0 and err["kind"] in ("remote_unreachable", "remote_server", "remote_truncated"), err
        assert url("kquant.gguf", server) in err["message"], err
        no_output(out)


def presigned(s3, key: str) -> str:
    return s3.client().generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": key}, ExpiresIn=600)


def test_presigned_http_urls_load_and_keep_their_signature_secret(s3, models, monkeypatch):
    u = presigned(s3, "kquant.gguf")
    for k in list(os.environ):
        if k.startswith("AWS_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    want = bits(weightstream.load_file(models["kquant.gguf"]))
    got = bits(weightstream.load_file(u))
    assert got == want
    signature = u.split("Signature=")[1].split("&")[0]
    # Another valid-looking signature: its first letter changed.
    i = next(i for i, c in enumerate(signature) if c.isalpha())
    forged = signature[:i] + ("B" if signature[i] == "A" else "A") + signature[i + 1:]
    bad = u.replace("Signature=" + signature, "Signature=" + forged)
    r = subprocess.run([str(ws_bin()), "inspect", "--json", bad], capture_output=True, text=True, timeout=HANG,
                       env={"PATH": os.environ["PATH"], "NO_PROXY": "127.0.0.1"})
    err = failed(r, "remote_denied", f"{s3.endpoint}/{BUCKET}/kquant.gguf")
    assert signature not in r.stderr and forged not in r.stderr, err


def test_a_server_without_range_requests_is_refused(models, tmp_path):
    """python -m http.server answers every GET with the whole file (200)."""
    import shutil
    shutil.copy(models["kquant.gguf"], tmp_path / "m.gguf")
    from seaweed import free_ports
    (port,) = free_ports(1)
    srv = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(tmp_path)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            r = subprocess.run([str(ws_bin()), "inspect", "--json", f"http://127.0.0.1:{port}/m.gguf"], capture_output=True,
                               text=True, timeout=HANG, env={"PATH": os.environ["PATH"], "NO_PROXY": "127.0.0.1"})
            if "remote_unreachable" not in r.stderr or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        err = failed(r, "remote_server", f"http://127.0.0.1:{port}/m.gguf")
        assert "range" in err["message"].lower(), err
    finally:
        srv.kill()
        srv.wait()


def test_c_api_ws_open_takes_urls(store, models, monkeypatch):
    """ws_open / ws_load_tensor through ctypes: an s3://, gs:// or az:// URL
    gives the local file's BF16 bytes; a missing object is WS_ERR_IO naming it."""
    import ctypes as C
    lib_path = ROOT / "target" / "release" / "libweightstream_c.so"
    if not lib_path.exists():
        pytest.fail(f"{lib_path} is missing: cargo build --release -p weightstream-capi --lib")
    env_of(store, monkeypatch)
    lib = C.CDLL(str(lib_path))
    lib.ws_open.argtypes = [C.c_char_p, C.POINTER(C.c_void_p)]
    lib.ws_tensor_count.argtypes = [C.c_void_p]
    lib.ws_tensor_count.restype = C.c_size_t
    lib.ws_tensor_nbytes.argtypes = [C.c_void_p, C.c_size_t, C.c_int]
    lib.ws_tensor_nbytes.restype = C.c_size_t
    lib.ws_last_error.restype = C.c_char_p
    lib.ws_close.argtypes = [C.c_void_p]

    class Dest(C.Structure):
        _fields_ = [("data", C.c_void_p), ("size", C.c_size_t), ("memory", C.c_int), ("device", C.c_int),
                    ("stream", C.c_void_p)]
    lib.ws_load_tensor.argtypes = [C.c_void_p, C.c_size_t, C.c_int, C.POINTER(Dest)]

    def all_bf16(path: str) -> list[bytes]:
        ck = C.c_void_p()
        assert lib.ws_open(path.encode(), C.byref(ck)) == 0, lib.ws_last_error()
        out = []
        try:
            for i in range(lib.ws_tensor_count(ck)):
                n = lib.ws_tensor_nbytes(ck, i, 0)
                buf = C.create_string_buffer(n)
                d = Dest(C.cast(buf, C.c_void_p), n, 0, 0, None)
                assert lib.ws_load_tensor(ck, i, 0, C.byref(d)) == 0, lib.ws_last_error()
                out.append(buf.raw)
        finally:
            lib.ws_close(ck)
        return out

    assert all_bf16(url("kquant.gguf", store)) == all_bf16(str(models["kquant.gguf"]))
    ck = C.c_void_p()
    assert lib.ws_open(url("nope.gguf", store).encode(), C.byref(ck)) == 4  # WS_ERR_IO
    assert url("nope.gguf", store) in lib.ws_last_error().decode()


def test_keys_from_a_shared_credentials_file_and_profile(s3, tmp_path):
    """No keys in the environment: ~/.aws-style files, AWS_PROFILE picks the section."""
    from seaweed import ACCESS_KEY
    creds = tmp_path / "credentials"
    creds.write_text(f"[default]\naws_access_key_id = wrong\naws_secret_access_key = wrong\n\n"
                     f"[bench]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n")
    e = {k: v for k, v in s3.env().items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    e.update(AWS_SHARED_CREDENTIALS_FILE=str(creds), AWS_CONFIG_FILE=str(tmp_path / "none"), HOME=str(tmp_path))
    r = subprocess.run([str(ws_bin()), "inspect", "--json", url("kquant.gguf")], capture_output=True, text=True,
                       env={**e, "AWS_PROFILE": "bench"}, timeout=HANG)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([str(ws_bin()), "inspect", "--json", url("kquant.gguf")], capture_output=True, text=True,
                       env=e, timeout=HANG)
    failed(r, "remote_denied", url("kquant.gguf"))


@pytest.mark.parametrize("shard", ["config.json", "model.safetensors.index.json"])
def test_an_index_naming_config_or_itself_names_the_object(store, models, tmp_path, shard):
    """Issue 40 item 10: refused naming the object, never a private
    temporary directory of this machine."""
    index = json.loads((models["sharded/"] / "model.safetensors.index.json").read_text())
    index["weight_map"][next(iter(index["weight_map"]))] = shard
    store.put_tree(BUCKET, "selfref/", models["sharded/"])
    store.put_bytes(BUCKET, "selfref/config.json", b"{}")
    store.put_bytes(BUCKET, "selfref/model.safetensors.index.json", json.dumps(index).encode())
    err, _ = convert_fails(store, tmp_path, "selfref/", "remote_outside", obj=url("selfref/" + shard, store))
    assert "listing" not in err["message"] and "/tmp" not in err["message"], err


@pytest.mark.parametrize("name", ["sharded/", "split-gguf/", "fp8/", "kquant.gguf", "plain.safetensors"])
def test_opening_writes_nothing_to_the_temporary_directory(store, tmp_path, name):
    """Issue 40 item 10: the format layer reads the object listing itself.
    A load used to mirror it as a directory of placeholder files under
    TMPDIR (a name another local user could pre-create to block loads, and
    error messages that showed it): with TMPDIR unusable (under a plain
    file) the load still works, and an empty TMPDIR stays empty."""
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    r = ws(store, "load", url(name, store), "--device", "cpu", "--skip-unsupported", env={"TMPDIR": str(blocked / "tmp")})
    assert r.returncode == 0, r.stderr
    empty = tmp_path / "tmp"
    empty.mkdir()
    r = ws(store, "inspect", "--json", url(name, store), env={"TMPDIR": str(empty)})
    assert r.returncode == 0, r.stderr
    assert list(empty.iterdir()) == []


# Keys S3 allows that a URL would escape: s3:// URLs spell them literally,
# as the AWS CLI does (issue 40 item 9).
ODD_KEYS = ["odd/modèle-é.gguf", "odd/m%20x.gguf", "odd/~m.gguf", "odd/m#1.gguf", "odd/m?x=1.gguf", "odd/a+b @!.gguf",
            "odd/m:1.gguf", "odd/m\\1.gguf"]
ODD_PREFIX = "odd dir é%20~#?/"


@pytest.fixture(scope="module")
def odd(store, models):
    for k in ODD_KEYS:
        store.put_file(BUCKET, k, models["kquant.gguf"])
    store.put_tree(BUCKET, ODD_PREFIX, models["sharded/"])
    return store


@pytest.mark.parametrize("key", ODD_KEYS + [ODD_PREFIX])
def test_keys_with_characters_urls_escape_are_read_listed_and_named(odd, models, key, monkeypatch):
    local = models["sharded/" if key == ODD_PREFIX else "kquant.gguf"]
    env_of(odd, monkeypatch)
    u = lambda k: url(k, odd)  # noqa: E731
    want = bits(weightstream.load_file(local, skip_unsupported=True))
    got = bits(weightstream.load_file(u(key), skip_unsupported=True))
    assert got == want
    info = json.loads(ws(odd, "inspect", "--json", u(key)).stdout)
    assert all(f["path"].startswith(u(key.rsplit("/", 1)[0] + "/")) for f in info["files"]), info["files"]
    assert info["path"] == u(key.rstrip("/")) or info["path"] == u(key), info["path"]


def test_a_missing_odd_key_is_named_as_written(odd):
    r = ws(odd, "inspect", "--json", url("odd/absent é%20~#?.gguf", odd))
    failed(r, "remote_not_found", url("odd/absent é%20~#?.gguf", odd))


def test_a_prefix_lists_shards_with_any_key_character(odd, models, monkeypatch):
    """Issue 40 item 9: shard keys with ':' were left out of a prefix's
    listing (an unindexed set then loaded without them, or was "not
    found"), and a key with ':' or '\\' was refused as outside its prefix
    when named. (SeaweedFS stores '\\' in a key as '/', so a listing of it
    cannot be tested here; the key itself reads, in ODD_KEYS.)"""
    shards = sorted(models["sharded/"].glob("*.safetensors"))
    assert len(shards) > 1
    for i, p in enumerate(shards):
        odd.put_file(BUCKET, f"colon/shard:{i} #é.safetensors", p)
    env_of(odd, monkeypatch)
    want = bits(weightstream.load_file(models["sharded/"], skip_unsupported=True))
    assert bits(weightstream.load_file(url("colon/", odd), skip_unsupported=True)) == want
    info = json.loads(ws(odd, "inspect", "--json", url("colon/", odd)).stdout)
    assert [f["path"] for f in info["files"]] == [url(f"colon/shard:{i} #é.safetensors", odd) for i in range(len(shards))]


# Keys S3 holds that object_store's `Path` cannot (an empty component, a
# control character): read through a stand-in location whose request path
# is put back to the key as written (crates/weightstream-remote/src/rawkey.rs).
RAW_KEYS = ["odd/a//b.gguf", "odd//lead.gguf", "odd/c\x01.gguf", "odd/t\t é.gguf"]


@pytest.fixture(scope="module")
def raw(s3, models):
    for k in RAW_KEYS:
        s3.put_file(BUCKET, k, models["kquant.gguf"])
    return s3


@pytest.mark.parametrize("key", RAW_KEYS)
def test_keys_with_empty_components_or_control_characters_are_read(raw, models, key, monkeypatch):
    """Issue 40 item 9: these were refused as remote_bad_url. Each is read
    bit-identical, named as written, and requested under its own name: the
    path the server sees is the key, percent-encoded, never a normalised
    one (SeaweedFS itself stores 'a//b' as 'a/b', so only the request path
    can show that)."""
    for k, v in raw.env().items():
        monkeypatch.setenv(k, v)
    want = bits(weightstream.load_file(models["kquant.gguf"], skip_unsupported=True))
    assert bits(weightstream.load_file(url(key), skip_unsupported=True)) == want
    raw.proxy.take_log()
    r = ws(raw, "inspect", "--json", url(key), endpoint=raw.proxy.endpoint)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["path"] == url(key)
    from urllib.parse import quote
    paths = {p for _, p, _ in raw.proxy.take_log() if "list-type" not in p}
    assert paths == {f"/{BUCKET}/" + quote(key, safe="/~")}, paths


def test_a_key_under_an_odd_directory_is_read_alone(raw):
    """`odd//lead.gguf` is in the directory `odd//`, which object_store
    cannot list as written: it is read alone, never with the listing of
    `odd/` (another directory on S3)."""
    raw.proxy.take_log()
    r = ws(raw, "inspect", "--json", url("odd//lead.gguf"), endpoint=raw.proxy.endpoint)
    assert r.returncode == 0, r.stderr
    assert not any("list-type" in p for _, p, _ in raw.proxy.take_log())


@pytest.mark.parametrize("key,why", [("odd/../x.gguf", "dot segment"), ("odd/./x.gguf", "dot segment"),
                                     ("odd//", "cannot be listed"), ("odd/c\x01/", "cannot be listed")])
def test_keys_no_request_can_name_are_refused_by_kind(s3, key, why):
    """Issue 40 item 9. A '.'/'..' component: URL parsers resolve it, so a
    request would name another key (and SeaweedFS refuses to store one:
    PutObject answers InvalidRequest). A prefix with an empty component or
    a control character: object_store cannot list it. Each is remote_bad_url
    saying why; nothing else is read in its place."""
    from botocore.exceptions import ClientError
    if why == "dot segment":
        with pytest.raises(ClientError, match="InvalidRequest"):
            s3.client().put_object(Bucket=BUCKET, Key=key, Body=b"x")
    err = failed(ws(s3, "inspect", "--json", url(key)), "remote_bad_url", url(key))
    assert why in err["message"], err


# -- GCS and Azure: each cloud's credential chain and URL spellings ----------


def cli_ok(env: dict, u: str) -> dict:
    r = subprocess.run([str(ws_bin()), "inspect", "--json", u], capture_output=True, text=True, env=env, timeout=HANG)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def azure_spellings(az) -> list[str]:
    """One object as the Azure tools write it (Azurite's account is
    devstoreaccount1)."""
    from emulators import AZ_ACCOUNT as A
    return [f"az://{BUCKET}/kquant.gguf", f"abfs://{BUCKET}/kquant.gguf", f"abfss://{BUCKET}/kquant.gguf",
            f"abfss://{BUCKET}@{A}.dfs.core.windows.net/kquant.gguf", f"az://{BUCKET}@{A}.blob.core.windows.net/kquant.gguf",
            f"https://{A}.blob.core.windows.net/{BUCKET}/kquant.gguf"]


def test_azure_spellings_load_the_same_bits(azure, models, monkeypatch):
    env_of(azure, monkeypatch)
    want = bits(weightstream.load_file(models["kquant.gguf"]))
    for u in azure_spellings(azure):
        assert bits(weightstream.load_file(u)) == want, u
        assert cli_ok(azure.env(), u)["path"] == u


def azure_credentials(az) -> dict:
    """Ways to give Azurite's account: name -> (environment, URL)."""
    from emulators import AZ_ACCOUNT, AZ_KEY, account_sas, clean_env
    emulator = {**clean_env(), "AZURE_STORAGE_USE_EMULATOR": "true", "AZURITE_BLOB_STORAGE_URL": az.endpoint}
    blob_endpoint = f"{az.endpoint}/{AZ_ACCOUNT}"
    https = f"https://{AZ_ACCOUNT}.blob.core.windows.net/{BUCKET}/"
    return {
        "connection-string": ({**clean_env(), "AZURE_STORAGE_CONNECTION_STRING":
                               f"DefaultEndpointsProtocol=http;AccountName={AZ_ACCOUNT};AccountKey={AZ_KEY};"
                               f"BlobEndpoint={blob_endpoint};"}, f"az://{BUCKET}/sharded/"),
        "development-storage": ({**clean_env(), "AZURITE_BLOB_STORAGE_URL": az.endpoint,
                                 "AZURE_STORAGE_CONNECTION_STRING": "UseDevelopmentStorage=true"}, f"az://{BUCKET}/sharded/"),
        "object-store-names": ({**clean_env(), "AZURE_STORAGE_ACCOUNT_NAME": AZ_ACCOUNT, "AZURE_STORAGE_ACCOUNT_KEY": AZ_KEY,
                                "AZURE_STORAGE_ENDPOINT": blob_endpoint}, f"az://{BUCKET}/sharded/"),
        "sas-variable": ({**emulator, "AZURE_STORAGE_SAS_TOKEN": account_sas()}, f"az://{BUCKET}/sharded/"),
        "sas-in-url": (emulator, f"{https}sharded/?{account_sas()}"),
    }


@pytest.mark.parametrize("way", ["connection-string", "development-storage", "object-store-names", "sas-variable",
                                 "sas-in-url"])
def test_azure_credentials_each_way(azure, models, way):
    env, u = azure_credentials(azure)[way]
    info = cli_ok(env, u)
    assert [Path(f["path"]).name for f in info["files"]] == sorted(p.name for p in models["sharded/"].glob("*.safetensors"))
    assert "sig=" not in json.dumps(info)


def test_a_forged_sas_token_is_denied_and_never_printed(azure):
    from emulators import AZ_ACCOUNT, account_sas, clean_env
    sas = account_sas()
    sig = sas.split("sig=")[1]
    forged = sas.replace("sig=" + sig, "sig=" + ("A" if sig[0] != "A" else "B") + sig[1:])
    env = {**clean_env(), "AZURE_STORAGE_USE_EMULATOR": "true", "AZURITE_BLOB_STORAGE_URL": azure.endpoint}
    obj = f"https://{AZ_ACCOUNT}.blob.core.windows.net/{BUCKET}/kquant.gguf"
    r = subprocess.run([str(ws_bin()), "inspect", "--json", f"{obj}?{forged}"], capture_output=True, text=True, env=env,
                       timeout=HANG)
    failed(r, "remote_denied", obj, secrets=(sig, forged.split("sig=")[1], sas, forged))
    r = subprocess.run([str(ws_bin()), "inspect", "--json", f"az://{BUCKET}/kquant.gguf"], capture_output=True, text=True,
                       env={**env, "AZURE_STORAGE_SAS_TOKEN": forged}, timeout=HANG)
    failed(r, "remote_denied", f"az://{BUCKET}/kquant.gguf", secrets=(sig, forged.split("sig=")[1], forged))


def test_gcs_credentials_each_way(gcs, tmp_path):
    """object_store's own names (GOOGLE_BASE_URL, GOOGLE_SKIP_SIGNATURE); a
    service-account file that names the endpoint (object_store's emulator
    convention); and the metadata server, a stand-in on loopback that hands
    out a token (fake-gcs-server accepts any)."""
    from emulators import clean_env, closed_metadata
    u = f"gs://{BUCKET}/kquant.gguf"
    base = {**clean_env(), **closed_metadata()}
    cli_ok({**base, "GOOGLE_BASE_URL": gcs.endpoint, "GOOGLE_SKIP_SIGNATURE": "true"}, u)
    sa = tmp_path / "sa.json"
    sa.write_text(json.dumps({"disable_oauth": True, "gcs_base_url": gcs.endpoint, "client_email": "", "private_key": "",
                              "private_key_id": ""}))
    cli_ok({**base, "GOOGLE_SERVICE_ACCOUNT": str(sa)}, u)
    with MetadataServer() as md:
        cli_ok({**base, "GOOGLE_BASE_URL": gcs.endpoint, "GCE_METADATA_HOST": f"127.0.0.1:{md.port}"}, u)
        assert md.asked, "the metadata server was not asked for a token"


def test_a_bad_gcs_service_account_is_typed_and_never_printed(gcs, tmp_path):
    """GOOGLE_APPLICATION_CREDENTIALS naming a service account whose key is
    not one: refused before any request, the key not printed."""
    from emulators import clean_env, closed_metadata
    body = "TUlJRXZRSUJBREFOQmdrcWhraUc5dzBCQVFFRkFBU0NCS2N3Z2dTakFnRUFBb0lCQVFDNotAKey"
    sa = tmp_path / "adc.json"
    sa.write_text(json.dumps({"type": "service_account", "project_id": "p", "private_key_id": "k" * 40,
                              "private_key": f"-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----\n",
                              "client_email": "loader@p.iam.gserviceaccount.com", "token_uri": "http://127.0.0.1:9/token"}))
    env = {**clean_env(), **closed_metadata(), "GOOGLE_BASE_URL": gcs.endpoint, "GOOGLE_APPLICATION_CREDENTIALS": str(sa),
           **FAULT_ENV}
    r = subprocess.run([str(ws_bin()), "inspect", "--json", f"gs://{BUCKET}/kquant.gguf"], capture_output=True, text=True,
                       env=env, timeout=HANG)
    err = failed(r, "remote_denied", f"gs://{BUCKET}/kquant.gguf", secrets=(body, "k" * 40))
    assert "credential" in err["message"].lower(), err


class MetadataServer:
    """A GCE metadata server stand-in on 127.0.0.1: a token for anyone who
    sends `Metadata-Flavor: Google`."""

    def __enter__(self):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        outer = self
        self.asked = False

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                ok = self.headers.get("Metadata-Flavor") == "Google" and "/service-accounts/default/token" in self.path
                outer.asked |= ok
                body = json.dumps({"access_token": "metadata-token", "expires_in": 3600, "token_type": "Bearer"}).encode()
                self.send_response(200 if ok else 404)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("u,why", [("gs://models/a//b.gguf", "empty component"), ("az://models/a\x01b.gguf", "control"),
                                   ("gs://Models/k.gguf", "bucket name"), ("az://Models/k.gguf", "container name"),
                                   ("abfss://models@example.com/k.gguf", "ACCOUNT.blob.core.windows.net")])
def test_gcs_and_azure_urls_no_request_can_name_are_refused(u, why):
    """Unlike S3 (raw keys above), GCS and Azure sign the request path, so a
    key object_store cannot name is refused, saying why."""
    r = subprocess.run([str(ws_bin()), "inspect", "--json", u], capture_output=True, text=True, timeout=HANG,
                       env={"PATH": os.environ["PATH"]})
    err = failed(r, "remote_bad_url", u)
    assert why in err["message"], err


def test_the_vllm_plugin_passes_every_store_url_through():
    """The vLLM plugin's `file` option (weightstream/serving/options.py, shared with the SGLang plugin)
    hands URLs to weightstream untouched; its scheme list is the loader's
    (plugins/vllm/tests/test_vllm_s3.py runs vLLM itself on s3:// URLs)."""
    sys.path.insert(0, str(ROOT / "plugins" / "vllm"))
    from weightstream.serving.options import Options, find_checkpoint
    for u in ["s3://m/k.gguf", "gs://m/k.gguf", "az://m/p/", "abfs://m/k.gguf", "abfss://m@a1.dfs.core.windows.net/k.gguf",
              "https://a1.blob.core.windows.net/m/k.gguf?sv=1&sig=x"]:
        assert find_checkpoint("/nonexistent-config-dir", Options(file=u)) == u


# -- the transformers front: weightstream.transformers.load_model on URLs ----


def test_side_files_come_from_the_store_typed(store, models, monkeypatch):
    """What the transformers front reads beside the weights (config.json)
    comes through weightstream's remote reader: the object's bytes, None
    for an absent one, and typed errors naming the object (too large, a
    name outside the prefix, wrong credentials) with no secret printed."""
    from weightstream._native import read_side_files
    env_of(store, monkeypatch)
    local = (models["hf-llama/"] / "config.json").read_bytes()
    for u in [url("hf-llama/", store), url("hf-llama/model.safetensors", store)]:
        assert read_side_files(u, ["config.json", "generation_config.json"], 1 << 20) == [local, None], u
    with pytest.raises(weightstream.WeightstreamError) as e:
        read_side_files(url("hf-llama/", store), ["config.json"], 10)
    assert e.value.kind == "remote_server" and url("hf-llama/config.json", store) in str(e.value), e.value
    with pytest.raises(weightstream.WeightstreamError) as e:
        read_side_files(url("hf-llama/", store), ["../kquant.gguf"], 1 << 20)
    assert e.value.kind == "remote_outside", e.value
    if store.secret is not None:  # fake-gcs-server checks no credentials
        env_of(store, monkeypatch, secret=WRONG[store.kind])
        with pytest.raises(weightstream.WeightstreamError) as e:
            read_side_files(url("hf-llama/", store), ["config.json"], 1 << 20)
        assert e.value.kind == "remote_denied" and url("hf-llama/config.json", store) in str(e.value), e.value
        assert not [x for x in (store.secret, WRONG[store.kind]) if x in str(e.value)], e.value


def torch_python() -> Path:
    """A Python with torch and transformers: the vLLM venv's
    (scripts/setup_vllm.sh; $WEIGHTSTREAM_VLLM_VENV). The object-store
    suite's venv has neither."""
    py = Path(os.environ.get("WEIGHTSTREAM_VLLM_VENV", ROOT / ".venv-vllm")) / "bin" / "python"
    if not py.exists():
        pytest.skip(f"{py}: no Python with torch and transformers here (scripts/setup_vllm.sh makes it)")
    return py


def split_first(models) -> str:
    return sorted(p.name for p in models["split-gguf/"].glob("*-00001-of-*.gguf"))[0]


def test_transformers_load_model_takes_urls(store, models):
    """`weightstream.transformers.load_model(url)` of a GGUF object, a split
    set's first object, a safetensors prefix and a safetensors object (its
    config.json read from the store) gives the local load's model: every
    parameter and buffer bit for bit, the same config. Safetensors without
    config.json, and a GGUF architecture transformers derives its config
    for only from a local file, are refused with UnsupportedModel naming
    the object (a presigned HTTP URL, which signs one file, needs config=);
    no secret (a key, an Azure SAS signature, a presigned URL's signature)
    is ever printed. transformers' own from_pretrained(gguf_file=URL) under
    patch() is served by weightstream, the same model. Run in the vLLM
    venv's Python with this weightstream put first on its path
    (tests/s3/transformers_loads.py: one process per store)."""
    py = torch_python()
    first = split_first(models)
    same = [(models["kquant.gguf"], url("kquant.gguf", store)),
            (models["split-gguf/"] / first, url(f"split-gguf/{first}", store)),
            (models["hf-llama/"], url("hf-llama/", store)),
            (models["hf-llama/"] / "model.safetensors", url("hf-llama/model.safetensors", store))]
    refused = [url("noconfig/", store), url("gptoss/model.gguf", store)]
    secrets = [s for s in (store.secret,) if s]
    if store.kind == "azure":  # Azure's own spelling, its SAS token the prefix's credential
        from emulators import AZ_ACCOUNT, account_sas
        sas = account_sas()
        https = f"https://{AZ_ACCOUNT}.blob.core.windows.net/{BUCKET}/"
        same.append((models["hf-llama/"], f"{https}hf-llama/?{sas}"))
        refused.append(f"{https}noconfig/?{sas}")
        sig = sas.split("sig=")[1].split("&")[0]
        secrets += [sig, unquote(sig)]
    blocks = []
    if store.kind == "s3":  # presigned HTTP URLs: a GGUF loads; safetensors there have no config.json to read
        signed = [presigned(store, "kquant.gguf"), presigned(store, "hf-llama/model.safetensors")]
        same.append((models["kquant.gguf"], signed[0]))
        refused.append(signed[1])
        secrets += [q.split("Signature=")[1].split("&")[0] for q in signed]
        # docs/storage.md's example, under the names it uses (in this process: one import)
        store.put_tree(BUCKET, "tiny-llama/", models["hf-llama/"])
        store.put_file(BUCKET, "tiny-llama-q4_k_m.gguf", models["kquant.gguf"])
        blocks = [[b.where, b.body] for b in doc_examples.blocks_for(__file__)]
        assert [b[0].split(":")[0] for b in blocks] == ["docs/storage.md"], blocks
    package = Path(weightstream.__file__).parent.parent
    env = {**store.env(), "PYTHONPATH": str(package)}
    r = subprocess.run([str(py), str(ROOT / "tests" / "s3" / "transformers_loads.py"),
                        json.dumps({"same": [[str(a), b] for a, b in same], "refused": refused, "run": blocks,
                                    "patched": [[str(models["kquant.gguf"]), url("kquant.gguf", store)]]})],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    assert not [s for s in secrets if s in r.stdout + r.stderr]
    out = json.loads(r.stdout.splitlines()[-1])
    assert out["weightstream"].startswith(str(package)), out["weightstream"]  # this build, not the venv's own
    for (local, u), got in zip(same, out["same"]):
        assert got["class"] == "LlamaForCausalLM" and got["tensors"] > 10, (u, got)
        assert got["differ"] == [] and got["config_differ"] == [], (u, got)
        assert got["name_or_path"] == weightstream._source_name(u), (u, got)
    noconfig, gptoss = out["refused"][:2]
    assert noconfig["type"] == "UnsupportedModel" and url("noconfig/config.json", store) in noconfig["message"], noconfig
    assert gptoss["type"] == "UnsupportedModel" and url("gptoss/model.gguf", store) in gptoss["message"], gptoss
    assert "local file" in gptoss["message"], gptoss
    for u, got in zip(refused[2:], out["refused"][2:]):
        if store.kind == "azure":
            assert got["type"] == "UnsupportedModel" and f"{https}noconfig/config.json" in got["message"], got
        else:
            assert got["type"] == "UnsupportedModel" and "pass config=" in got["message"], got
            assert weightstream._source_name(u) in got["message"], got
    assert out["run"] == ["LlamaForCausalLM LlamaForCausalLM\n"] * len(blocks), out["run"]
    (via_patch,) = out["patched"]  # from_pretrained(gguf_file=URL) under patch()
    assert via_patch["fallbacks"] == [] and via_patch["differ"] == [] and via_patch["tensors"] > 10, via_patch
