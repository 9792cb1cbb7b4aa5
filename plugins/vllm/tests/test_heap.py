"""heap.release_freed (issue 57 item 5): the free pages of the malloc heap
go back to the system. The figures on a real model are the bench's
(bench/fronts/keep_quantized.py --small, docs/PERFORMANCE.md); here, the
mechanism on a heap left as vLLM's post-load repacking leaves it: freed
blocks below glibc's mmap threshold, held in place by live blocks above
them, so that the heap cannot shrink from its top."""
import ctypes
import platform

import pytest

from weightstream_vllm import heap

glibc = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")


@glibc
def test_freed_heap_pages_are_returned():
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    hole, pin, n = 96 << 10, 4 << 10, 512  # 48 MiB of holes: each 96 KiB block under the 128 KiB mmap threshold
    holes, pins = [], []
    for _ in range(n):
        holes.append(libc.malloc(hole))
        pins.append(libc.malloc(pin))
        ctypes.memset(holes[-1], 1, hole)  # resident
    try:
        for p in holes:
            libc.free(p)
        released = heap.release_freed()
    finally:
        for p in pins:
            libc.free(p)
    # Half the holes' bytes: a margin far above what else this process
    # frees meanwhile, and below what the trim gives back (all of them).
    assert released is not None and released >= n * hole // 2, (released, n * hole)


@glibc
def test_release_freed_is_a_byte_count_on_glibc():
    released = heap.release_freed()
    assert isinstance(released, int) and released >= 0


def test_resident_bytes():
    assert heap.resident_bytes() > 1 << 20
