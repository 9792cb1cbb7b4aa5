"""`dtype=float16` through the Python package (issue 57): load_file, open,
get_slice and load_into give the same float16 bits as `weightstream
convert --dtype f16` (itself checked against numpy's float16 rounding of
the references in tests/python/test_f16_out.py), destinations are checked
against the dtype asked for, and an unknown dtype is refused."""
from __future__ import annotations

import numpy as np
import pytest
import safetensors

import weightstream
from harness import run_ws


@pytest.fixture(scope="module")
def all_types(fixtures):
    out, _ = fixtures
    return out / "all_types.gguf"


@pytest.fixture(scope="module")
def cli_f16(all_types, tmp_path_factory) -> dict[str, np.ndarray]:
    out = tmp_path_factory.mktemp("cli16") / "o.safetensors"
    run_ws("convert", all_types, "-o", out, "--dtype", "f16", "--skip-unsupported")
    return {n: np.frombuffer(bytes(t["data"]), np.uint16).reshape(t["shape"]) for n, t in safetensors.deserialize(out.read_bytes())}


@pytest.mark.parametrize("dtype", ["float16", np.float16, "f16"])
def test_load_file_float16_equals_the_cli(all_types, cli_f16, dtype):
    got = weightstream.load_file(str(all_types), dtype=dtype, skip_unsupported=True)
    assert set(got) == set(cli_f16)
    for name, t in got.items():
        assert t.dtype == np.float16, name
        assert np.array_equal(t.view(np.uint16), cli_f16[name]), name


def test_slices_and_load_into_in_float16(all_types, cli_f16):
    with weightstream.open(str(all_types), skip_unsupported=True) as ck:
        name = next(n for n in ck.keys() if len(ck.shape(n)) == 2 and ck.matrix(n)[1] >= 64 and ck.dtype(n) == "IQ4_XS")
        rows, cols = ck.matrix(name)
        whole = cli_f16[name].reshape(rows, cols)
        part = ck.get_slice(name, rows=(1, rows), cols=(3, cols - 5), dtype="float16")
        assert part.dtype == np.float16 and np.array_equal(part.view(np.uint16), whole[1:, 3:cols - 5])
        outs = [np.full((rows, cols), 7, np.float16), np.full(ck.slice_shape(name, cols=(0, 32)), 7, np.uint16)]
        ck.load_into([name, name], outs, slices=[None, (None, (0, 32))], dtype=np.float16)
        assert np.array_equal(outs[0].view(np.uint16), whole) and np.array_equal(outs[1], whole[:, :32])
        # The checkpoint's default stays BF16, and a float16 destination is refused for it.
        with pytest.raises(ValueError, match="float16"):
            ck.load_into([name], [np.zeros((rows, cols), np.float16)])
    with weightstream.open(str(all_types), dtype="float16", skip_unsupported=True) as ck:
        assert np.array_equal(ck.get_tensor(name).view(np.uint16).reshape(rows, cols), whole)
        with pytest.raises(ValueError, match="not float16"):
            ck.load_into([name], [np.zeros((rows, cols), np.float32)])


@pytest.mark.parametrize("dtype", ["float32", np.int16, "fp8"])
def test_other_dtypes_are_refused(all_types, dtype):
    with pytest.raises(ValueError, match="torch.float16"):
        weightstream.open(str(all_types), dtype=dtype)
