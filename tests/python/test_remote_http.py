"""http(s):// sources against a hostile loopback server (issue 40).

The server is in-process (a thread): it serves a GGUF file with ranged GETs
and, told so, swaps to a second version of the object after the first
request while ignoring If-Match / If-Unmodified-Since, dropping or changing
the ETag, or moving Last-Modified. Every switch happens on a request count,
never on time. A load must fail with remote_changed, never mix versions.

It also carries a fake signature in every URL's query: no output, repr or
error may contain it (docs/storage.md: the query string is never printed)."""
from __future__ import annotations

import ctypes as C
import json
import os
import subprocess
import threading
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import weightstream
from harness import ROOT, ws_bin

SIG = "FAKESIGNATURE0123456789abcdef"
QUERY = f"X-Amz-Signature={SIG}&X-Amz-Credential=AKIAFAKE"
ENV = {"PATH": os.environ["PATH"], "NO_PROXY": "127.0.0.1", "WEIGHTSTREAM_REMOTE_RETRIES": "1",
       "WEIGHTSTREAM_REMOTE_PART_SIZE": str(64 << 10)}


class Hostile:
    """Serves `versions[0]` for the first request, `versions[1]` after
    (`mode` says which validators each answer carries)."""

    def __init__(self, versions: list[bytes], mode: str):
        self.versions, self.mode, self.n, self.lock = versions, mode, 0, threading.Lock()
        host = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                with host.lock:
                    i = min(host.n, len(host.versions) - 1)
                    host.n += 1
                if self.path.split("?")[0] != "/m.gguf":
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                data = host.versions[i]
                lo, hi = 0, len(data) - 1
                rng = None if host.mode == "ignores_range" else self.headers.get("Range")
                if rng:
                    a, b = rng.split("=")[1].split("-")
                    lo, hi = int(a), min(int(b), len(data) - 1)
                self.send_response(206 if rng else 200)
                if rng:
                    self.send_header("Content-Range", f"bytes {lo}-{hi}/{len(data)}")
                self.send_header("Content-Length", str(hi - lo + 1))
                for k, v in host.validators(i):
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data[lo:hi + 1])

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def validators(self, i: int) -> list[tuple[str, str]]:
        lm = ("Last-Modified", formatdate(1_700_000_000 + 1000 * i, usegmt=True))
        return {
            "stable": [("ETag", '"v0"'), lm],
            "etag_dropped": [("ETag", '"v0"')] if i == 0 else [],
            "etag_changed": [("ETag", f'"v{i}"')],
            "moving_last_modified": [lm],
            "length_changed": [("ETag", '"v0"'), lm],
            "ignores_range": [("ETag", '"v0"'), lm],
        }[self.mode]

    def url(self, name="m.gguf") -> str:
        return f"http://127.0.0.1:{self.server.server_port}/{name}?{QUERY}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def gguf(fixtures) -> bytes:
    out, _ = fixtures
    return (out / "all_types.gguf").read_bytes()


def second_version(data: bytes, grow: int = 0) -> bytes:
    """The same header, other tensor data: the last half of the file flipped."""
    h = len(data) // 2
    return data[:h] + bytes(b ^ 0x5A for b in data[h:]) + bytes(grow)


def ws(*args) -> subprocess.CompletedProcess:
    return subprocess.run([str(ws_bin()), *map(str, args)], capture_output=True, text=True, env=ENV, timeout=120)


@pytest.mark.parametrize("mode", ["etag_dropped", "etag_changed", "moving_last_modified", "length_changed"])
def test_two_versions_are_never_mixed(gguf, mode, tmp_path):
    v1 = second_version(gguf, grow=4096 if mode == "length_changed" else 0)
    with Hostile([gguf, v1], mode) as srv:
        out = tmp_path / "out"
        out.mkdir()
        r = ws("convert", "--json", "--skip-unsupported", srv.url(), "-o", out / "m.safetensors")
    assert r.returncode != 0, f"{mode}: two versions mixed into one output"
    err = json.loads(r.stderr.strip().splitlines()[-1])["error"]
    assert err["kind"] == "remote_changed", err
    assert f"/m.gguf" in err["message"] and SIG not in r.stderr + r.stdout, err
    assert list(out.iterdir()) == [], "partial output left behind"


def test_a_stable_server_still_loads(gguf, tmp_path):
    with Hostile([gguf], "stable") as srv:
        r = ws("convert", "--json", "--skip-unsupported", srv.url(), "-o", tmp_path / "m.safetensors")
    assert r.returncode == 0, r.stderr


def test_the_signature_is_printed_nowhere(gguf, tmp_path):
    with Hostile([gguf], "stable") as srv:
        outs = []
        for args in (["load", "--device", "cpu", "--skip-unsupported"], ["load", "--device", "cpu", "--skip-unsupported", "--json"], ["inspect"], ["inspect", "--json"]):
            r = ws(*args, srv.url())
            assert r.returncode == 0, r.stderr
            outs.append(r.stdout + r.stderr)
        assert "/m.gguf" in outs[1]
        r = ws("convert", "--json", "--skip-unsupported", srv.url(), "-o", tmp_path / "m.safetensors")
        assert r.returncode == 0, r.stderr
        outs += [r.stdout + r.stderr, (tmp_path / "m.safetensors").read_bytes().decode("latin-1")]
        # Errors: a missing object, through the CLI and Python.
        r = ws("inspect", "--json", srv.url("gone.gguf"))
        assert r.returncode != 0 and "remote_not_found" in r.stderr, r.stderr
        outs.append(r.stdout + r.stderr)
        old = dict(os.environ)
        os.environ.update(ENV)
        try:
            ck = weightstream.open(srv.url(), skip_unsupported=True)
            # ck.path and ck.sources()' paths are what the vLLM plugin logs.
            outs += [repr(ck), str(ck), ck.path, repr(ck.sources())]
            assert ck.path == srv.url().split("?")[0]
            with pytest.raises(weightstream.WeightstreamError) as e:
                weightstream.open(srv.url("gone.gguf"))
            outs.append(str(e.value) + repr(e.value) + repr(vars(e.value)))
            outs.append(c_api_error(srv.url("gone.gguf")))
        finally:
            os.environ.clear()
            os.environ.update(old)
    for o in outs:
        assert SIG not in o and "AKIAFAKE" not in o, o[:2000]


def c_api_error(url: str) -> str:
    lib_path = ROOT / "target" / "release" / "libweightstream_c.so"
    if not lib_path.exists():
        pytest.fail(f"{lib_path} is missing: cargo build --release -p weightstream-capi --lib")
    lib = C.CDLL(str(lib_path))
    lib.ws_open.argtypes = [C.c_char_p, C.POINTER(C.c_void_p)]
    lib.ws_last_error.restype = C.c_char_p
    ck = C.c_void_p()
    assert lib.ws_open(url.encode(), C.byref(ck)) != 0
    msg = lib.ws_last_error().decode()
    assert "/gone.gguf" in msg, msg
    return msg


def test_a_server_ignoring_range_is_refused_in_a_whole_sentence(gguf):
    with Hostile([gguf], "ignores_range") as srv:
        r = ws("inspect", "--json", srv.url())
    err = json.loads(r.stderr.strip().splitlines()[-1])["error"]
    assert r.returncode != 0 and err["kind"] == "remote_server", err
    # object_store's own text ended "Range request not supported by ".
    assert "does not answer range requests" in err["message"] and not err["message"].rstrip().endswith("by"), err
