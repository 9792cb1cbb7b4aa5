"""What the tests' local servers share (seaweed.py's S3, emulators.py's
GCS and Azure): free loopback ports, a child process started in its own
session and waited for until it answers, uploads of a file or a
directory, and `with Server(tmp) as s:` to start and stop it."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
from pathlib import Path


def free_ports(n: int) -> list[int]:
    """`n` distinct free ports (all held open until every one is chosen)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class LocalServer:
    """A child process on 127.0.0.1 that answers HTTP once started."""
    name = "emulator"

    def __init__(self, work: Path):
        self.work = Path(work)
        self.work.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen | None = None
        self.port = 0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _spawn(self, args: list[str]) -> None:
        self.log = open(self.work / f"{self.name}.log", "wb")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60  # only bounds a failure; never a pass condition
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited ({self.proc.returncode}): {self._log_tail()}")
            try:
                self._ready()
                return
            except (OSError, urllib.error.URLError):
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"{self.name} did not answer in 60 s: {self._log_tail()}")

    def _log_tail(self) -> str:
        return (self.work / f"{self.name}.log").read_text(errors="replace")[-2000:]

    def _ready(self) -> None:
        raise NotImplementedError

    def put_file(self, bucket: str, key: str, path: Path) -> None:
        self.put_bytes(bucket, key, Path(path).read_bytes())

    def put_tree(self, bucket: str, prefix: str, d: Path) -> None:
        for p in sorted(Path(d).iterdir()):
            if p.is_file():
                self.put_file(bucket, prefix + p.name, p)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            # The data is the test's to throw away: no graceful shutdown.
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
