"""`weightstream convert`: sharding, side files, and no half-written output."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import safetensors
from safetensors import safe_open

from harness import ROOT, run_ws, ws_bin


def read_all(files):
    out = {}
    for f in files:
        for name, t in safetensors.deserialize(Path(f).read_bytes()):
            out[name] = (t["shape"], bytes(t["data"]))
    return out


def test_sharded_output_with_index(fixtures, tmp_path):
    out, _ = fixtures
    single = tmp_path / "one.safetensors"
    run_ws("convert", out / "fp8_deepseek", "-o", single)
    sharded = tmp_path / "sharded"
    r = json.loads(run_ws("convert", out / "fp8_deepseek", "-o", sharded, "--max-shard-size", "100000", "--json").stdout)
    shards = sorted(sharded.glob("model-*-of-*.safetensors"))
    assert len(shards) >= 2 and [str(s) for s in shards] == sorted(r["files"])
    index = json.loads((sharded / "model.safetensors.index.json").read_text())
    for name, shard in index["weight_map"].items():
        with safe_open(sharded / shard, framework="numpy") as f:
            assert name in f.keys()
    assert index["metadata"]["total_size"] == r["out_bytes"]
    assert read_all(shards) == read_all([single]), "sharding changes nothing but the files"
    # The directory is itself a checkpoint weightstream opens.
    assert run_ws("inspect", sharded).returncode == 0


def test_config_and_side_files(fixtures, tmp_path):
    out, _ = fixtures
    src = tmp_path / "src"
    src.mkdir()
    for f in (out / "fp8_deepseek").iterdir():
        (src / f.name).write_bytes(f.read_bytes())
    (src / "tokenizer.json").write_text('{"version": "1.0"}')
    (src / "generation_config.json").write_text("{}")
    dst = tmp_path / "bf16"
    run_ws("convert", src, "-o", dst)
    config = json.loads((dst / "config.json").read_text())
    assert "quantization_config" not in config and config["torch_dtype"] == "bfloat16"
    assert config["model_type"] == "llama"
    assert (dst / "tokenizer.json").read_text() == '{"version": "1.0"}'
    assert (dst / "generation_config.json").exists()
    with safe_open(dst / "model.safetensors", framework="numpy") as f:
        meta = f.metadata()
    assert meta["format"] == "pt" and meta["weightstream.source"] == "src"


def test_refuses_to_overwrite_without_force(fixtures, tmp_path):
    out, _ = fixtures
    dst = tmp_path / "x.safetensors"
    dst.write_text("keep me")
    r = run_ws("convert", out / "plain.safetensors", "-o", dst, "--skip-unsupported", check=False)
    assert r.returncode == 1 and "--force" in r.stderr
    assert dst.read_text() == "keep me"
    run_ws("convert", out / "plain.safetensors", "-o", dst, "--skip-unsupported", "--force")
    assert "f32" in read_all([dst])


def no_leftovers(d: Path):
    return [p.name for p in d.iterdir() if ".partial-" in p.name or ".old-" in p.name or p.name.endswith(".lock")]


def test_failed_convert_leaves_nothing(fixtures, tmp_path):
    out, _ = fixtures
    dst = tmp_path / "out.safetensors"
    r = run_ws("convert", out / "all_types.gguf", "-o", dst, check=False)  # q8_k is unsupported
    assert r.returncode == 1 and "q8_k" in r.stderr and "--skip-unsupported" in r.stderr
    assert not dst.exists() and no_leftovers(tmp_path) == []


def small_model(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    subprocess.run([sys.executable, ROOT / "tests/fixtures/sample_model.py", "--out", src, "--preset", "small", "--formats", "q8_0"],
                   check=True, capture_output=True)
    return next(src.glob("*.gguf"))


def start_convert(model: Path, dst: Path) -> subprocess.Popen:
    """A convert, returned once its partial output exists."""
    p = subprocess.Popen([ws_bin(), "convert", model, "-o", dst, "--threads", "1"], stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 30
    while not [n for n in no_leftovers(dst.parent) if ".partial-" in n] and p.poll() is None and time.time() < deadline:
        time.sleep(0.005)
    return p


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_interrupted_convert_leaves_nothing(tmp_path, sig):
    """Ctrl-C, SIGTERM or SIGHUP mid-convert: exit non-zero, nothing under
    the final name, no temp files (issue 14: SIGTERM/SIGHUP once left
    GB-sized partials)."""
    model = small_model(tmp_path)
    dst = tmp_path / "out"
    p = start_convert(model, dst)
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    if p.returncode == 0:
        # It finished before the signal landed: then the output must be whole.
        assert dst.exists()
        return
    assert "cancelled" in err
    assert not dst.exists()
    assert no_leftovers(tmp_path) == []


def test_a_tensor_named_like_safetensors_metadata_is_refused_before_writing(tmp_path):
    """A GGUF tensor named __metadata__ (issue 14): the safetensors format
    reserves that key, so convert refuses it, naming the tensor, and writes
    nothing rather than a file no reader can open."""
    import gguf
    import numpy as np

    src = tmp_path / "reserved.gguf"
    w = gguf.GGUFWriter(str(src), arch="llama")
    w.add_tensor("ok.weight", np.ones((2, 32), dtype=np.float32))
    w.add_tensor("__metadata__", np.ones((2, 32), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    for out in (tmp_path / "o.safetensors", tmp_path / "odir"):
        r = run_ws("convert", src, "-o", out, "--json", check=False)
        assert r.returncode == 1
        err = json.loads(r.stderr)["error"]
        assert err["kind"] == "reserved_name" and err["tensor"] == "__metadata__", err
        assert not out.exists() and no_leftovers(tmp_path) == []
    # Loading it is fine: only the output format reserves the name.
    assert json.loads(run_ws("load", src, "--device", "cpu", "--json").stdout)["tensors"] == 2


def test_a_killed_converts_partial_is_reclaimed_by_the_next(tmp_path):
    """SIGKILL cannot be caught: its partial stays until the next convert to
    the same output, which removes it (the process is gone) and succeeds."""
    model = small_model(tmp_path)
    dst = tmp_path / "out"
    p = start_convert(model, dst)
    if p.poll() is not None:
        pytest.skip("the convert finished before it could be killed")
    p.kill()
    p.wait(timeout=30)
    p.stderr.close()
    left = [n for n in no_leftovers(tmp_path) if ".partial-" in n]
    assert left, "a killed convert leaves its partial (else this test proves nothing)"
    run_ws("convert", model, "-o", dst, "--threads", "1")
    assert dst.exists() and no_leftovers(tmp_path) == []


def test_two_converts_to_one_output_one_loses_clearly(tmp_path):
    model = small_model(tmp_path)
    dst = tmp_path / "out"
    first = start_convert(model, dst)
    try:
        if first.poll() is not None:
            pytest.skip("the first convert finished before the second started")
        r = run_ws("convert", model, "-o", dst, "--threads", "1", check=False)
        assert r.returncode == 1 and "another convert" in r.stderr and str(first.pid) in r.stderr, r.stderr
    finally:
        first.wait(timeout=120)
    assert first.returncode == 0 and dst.exists() and no_leftovers(tmp_path) == []
