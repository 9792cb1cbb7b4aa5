"""A static file server that honours Range and If-Match, for the GPU
round's http:// rows (e2e.py --sources http): the GPU machine reaches no
network and carries no S3 server (SeaweedFS's wheel is 47 MB, the carry's
room is 64 MiB with everything else), so weightstream's object-storage
source (parallel ranged GETs pinned by ETag) reads the checkpoint from
this machine's own loopback. Python's http.server answers every GET with
the whole file, which weightstream refuses.

    python3 bench/gpu/range_server.py DIR [PORT]   (prints the port, serves until killed)
"""
from __future__ import annotations

import os
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

CHUNK = 4 << 20


def make_server(root: Path, port: int = 0) -> ThreadingHTTPServer:
    root = root.resolve()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in separate writes: with Nagle's
        # algorithm on, a reply's last partial segment can wait for the
        # client's delayed ACK. `gpu_round.sh check`'s tiny Q4_0 GGUF took
        # 0.257 s over this server with it, 0.020 s without.
        disable_nagle_algorithm = True

        def log_message(self, *a):
            pass

        def target(self):
            p = (root / self.path.split("?", 1)[0].lstrip("/")).resolve()
            if root not in p.parents or not p.is_file():
                self.send_error(404)
                return None
            st = p.stat()
            return p, st.st_size, f'"{st.st_mtime_ns:x}-{st.st_size:x}"'

        def do_HEAD(self):
            self.serve(body=False)

        def do_GET(self):
            self.serve(body=True)

        def serve(self, body: bool):
            t = self.target()
            if t is None:
                return
            path, size, etag = t
            match = self.headers.get("If-Match")
            if match and match not in ("*", etag):
                self.send_error(412)
                return
            start, end, status = 0, size, 200
            rng = self.headers.get("Range")
            if rng:
                m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng.strip())
                if not m or int(m.group(1)) >= size:
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{size}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                start = int(m.group(1))
                end = min(size, int(m.group(2)) + 1) if m.group(2) else size
                status = 206
            self.send_response(status)
            self.send_header("Content-Length", str(end - start))
            self.send_header("ETag", etag)
            self.send_header("Accept-Ranges", "bytes")
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
            self.end_headers()
            if not body:
                return
            with open(path, "rb") as f:
                f.seek(start)
                left = end - start
                while left:
                    buf = f.read(min(CHUNK, left))
                    if not buf:
                        return
                    self.wfile.write(buf)
                    left -= len(buf)

    srv = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    srv.daemon_threads = True
    return srv


class Serving:
    """`with Serving(dir) as base_url:` a server on a free port for the block."""

    def __init__(self, root: Path):
        self.srv = make_server(root)

    def __enter__(self) -> str:
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.srv.server_address[1]}"

    def __exit__(self, *exc):
        self.srv.shutdown()
        self.srv.server_close()


if __name__ == "__main__":
    s = make_server(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 0)
    print(s.server_address[1], flush=True)
    try:
        s.serve_forever()
    except KeyboardInterrupt:
        os._exit(0)
