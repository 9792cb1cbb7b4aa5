"""Giving freed heap memory back to the system once the model is loaded.

vLLM's post-load processing repacks quantized weights for its kernels on
the CPU (CPUWNA16, what keep=quantized serves Q4_0 with, unpacks each
weight into one int32 per 4-bit code, 8x its bytes, and packs it again).
Below glibc's mmap threshold, which rises to the size of the largest
block freed (up to 32 MiB), those temporaries come from the malloc heap,
and the repacked weights are allocated above them: when they are freed
the heap cannot shrink from its top, so the pages stay resident as free
heap. On a 1024-hidden, 6-layer Q4_0 model that was 73-84 MiB of the 96
MiB keeping its weights quantized saves (docs/PERFORMANCE.md).
glibc's `malloc_trim(0)` returns the free pages of every arena, inside
the heap too (madvise(MADV_DONTNEED), glibc 2.8 and later), to the
system; the next allocations (the KV cache, activations) reuse the
addresses and fault pages in again as they need them.

glibc only: other C libraries (musl) have no malloc_trim, and nothing is
done there."""
from __future__ import annotations

import ctypes
import os
import sys
from typing import Callable, Optional


def _malloc_trim() -> Optional[Callable[[int], int]]:
    """glibc's malloc_trim, or None where the process's C library is not
    glibc (or not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # glibc's own symbol: musl and others lack it
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def resident_bytes() -> int:
    """The process's resident set (/proc/self/statm), in bytes."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def release_freed() -> Optional[int]:
    """Return the free pages of every malloc arena to the system
    (`malloc_trim(0)`); the resident bytes that released (0 or more), or
    None where the C library is not glibc."""
    trim = _malloc_trim()
    if trim is None:
        return None
    before = resident_bytes()
    trim(0)
    return max(0, before - resident_bytes())
