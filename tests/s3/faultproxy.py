"""A small fault-injecting HTTP proxy for the S3 tests: it forwards each
request verbatim (the Host header too, so SigV4 signatures still hold) to
the real server and, when told, answers ranged GETs with 503 SlowDown or
500, cuts a body short, or redirects elsewhere. It records every request
(method, path, Range) so tests can count round trips and bytes asked for,
and the body bytes it sent back for ranged GETs (`take_sent`): what the
client really fetched of the objects' data (listings and HEADs apart)."""
from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SLOWDOWN = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
            b'<Message>Please reduce your request rate.</Message></Error>')


class FaultProxy:
    def __init__(self, upstream_port: int, host: str | None = None):
        """`host`: the Host header to send upstream instead of the client's
        (fake-gcs-server serves its XML API only to its public host; S3's
        signatures need the client's, so the default forwards it)."""
        self.upstream_port = upstream_port
        self.host = host
        self.lock = threading.Lock()
        self.log: list[tuple[str, str, str | None]] = []
        self.fault: str | None = None  # "slowdown", "500", "cut", "redirect"
        self.remaining = 0  # faults left to inject; -1: every time
        self.sent = 0  # ranged GETs' body bytes sent to clients
        # Called with (method, path, Range) before each request is handled.
        self.on_request = None
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_HEAD(self):
                self.forward()

            def do_GET(self):
                self.forward()

            def do_PUT(self):
                self.forward()

            def forward(self):
                rng = self.headers.get("Range")
                if proxy.on_request:
                    proxy.on_request(self.command, self.path, rng)
                with proxy.lock:
                    proxy.log.append((self.command, self.path, rng))
                    fault = None
                    if proxy.fault and rng and self.command == "GET" and proxy.remaining != 0:
                        fault = proxy.fault
                        proxy.remaining -= proxy.remaining > 0
                if fault in ("slowdown", "500"):
                    body = SLOWDOWN if fault == "slowdown" else b"<Error><Code>InternalError</Code></Error>"
                    self.send_response(503 if fault == "slowdown" else 500)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                if fault == "redirect":
                    self.send_response(307)
                    self.send_header("Location", "http://127.0.0.2:9" + self.path)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                conn = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=60)
                headers = {k: v for k, v in self.headers.items()}
                if proxy.host:
                    headers = {k: v for k, v in headers.items() if k.lower() != "host"} | {"Host": proxy.host}
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    r = conn.getresponse()
                    data = r.read()
                except OSError:
                    # The server is gone: so is this connection.
                    self.close_connection = True
                    return
                self.send_response(r.status, r.reason)
                for k, v in r.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection"):
                        self.send_header(k, v)
                if r.getheader("Content-Length") is None and self.command != "HEAD":
                    # A chunked answer (Azurite's errors) is sent whole: its
                    # length is what ends it on a kept-alive connection.
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if fault == "cut" and r.status in (200, 206) and len(data) > 1:
                    # Promise the whole body, send half, drop the connection.
                    self.wfile.write(data[: len(data) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                if self.command != "HEAD":
                    if self.command == "GET" and rng:
                        # Counted before the write: a client that has its
                        # bytes must find them counted.
                        with proxy.lock:
                            proxy.sent += len(data)
                    self.wfile.write(data)
                conn.close()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def inject(self, fault: str | None, times: int = -1) -> None:
        with self.lock:
            self.fault, self.remaining = fault, times

    def take_log(self) -> list:
        with self.lock:
            log, self.log = self.log, []
        return log

    def take_sent(self) -> int:
        with self.lock:
            sent, self.sent = self.sent, 0
        return sent

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
