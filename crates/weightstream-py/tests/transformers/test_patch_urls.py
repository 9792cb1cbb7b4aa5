"""patch() with a URL as gguf_file (issue 55 items 1 and 7): no fallback
reason prints the URL's query (an Azure SAS `sig=`, a presigned
`X-Amz-Signature` is a credential), and a Hugging Face download link is
refused before any request, saying what to pass instead. (Local files'
fallbacks: test_transformers.py.)"""
from __future__ import annotations

import threading
import warnings
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaForCausalLM

import weightstream
import weightstream.transformers as wst

SECRET = "SeCrEtSiGnAtUrE0123456789"
QUERIES = {"azure_sas": f"sv=2024-11-04&sr=b&sp=r&sig={SECRET}",
           "s3_presigned": f"X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAFAKE&X-Amz-Signature={SECRET}"}


class Ranged:
    """A loopback server of one file with ranged GETs, an ETag and
    Last-Modified (what weightstream's http(s) source pins)."""

    def __init__(self, data: bytes):
        host = self
        self.data = data

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                data = host.data
                lo, hi = 0, len(data) - 1
                rng = self.headers.get("Range")
                if rng:
                    a, b = rng.split("=")[1].split("-")
                    lo, hi = int(a), min(int(b), len(data) - 1)
                self.send_response(206 if rng else 200)
                if rng:
                    self.send_header("Content-Range", f"bytes {lo}-{hi}/{len(data)}")
                self.send_header("Content-Length", str(hi - lo + 1))
                self.send_header("ETag", '"v0"')
                self.send_header("Last-Modified", formatdate(1_700_000_000, usegmt=True))
                self.end_headers()
                self.wfile.write(data[lo:hi + 1])

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, query: str) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/dir/m.gguf?{query}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def gemma2(tmp_path_factory) -> bytes:
    """A GGUF of an architecture weightstream hands back to transformers
    (Gemma2TensorProcessor changes values)."""
    import gguf

    path = tmp_path_factory.mktemp("gemma2") / "gemma2.gguf"
    w = gguf.GGUFWriter(str(path), arch="gemma2")
    w.add_block_count(1)
    w.add_tensor("output_norm.weight", np.ones(8, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path.read_bytes()


REASONS = {
    "no dtype": ({}, "no dtype given"),
    "device_map": ({"dtype": torch.bfloat16, "device_map": "balanced"}, "device_map='balanced'"),
    "unknown keyword": ({"dtype": torch.bfloat16, "not_an_argument": 1}, "not_an_argument"),
    "unsupported model": ({"dtype": torch.bfloat16}, "Gemma2TensorProcessor"),
}


@pytest.mark.parametrize("query", list(QUERIES))
@pytest.mark.parametrize("reason", list(REASONS))
@pytest.mark.parametrize("cls", [AutoModelForCausalLM, LlamaForCausalLM])
def test_no_fallback_reason_prints_the_query(gemma2, monkeypatch, query, reason, cls):
    """Every reason patch() has to hand a call back: for a URL the call is
    refused (UnsupportedModel) instead, since transformers' own loader
    reads no URLs and its OSError quotes gguf_file whole; the message
    names the reason and the object, never the query."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("WEIGHTSTREAM_REMOTE_RETRIES", "1")
    kwargs, needle = REASONS[reason]
    with Ranged(gemma2) as server, wst.patch(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(wst.UnsupportedModel) as e:
            cls.from_pretrained(".", gguf_file=server.url(QUERIES[query]), **kwargs)
    msg = str(e.value)
    assert needle in msg and "reads no URLs" in msg, msg
    assert f"gguf_file='http://127.0.0.1:{server.server.server_port}/dir/m.gguf')" in msg, msg
    assert not [w for w in caught if issubclass(w.category, wst.FallbackWarning)]
    everything = msg + " ".join(str(w.message) for w in caught)
    assert SECRET not in everything and "sig=" not in everything, everything


@pytest.mark.parametrize("link, repo, name, rev", [
    ("https://huggingface.co/Qwen/Qwen2-0.5B-GGUF/resolve/main/qwen2-0_5b-q4_0.gguf?download=true",
     "Qwen/Qwen2-0.5B-GGUF", "qwen2-0_5b-q4_0.gguf", None),
    ("https://hf.co/org/name/resolve/abc123/sub/m.gguf", "org/name", "sub/m.gguf", "abc123"),
])
def test_a_hugging_face_download_link_says_what_to_pass(link, repo, name, rev, monkeypatch):
    """Refused before any request (the network is unreachable here: a
    request would fail differently), with the repo id and file name."""
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # any request would fail with remote_*, not this
    for call in (lambda: AutoModelForCausalLM.from_pretrained(".", gguf_file=link, dtype=torch.bfloat16),
                 lambda: wst.load_model(link, device="cpu")):
        with wst.patch(), pytest.raises(weightstream.WeightstreamError) as e:
            call()
        msg = str(e.value)
        assert e.value.kind == "remote_redirect", msg
        assert f"from_pretrained({repo!r}, gguf_file={name!r}" in msg and f"hf_hub_download({repo!r}, {name!r}" in msg, msg
        assert (f"revision={rev!r}" in msg) == (rev is not None), msg
        assert "download=true" not in msg, msg
