"""Destinations checked as documented (issue 55 item 4): `load_into` and
`get_slice(out=)` write BF16 forward from a buffer's first address, so
they refuse with a ValueError, writing nothing, any destination that is
not a C-contiguous, writeable BF16 array of the right size: before, a
reversed numpy view crashed the process (written forward from its last
row), a read-only array over `bytes` was written into, and a float16 or
strided array was filled with BF16 bit patterns. `unpermute` takes a
whole number of rows per head only. The torch half is in
torch_api/test_torch_api.py."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import weightstream
from test_contradictions import _gguf, _rng

POISON = 0x7FC1


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    import gguf

    path = tmp_path_factory.mktemp("dest") / "m.gguf"
    x = _rng().standard_normal((8, 64)).astype(np.float32)
    _gguf(path, {"w": (gguf.quants.quantize(x, gguf.GGMLQuantizationType.Q8_0), gguf.GGMLQuantizationType.Q8_0)})
    return path


@pytest.fixture(scope="module")
def ckpt(path):
    with weightstream.open(str(path)) as ck:
        yield ck


def _bad_outs(shape):
    """(what, an array a load must refuse): each fits the byte count."""
    n = int(np.prod(shape))
    base = np.full(shape, POISON, np.uint16)
    wide = np.full((shape[0], shape[1] * 2), POISON, np.uint16)
    ro = np.frombuffer(bytes(2 * n), np.uint16).reshape(shape)
    return [
        ("reversed rows", base[::-1]),
        ("reversed columns", base[:, ::-1]),
        ("strided", wide[:, ::2]),
        ("Fortran order", np.asfortranarray(base)),
        ("read-only over bytes", ro),
        ("float16", np.full(shape, 1.5, np.float16)),
        ("int16", np.full(shape, 7, np.int16)),
        ("a list", [[0] * shape[1]] * shape[0]),
    ]


def _untouched(arr) -> bool:
    a = np.asarray(arr)
    if a.dtype == np.float16:
        return bool((a == 1.5).all())
    if a.dtype == np.int16:
        return bool((a == 7).all())
    return bool((a.view(np.uint16) == POISON).all()) or not a.any()


@pytest.mark.parametrize("call", ["load_into", "get_slice"])
def test_every_wrong_destination_is_refused_and_untouched(ckpt, call):
    shape = tuple(ckpt.slice_shape("w"))
    refused = []
    for what, out in _bad_outs(shape):
        with pytest.raises(ValueError) as e:
            if call == "load_into":
                ckpt.load_into(["w"], [out])
            else:
                ckpt.get_slice("w", out=out)
        assert ("the out for 'w'" if call == "load_into" else "get_slice: out") in str(e.value), (what, str(e.value))
        assert _untouched(out), what
        refused.append(what)
    assert len(refused) == 8
    # The right destination still loads, both spellings of BF16.
    good = np.full(shape, POISON, np.uint16)
    ckpt.load_into(["w"], [good])
    assert np.array_equal(good, np.asarray(ckpt.get_slice("w")).view(np.uint16))
    again = np.full(shape, POISON, np.uint16)
    assert ckpt.get_slice("w", out=again) is again and np.array_equal(again, good)


def test_a_numpy_destination_for_a_cuda_load_is_refused(ckpt):
    out = np.full(tuple(ckpt.slice_shape("w")), POISON, np.uint16)
    with pytest.raises(ValueError, match="host memory"):
        ckpt.load_into(["w"], [out], device="cuda:0")
    assert _untouched(out)


def test_a_reversed_view_no_longer_crashes_the_process(path):
    """The crash itself, in a child process (a segfault would take the
    test runner with it)."""
    script = f"""
import numpy as np, weightstream
ck = weightstream.open({str(path)!r})
out = np.zeros(ck.slice_shape("w"), np.uint16)[::-1]
try:
    ck.load_into(["w"], [out])
except ValueError as e:
    print("refused:", e)
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "refused:" in r.stdout and "not C-contiguous" in r.stdout, (r.returncode, r.stdout, r.stderr)


@pytest.mark.parametrize("bad", [-1, 2.5, 2.0, "2", True])
def test_unpermute_takes_whole_rows_per_head_only(ckpt, bad):
    out = np.full(tuple(ckpt.slice_shape("w")), POISON, np.uint16)
    with pytest.raises(ValueError, match="unpermute for 'w'"):
        ckpt.load_into(["w"], [out], unpermute=[bad])
    assert _untouched(out)


def test_unpermute_whole_numbers_still_work(ckpt):
    out = np.full(tuple(ckpt.slice_shape("w")), POISON, np.uint16)
    ckpt.load_into(["w"], [out], unpermute=[np.int64(2)])
    plain = np.asarray(ckpt.get_slice("w")).view(np.uint16)
    assert np.array_equal(out, plain.reshape(4, 1, 2, -1).transpose(0, 2, 1, 3).reshape(8, -1))
    ckpt.load_into(["w"], [out], unpermute=[None])
    assert np.array_equal(out, plain)
