"""The Python package and the vLLM plugin install from the repository into
a fresh virtual environment with plain pip (building the Rust extension
with maturin from PyPI), and work there."""
from __future__ import annotations

import subprocess
import sys
import venv

from harness import ROOT


def test_pip_install_from_the_repo_in_a_fresh_venv(tmp_path, fixtures):
    fx, _ = fixtures
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    r = subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        ROOT / "crates/weightstream-py", ROOT / "plugins/vllm", "numpy", "ml_dtypes"],
                       capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stderr[-4000:]
    check = (
        "import weightstream, weightstream_vllm, weightstream.serving.options, weightstream.serving.gguf_names\n"
        "from importlib.metadata import entry_points\n"
        "eps = [e.value for e in entry_points(group='vllm.general_plugins')]\n"
        "assert 'weightstream_vllm:register' in eps, eps\n"
        f"t = weightstream.load_file({str(fx / 'v2.gguf')!r}, skip_unsupported=True)\n"
        "assert len(t) == 9 and str(t['q4_0'].dtype) == 'bfloat16', t\n"
        "print('ok', weightstream.__version__, len(t))\n"
    )
    r = subprocess.run([py, "-c", check], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("ok 0.1.0"), r.stdout + r.stderr[-3000:]


def test_paths_must_be_str_or_pathlike():
    """None, numbers and bytes are not paths (issue 14): a TypeError, not a
    lookup of the file 'None'."""
    import pathlib

    import pytest
    import weightstream

    for bad in (None, 123, b"model.gguf"):
        with pytest.raises(TypeError):
            weightstream.open(bad)
    with pytest.raises(weightstream.WeightstreamError):
        weightstream.open(pathlib.Path("/nonexistent/model.gguf"))


def test_device_auto_means_the_cpu_without_a_usable_gpu(fixtures):
    """device='auto' is the CLI's auto: GPU 0 when one is usable (and torch
    is there to hold its tensors), else the CPU, with the CPU's bits."""
    import numpy as np
    import pytest

    import weightstream

    out, _ = fixtures
    usable = weightstream.cuda_status()[0]
    if usable:
        pytest.skip("a GPU is usable here: auto picks it (the GPU round checks that path)")
    auto = weightstream.load_file(out / "v2.gguf", device="auto", skip_unsupported=True)
    cpu = weightstream.load_file(out / "v2.gguf", device="cpu", skip_unsupported=True)
    assert auto.keys() == cpu.keys() and len(auto) == 9
    for k in cpu:
        assert np.array_equal(np.asarray(auto[k]).view(np.uint16), np.asarray(cpu[k]).view(np.uint16)), k
    with pytest.raises(ValueError, match="'auto', 'cpu'"):
        weightstream.load_file(out / "v2.gguf", device="gpu", skip_unsupported=True)
