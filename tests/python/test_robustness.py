"""Faults seen from the command line: out of host memory, Ctrl-C during a
load. Each ends in a typed error and a clean exit, never an abort."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from harness import ROOT, run_ws, ws_bin


@pytest.fixture(scope="module")
def small_model(tmp_path_factory):
    d = tmp_path_factory.mktemp("small")
    subprocess.run([sys.executable, ROOT / "tests/fixtures/sample_model.py", "--out", d, "--preset", "small", "--formats", "q8_0"],
                   check=True, capture_output=True)
    return next(d.glob("*.gguf"))


def test_out_of_host_memory_is_an_error_not_an_abort(small_model):
    """212 MB of BF16 into a process limited to 160 MB of address space."""
    cmd = f"ulimit -v 160000; exec {ws_bin()} load {small_model} --device cpu --threads 1 --json"
    r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env={**os.environ, "MALLOC_ARENA_MAX": "1"})
    assert r.returncode == 1, (r.returncode, r.stderr[-2000:])  # not 134 (abort) or a signal
    err = json.loads(r.stderr)["error"]
    assert err["kind"] == "host_memory", err
    assert "out of host memory" in err["message"] and "tensor '" in err["message"]


def test_ctrl_c_during_a_load_is_cancelled_cleanly(small_model):
    # The whole load takes ~0.15 s here from a warm cache: signal earlier on
    # each try until one lands mid-load.
    for delay in (0.1, 0.07, 0.05, 0.03):
        p = subprocess.Popen([ws_bin(), "load", small_model, "--device", "cpu", "--threads", "1"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
        if p.returncode != 0:
            break
    else:
        pytest.skip("every load finished before the signal arrived (machine too fast for this timing)")
    assert p.returncode == 1, (p.returncode, err)
    assert "cancelled" in err


def test_a_fifo_is_refused_not_read_forever(tmp_path):
    """A FIFO as the path (issue 14): a typed error at once, never a hang;
    likewise a FIFO where an index names a shard."""
    import json as _json
    import os

    fifo = tmp_path / "model.gguf"
    os.mkfifo(fifo)
    r = run_ws("inspect", "--json", fifo, check=False, timeout=20)
    assert r.returncode == 1 and _json.loads(r.stderr)["error"]["kind"] == "not_a_file", r.stderr
    d = tmp_path / "sharded"
    d.mkdir()
    (d / "model.safetensors.index.json").write_text(_json.dumps({"weight_map": {"a": "s1.safetensors"}}))
    os.mkfifo(d / "s1.safetensors")
    r = run_ws("inspect", "--json", d, check=False, timeout=20)
    err = _json.loads(r.stderr)["error"]
    assert r.returncode == 1 and err["kind"] == "not_a_file" and err["file"].endswith("s1.safetensors"), err


def test_hidden_files_in_a_directory_are_not_shards(fixtures, tmp_path):
    """A hidden `.x.safetensors` (an editor's or an interrupted convert's
    leftover) beside the shards is not loaded as one (issue 14)."""
    import shutil

    out, _ = fixtures
    d = tmp_path / "unindexed"
    shutil.copytree(out / "unindexed", d)
    before = [t["name"] for t in json.loads(run_ws("inspect", "--json", d).stdout)["tensors"]]
    shutil.copy(out / "plain.safetensors", d / ".stray.safetensors")
    after = json.loads(run_ws("inspect", "--json", d).stdout)
    assert [t["name"] for t in after["tensors"]] == before
    assert not any(".stray" in f["path"] for f in after["files"])


def test_inspect_into_a_closed_pipe_exits_quietly(tmp_path):
    """`weightstream inspect big.gguf | head -1` (issue 14): the reader goes
    away, weightstream ends as Unix tools do (SIGPIPE), without a panic."""
    import gguf
    import numpy as np

    p = tmp_path / "many.gguf"
    w = gguf.GGUFWriter(str(p), arch="llama")
    for i in range(5000):
        w.add_tensor(f"t{i}", np.ones(32, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    r = subprocess.run(f"'{ws_bin()}' inspect '{p}' | head -1; echo \"status ${{PIPESTATUS[0]}}\"", shell=True,
                       executable="/bin/bash", capture_output=True, text=True, timeout=60)
    assert "panicked" not in r.stderr and r.stderr == "", r.stderr[-2000:]
    assert r.stdout.splitlines()[-1] in ("status 141", "status 0"), r.stdout[-500:]


def test_control_characters_are_escaped_and_non_finite_metadata_printed(tmp_path):
    """A tensor name with a terminal escape sequence is shown escaped by
    inspect and in errors; NaN/inf metadata is printed as values in text and
    as documented strings in JSON (issue 14)."""
    import gguf
    import numpy as np

    p = tmp_path / "odd.gguf"
    w = gguf.GGUFWriter(str(p), arch="llama")
    w.add_key_value("x.nan", float("nan"), gguf.GGUFValueType.FLOAT32)
    w.add_key_value("x.ninf", float("-inf"), gguf.GGUFValueType.FLOAT64)
    w.add_key_value("x.eps", 1e-5, gguf.GGUFValueType.FLOAT32)
    # A Q8_K tensor (no reference, so no kernel): loading fails with an error naming it.
    w.add_tensor("bad\x1b[31mname", np.zeros((1, 292), dtype=np.uint8), raw_dtype=gguf.GGMLQuantizationType.Q8_K)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    text = run_ws("inspect", p, "--all-metadata").stdout
    assert "\x1b" not in text and "bad\\u{1b}[31mname" in text, text
    assert "NaN" in text and "-inf" in text
    meta = json.loads(run_ws("inspect", "--json", p).stdout)["metadata"]
    assert meta["x.nan"] == "NaN" and meta["x.ninf"] == "-Infinity" and abs(meta["x.eps"] - 1e-5) < 1e-9
    r = run_ws("load", p, "--device", "cpu", check=False)
    assert r.returncode == 1 and "bad\\u{1b}[31mname" in r.stderr and "\x1b" not in r.stderr, r.stderr


@pytest.mark.parametrize("args, message", [
    (["--shape", "1x32"], "must hold"),
    (["--shape", "100000000x100000000"], "must hold"),
    (["--shape", "18446744073709551615x256"], "must hold"),
    (["--shape", "256x256", "--reps", "0"], "--reps"),
    (["--shape", "256x256", "--threads", "5000"], "--threads"),
])
def test_bench_arguments_are_validated(args, message):
    """bench --shape once aborted, panicked on capacity overflow or printed
    NaN (issue 14): now each is a clear error, at once."""
    r = run_ws("bench", "--format", "q4_0", *args, check=False, timeout=30)
    assert r.returncode == 1 and message in r.stderr and "panicked" not in r.stderr, r.stderr[-1000:]


def test_thread_counts_are_capped_at_once(fixtures):
    out, _ = fixtures
    r = run_ws("load", out / "all_types.gguf", "--device", "cpu", "--threads", "5000", "--skip-unsupported", check=False, timeout=30)
    assert r.returncode == 1 and "above the limit of 1024" in r.stderr, r.stderr


def test_overflowing_offsets_and_configs_beside_a_file_are_reported_truthfully(fixtures, tmp_path):
    """An offset past 2^64 is described as such, not printed as the
    saturated 18446744073709551615; a bad config.json beside a single
    safetensors file is named by its real path (issue 14)."""
    import shutil
    import struct

    import gguf
    import numpy as np

    p = tmp_path / "far.gguf"
    w = gguf.GGUFWriter(str(p), arch="llama")
    w.add_tensor("t", np.ones(32, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    raw = bytearray(p.read_bytes())
    # Tensor info of "t": name, n_dims, 1 dim, type, then the u64 offset.
    at = raw.index(b"\x01\x00\x00\x00\x00\x00\x00\x00t") + 9 + 4 + 8 + 4
    raw[at:at + 8] = struct.pack("<Q", 2**64 - 64)
    p.write_bytes(bytes(raw))
    r = run_ws("inspect", "--json", p, check=False)
    err = json.loads(r.stderr)["error"]
    assert err["kind"] == "out_of_bounds" and "2^64" in err["message"] and "18446744073709551615" not in err["message"], err

    out, _ = fixtures
    d = tmp_path / "single"
    d.mkdir()
    shutil.copy(out / "fp8_single" / "model.safetensors", d / "model.safetensors")
    (d / "config.json").write_text(json.dumps({"quantization_config": {"weight_block_size": "x"}}))
    err = json.loads(run_ws("inspect", "--json", d / "model.safetensors", check=False).stderr)["error"]
    assert err["kind"] == "bad_config" and err["file"] == str(d / "config.json"), err


def test_inspect_json_streams_tensor_by_tensor(tmp_path):
    """inspect --json of a GGUF with 200,000 one-element tensors: memory
    bounded by the catalog (about 100 MB here), not a JSON tree of every
    tensor (780 MB before, issue 14). Run in a child whose peak RSS is read
    back."""
    import gguf
    import numpy as np

    p = tmp_path / "many.gguf"
    w = gguf.GGUFWriter(str(p), arch="llama")
    one = np.ones(1, dtype=np.float32)
    for i in range(200_000):
        w.add_tensor(f"t{i}", one)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    code = (
        "import resource, subprocess, sys\n"
        "r = subprocess.run([sys.argv[1], 'inspect', '--json', sys.argv[2]], stdout=subprocess.DEVNULL)\n"
        "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    rc, peak_kib = map(int, subprocess.run([sys.executable, "-c", code, str(ws_bin()), str(p)], capture_output=True, text=True,
                                           check=True).stdout.split())
    assert rc == 0
    assert peak_kib < 300 * 1024, f"inspect --json peaked at {peak_kib / 1024:.0f} MiB"
