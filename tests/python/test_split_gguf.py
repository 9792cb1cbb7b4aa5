"""GGUF split sets open as one checkpoint: written by gguf-py
(`split_max_tensors`) and by the real `llama-gguf-split`, opened from the
first file, from a later shard or from the directory, they give exactly
the unsplit file's BF16 bits; a missing, repeated or mismatched shard is a
`bad_split` error naming the file, never a partial result."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import gguf
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
import real_quants  # noqa: E402
import sample_model  # noqa: E402
from harness import SEED, inspect_json, run_ws  # noqa: E402
from test_cpu_parity import assert_bits_equal, convert  # noqa: E402


def shards(d: Path) -> list[Path]:
    return sorted(d.glob("*-of-*.gguf"))


@pytest.fixture(scope="module")
def unsplit(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("unsplit")
    p = d / "model.gguf"
    sample_model.write_gguf(p, sample_model.PRESETS["tiny"], "q4_k_m", np.random.default_rng(SEED), real=True)
    return p


def gguf_py_split(src: Path, out: Path, max_tensors: int) -> list[Path]:
    """The same tensors and metadata through gguf-py's splitting writer."""
    r = gguf.GGUFReader(src)
    out.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(out / "model.gguf"), arch="llama", split_max_tensors=max_tensors)
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if f.types[0] == gguf.GGUFValueType.ARRAY:
            w.add_key_value(name, f.contents(), gguf.GGUFValueType.ARRAY, sub_type=f.types[-1])
        else:
            w.add_key_value(name, f.contents(), f.types[0])
    for t in r.tensors:
        w.add_tensor(t.name, np.array(t.data), raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return shards(out)


@pytest.fixture(scope="module")
def py_split(unsplit, tmp_path_factory) -> list[Path]:
    files = gguf_py_split(unsplit, tmp_path_factory.mktemp("py_split"), max_tensors=12)
    assert len(files) >= 3, files
    return files


@pytest.fixture(scope="module")
def cpp_split(unsplit, tmp_path_factory) -> list[Path]:
    d = tmp_path_factory.mktemp("cpp_split")
    tool = real_quants.llama_tool("llama-gguf-split")
    r = subprocess.run([str(tool), "--split", "--split-max-tensors", "10", str(unsplit), str(d / "model")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    files = shards(d)
    assert len(files) >= 3, files
    return files


def test_gguf_py_names_its_shards_as_llama_cpp_does(py_split):
    n = len(py_split)
    assert [f.name for f in py_split] == [f"model-{i:05d}-of-{n:05d}.gguf" for i in range(1, n + 1)]


@pytest.mark.parametrize("which", ["py_split", "cpp_split"])
def test_a_split_set_gives_the_unsplit_files_bits(request, unsplit, tmp_path, which):
    files = request.getfixturevalue(which)
    want = convert(unsplit, tmp_path / "whole.safetensors", "scalar", 2)
    for i, start in enumerate([files[0], files[-1], files[0].parent]):
        got = convert(start, tmp_path / f"split{i}.safetensors", "scalar", 2)
        assert set(got) == set(want), f"{start}: tensor names differ"
        for name in want:
            assert_bits_equal(f"{start.name} {name}", got[name], want[name])


def test_inspect_and_load_cover_every_shard(py_split, unsplit):
    info = inspect_json(py_split[0])
    assert [f["path"] for f in info["files"]] == [str(p) for p in py_split]
    # The unsplit file's tensors in its order: shard by shard, offset by offset.
    assert [t["name"] for t in info["tensors"]] == [t["name"] for t in inspect_json(unsplit)["tensors"]]
    assert info["metadata"]["general.architecture"] == "llama"
    r = json.loads(run_ws("load", py_split[1], "--device", "cpu", "--verify", "--json").stdout)
    assert r["verify"]["identical"] and r["tensors"] == len(info["tensors"])


def copy_set(files: list[Path], d: Path) -> list[Path]:
    d.mkdir()
    return [Path(shutil.copy(f, d / f.name)) for f in files]


def bad_split(path) -> dict:
    r = run_ws("inspect", "--json", path, check=False)
    assert r.returncode == 1, r.stdout[-500:]
    err = json.loads(r.stderr)["error"]
    assert err["kind"] == "bad_split", err
    return err


@pytest.mark.parametrize("command", ["inspect", "load", "convert"])
@pytest.mark.parametrize("broken", ["missing", "mismatched"])
def test_every_command_reports_a_broken_set_as_bad_split_in_json(py_split, tmp_path, command, broken):
    """The typed kind and the file in --json, exit status 1, for each command
    (and convert writes nothing)."""
    files = copy_set(py_split, tmp_path / "s")
    if broken == "missing":
        files[1].unlink()
    else:
        shutil.copy(files[2], files[1])  # shard 3's header under shard 2's name
    out = tmp_path / "out.safetensors"
    extra = {"inspect": [], "load": ["--device", "cpu"], "convert": ["-o", out]}[command]
    r = run_ws(command, files[0], *extra, "--json", check=False)
    assert r.returncode == 1, (r.returncode, r.stdout[-500:], r.stderr[-500:])
    err = json.loads(r.stderr)["error"]
    assert err["kind"] == "bad_split" and err["file"] == str(files[1]), err
    assert not out.exists() and not list(tmp_path.glob(".out.safetensors*")), "no partial output"


def test_the_python_package_loads_a_set_as_the_unsplit_file(py_split, unsplit, tmp_path):
    import weightstream

    want = weightstream.load_file(unsplit)
    for start in (py_split[0], py_split[-1], py_split[0].parent):
        with weightstream.open(start) as ck:
            assert ck.keys() == list(want), start
            assert ck.metadata()["general.architecture"] == "llama"
        got = weightstream.load_file(start)
        for k in want:
            assert np.array_equal(np.asarray(got[k]).view(np.uint16), np.asarray(want[k]).view(np.uint16)), (start, k)
    files = copy_set(py_split, tmp_path / "s")
    files[-1].unlink()
    with pytest.raises(weightstream.WeightstreamError) as e:
        weightstream.load_file(files[0])
    assert e.value.kind == "bad_split" and e.value.file == str(files[-1]), (e.value.kind, e.value.file)


def test_a_missing_shard_is_an_error_naming_it(py_split, tmp_path):
    files = copy_set(py_split, tmp_path / "s")
    files[1].unlink()
    for start in (files[0], files[-1], files[0].parent):
        err = bad_split(start)
        assert err["file"] == str(files[1]) and "missing" in err["message"], err
    r = run_ws("convert", files[0], "-o", tmp_path / "out.safetensors", check=False)
    assert r.returncode == 1 and not (tmp_path / "out.safetensors").exists(), "no partial output"


def test_a_mismatched_or_repeated_shard_is_an_error_naming_it(py_split, tmp_path):
    files = copy_set(py_split, tmp_path / "wrong")
    shutil.copy(files[0], files[1])  # shard 2's name, shard 1's contents
    err = bad_split(files[0])
    assert err["file"] == str(files[1]) and "shard 2" in err["message"], err
    files = copy_set(py_split, tmp_path / "linked")
    files[1].unlink()
    os.link(files[0], files[1])  # the same file under shard 2's name
    err = bad_split(files[0])
    assert err["file"] == str(files[1]) and "same file as shard 1" in err["message"], err


def test_a_renamed_shard_cannot_find_its_set(py_split, tmp_path):
    d = tmp_path / "renamed"
    d.mkdir()
    p = Path(shutil.copy(py_split[0], d / "model.gguf"))
    err = bad_split(p)
    assert "NNNNN-of-NNNNN" in err["message"], err


def test_a_directory_with_a_set_and_another_gguf_asks_which(py_split, unsplit, tmp_path):
    files = copy_set(py_split, tmp_path / "mixed")
    shutil.copy(unsplit, files[0].parent / "other.gguf")
    r = run_ws("inspect", "--json", files[0].parent, check=False)
    err = json.loads(r.stderr)["error"]
    assert r.returncode == 1 and err["kind"] == "no_checkpoint" and "split set" in err["message"], err
