"""Two loads that start together with one cache directory fetch each byte
once (issue 59 item 4; crates/weightstream-remote/src/fill_lock.rs),
against SeaweedFS behind the fault proxy of test_s3.py, which counts the
bytes it sends and holds requests back where a test needs two loads in
flight at once.

Data-parallel replicas and two servers on one machine start together; each
once found the cache entry empty and fetched everything (2.00x). Now a load
about to fetch a missing range locks it in the entry file; the other waits,
then reads what the first recorded. A filler killed mid-load releases its
locks with its death; the waiter fetches what is still missing, and nothing
torn is ever served."""
from __future__ import annotations

import signal
import subprocess
import threading
from pathlib import Path

import pytest

from harness import ws_bin
from test_s3 import HANG, serve_sample, shut, url

NAME = "q4_0.gguf"


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    server = serve_sample(tmp_path_factory, NAME)
    # The local convert every remote one must equal.
    out = server.local.with_suffix(".safetensors")
    subprocess.run([str(ws_bin()), "convert", server.local, "-o", out], check=True, capture_output=True)
    server.want = out.read_bytes()
    yield server
    shut(server)


def convert(s3, out: Path, cache: Path) -> subprocess.Popen:
    return subprocess.Popen([str(ws_bin()), "convert", url(NAME), "-o", out, "--cache", cache],
                            env=s3.env(endpoint=s3.proxy.endpoint), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def test_two_loads_started_together_fetch_each_byte_once(s3, tmp_path):
    """The proxy answers no ranged GET until both loads have opened the
    object (each sends one HEAD): both are then in flight, wanting the same
    bytes from an empty entry."""
    both = threading.Event()
    heads = []

    def gate(method, path, rng):
        if method == "HEAD":
            heads.append(path)
            if len(heads) == 2:
                both.set()
        elif method == "GET" and rng:
            both.wait(timeout=HANG)

    s3.proxy.take_sent()
    s3.proxy.on_request = gate
    try:
        loads = [convert(s3, tmp_path / f"{k}.safetensors", tmp_path / "cache") for k in range(2)]
        errs = [p.communicate(timeout=HANG)[1] for p in loads]
    finally:
        s3.proxy.on_request = None
    assert [p.returncode for p in loads] == [0, 0], errs
    assert both.is_set()
    for k in range(2):
        assert (tmp_path / f"{k}.safetensors").read_bytes() == s3.want
    # Each byte once (it was 2.00x): the whole file, no more.
    assert s3.proxy.take_sent() == s3.local.stat().st_size


def test_a_filler_killed_mid_load_lets_the_other_finish_with_the_right_bits(s3, tmp_path):
    """The first load is held at its first data GET (after its header, which
    it recorded), holding that range's lock; the second starts, finds the
    header in the entry and waits for the range; the first is SIGKILLed and
    the proxy let go: the second fetches the range itself and gives the
    local file's bits."""
    first_data = threading.Event()
    release = threading.Event()

    def hold(method, path, rng):
        if method == "GET" and rng and not rng.startswith("bytes=0-"):
            first_data.set()
            release.wait(timeout=HANG)

    s3.proxy.on_request = hold
    try:
        a = convert(s3, tmp_path / "a.safetensors", tmp_path / "cache")
        assert first_data.wait(timeout=HANG), a.communicate()[1]
        b = convert(s3, tmp_path / "b.safetensors", tmp_path / "cache")
        a.send_signal(signal.SIGKILL)
        a.wait(timeout=HANG)
        release.set()
        _, err = b.communicate(timeout=HANG)
    finally:
        s3.proxy.on_request = None
        release.set()
    assert a.returncode == -signal.SIGKILL
    assert b.returncode == 0, err
    assert (tmp_path / "b.safetensors").read_bytes() == s3.want
    assert not (tmp_path / "a.safetensors").exists()
