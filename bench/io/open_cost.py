#!/usr/bin/env python3
"""What opening a checkpoint costs before any tensor is read: the CPU time
of `weightstream.open` (its header parse, the page-cache check of `auto`),
and the page-cache check alone for two sampling geometries.

    python bench/io/open_cost.py FILE [FILE...] [--opens 20] [--runs 3]

Per file: `weightstream.open` N times in a fresh process, less a process
that opens nothing, divided by N (CPU time from perf's task-clock where
perf runs, else getrusage), over --runs runs; then mincore(2) over 256
windows of 1024 pages (the sampling before 2026-11-27) and of 64 pages
(after), median of 21 and range. Run with the file in the page cache.
"""
from __future__ import annotations

import argparse
import ctypes
import mmap
import os
import statistics
import subprocess
import sys
import time

OPENER = """
import resource, sys, weightstream
u0 = resource.getrusage(resource.RUSAGE_SELF)
for _ in range(int(sys.argv[2])):
    weightstream.open(sys.argv[1])
u1 = resource.getrusage(resource.RUSAGE_SELF)
print(u1.ru_utime + u1.ru_stime - u0.ru_utime - u0.ru_stime)
"""


def open_cpu_ms(path: str, opens: int) -> float:
    def cpu(n: int) -> float:
        out = subprocess.run([sys.executable, "-c", OPENER, path, str(n)], check=True, capture_output=True, text=True)
        return float(out.stdout)
    return (cpu(opens) - cpu(0)) / opens * 1e3


def mincore_ms(path: str, windows: int, window_pages: int, reps: int = 21) -> list[float]:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    fd = os.open(path, os.O_RDONLY)
    size = os.fstat(fd).st_size
    base = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_PRIVATE, fd, 0)
    page = mmap.PAGESIZE
    pages = -(-size // page)
    vec = (ctypes.c_ubyte * window_pages)()
    times = []
    try:
        for _ in range(reps):
            t0 = time.perf_counter()
            for k in range(windows):
                first = k * (pages - window_pages) // (windows - 1)
                n = min(window_pages * page, size - first * page)
                if libc.mincore(base + first * page, n, vec) != 0:
                    raise OSError(ctypes.get_errno(), "mincore")
            times.append((time.perf_counter() - t0) * 1e3)
    finally:
        libc.munmap(base, size)
        os.close(fd)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--opens", type=int, default=20)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    for f in a.files:
        ms = [open_cpu_ms(f, a.opens) for _ in range(a.runs)]
        print(f"{f}: weightstream.open {statistics.median(ms):.1f} ms CPU (median of {a.runs}; {min(ms):.1f}..{max(ms):.1f})")
        if os.path.getsize(f) > 64 * 1024 * mmap.PAGESIZE:
            for label, wp in (("256 x 1024 pages", 1024), ("256 x 64 pages", 64)):
                t = mincore_ms(f, 256, wp)
                print(f"  mincore {label}: median {statistics.median(t):.2f} ms ({min(t):.2f}..{max(t):.2f})")


if __name__ == "__main__":
    main()
