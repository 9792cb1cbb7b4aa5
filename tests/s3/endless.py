"""A store that speaks just enough S3, GCS (its XML API) and Azure Blob
for an open, and misbehaves on purpose (issue 55, item 3):

- its listings never end: every page names the same continuation token
  (S3's and GCS's NextContinuationToken, Azure's NextMarker); with
  `tokens="fresh"` a new one each page; with `tokens="none"` a listing is
  one page, and ends;
- with `stall` set to "list", "head" or "get", the first such request is
  held unanswered until the server stops: `stalled` is set when it
  arrives, so a test can signal a process known to be waiting there.

Objects: `model.gguf`, and `dir/` holding `model.gguf`, each of SIZE
bytes (a HEAD answers for any key). No credential is checked."""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from emulators import AZ_ACCOUNT, AZ_KEY, clean_env, closed_metadata

SIZE = 1 << 20
ETAG = '"0123456789abcdef"'
HTTP_DATE = "Sun, 01 Nov 2026 00:00:00 GMT"


class EndlessStore:
    def __init__(self, kind: str, stall: str | None = None, tokens: str = "same"):
        assert kind in ("s3", "gcs", "azure") and tokens in ("same", "fresh", "none")
        self.kind, self.stall, self.tokens = kind, stall, tokens
        self.lock = threading.Lock()
        self.pages = 0  # listing pages served
        self.stalled = threading.Event()  # a request is being held
        self.release = threading.Event()  # set when the server stops
        store = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_HEAD(self):
                store.hold("head")
                self.reply(200, b"", {"Content-Length": str(SIZE)}, body=False)

            def do_GET(self):
                q = parse_qs(urlsplit(self.path).query)
                if "list-type" in q or q.get("comp") == ["list"]:
                    store.hold("list")
                    self.reply(200, store.page(q), {"Content-Type": "application/xml"})
                    return
                store.hold("get")
                rng = self.headers.get("Range", "bytes=0-0")[len("bytes="):].split("-")
                start, end = int(rng[0]), min(int(rng[1] or SIZE - 1), SIZE - 1)
                self.reply(206, b"\0" * (end - start + 1), {"Content-Range": f"bytes {start}-{end}/{SIZE}"})

            def reply(self, status: int, data: bytes, headers: dict, body: bool = True):
                self.send_response(status)
                for k, v in {"ETag": ETAG, "Last-Modified": HTTP_DATE, "x-goog-generation": "1",
                             "Content-Length": str(len(data)), **headers}.items():
                    self.send_header(k, v)
                self.end_headers()
                if body:
                    self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def hold(self, phase: str) -> None:
        """Hold this request if it is the phase to stall at (the first one)."""
        with self.lock:
            held = self.stall == phase and not self.stalled.is_set()
            if held:
                self.stalled.set()
        if held:
            self.release.wait()

    def page(self, q: dict) -> bytes:
        with self.lock:
            self.pages += 1
            n = self.pages
        token = {"same": "the-same-token", "fresh": f"token-{n}", "none": ""}[self.tokens]
        prefix = q.get("prefix", [""])[0]
        key = f"{prefix}shard-{n:05}.safetensors"
        if self.kind == "azure":
            return (f'<?xml version="1.0" encoding="utf-8"?><EnumerationResults><Prefix>{prefix}</Prefix>'
                    f'<Delimiter>/</Delimiter><Blobs><Blob><Name>{key}</Name><Properties>'
                    f'<Last-Modified>{HTTP_DATE}</Last-Modified><Etag>0x8D</Etag><Content-Length>10</Content-Length>'
                    f'<Content-Type>application/octet-stream</Content-Type></Properties></Blob></Blobs>'
                    + (f'<NextMarker>{token}</NextMarker>' if token else '') + '</EnumerationResults>').encode()
        return ('<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>models</Name>'
                f'<Prefix>{prefix}</Prefix><KeyCount>1</KeyCount><MaxKeys>1000</MaxKeys>'
                f'<IsTruncated>{str(bool(token)).lower()}</IsTruncated>'
                f'<Contents><Key>{key}</Key><LastModified>2026-11-01T00:00:00.000Z</LastModified>'
                f'<ETag>{ETAG}</ETag><Size>10</Size></Contents>'
                + (f'<NextContinuationToken>{token}</NextContinuationToken>' if token else '')
                + '</ListBucketResult>').encode()

    def url(self, key: str) -> str:
        return {"s3": "s3", "gcs": "gs", "azure": "az"}[self.kind] + f"://models/{key}"

    def env(self) -> dict:
        """A weightstream process's environment for this store alone."""
        e = clean_env()
        if self.kind == "s3":
            e.update(AWS_ACCESS_KEY_ID="K", AWS_SECRET_ACCESS_KEY="S", AWS_REGION="us-east-1",
                     AWS_ENDPOINT_URL=self.endpoint, AWS_EC2_METADATA_DISABLED="true")
        elif self.kind == "gcs":
            e.update(STORAGE_EMULATOR_HOST=self.endpoint, **closed_metadata())
        else:
            e.update(AZURE_STORAGE_USE_EMULATOR="true", AZURITE_BLOB_STORAGE_URL=self.endpoint,
                     AZURE_STORAGE_ACCOUNT=AZ_ACCOUNT, AZURE_STORAGE_KEY=AZ_KEY)
        # One try per request: a failure is reported, not retried for long.
        e.update(WEIGHTSTREAM_REMOTE_RETRIES="0")
        return e

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
