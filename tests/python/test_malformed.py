"""Every malformed file gets its typed error, naming the file, the tensor
and the byte offset, and the CLI exits non-zero without crashing."""
from __future__ import annotations

import json
import struct

import gguf
import pytest
import malformed
from harness import run_ws

CASES = malformed.cases()


def test_builder_output_is_valid(tmp_path):
    """The corpus mutates a file that gguf-py itself reads."""
    g = malformed.base_gguf()
    p = tmp_path / "base.gguf"
    p.write_bytes(g.build())
    r = gguf.GGUFReader(p)
    assert [(t.name, t.tensor_type.name) for t in r.tensors] == [("a", "F32"), ("b", "Q4_0"), ("c", "Q8_0")]
    assert run_ws("inspect", p).returncode == 0


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_malformed_file_gets_typed_error(tmp_path, case):
    path, error_file = case.write(tmp_path)
    r = run_ws("inspect", "--json", path, check=False)
    assert r.returncode == 1, r.stderr
    assert r.stdout == ""
    err = json.loads(r.stderr)["error"]
    assert err["kind"] == case.kind, err
    assert err["file"] == str(error_file), err
    if case.tensor is not None:
        assert err["tensor"] == case.tensor, err
    if case.offset is not None:
        assert err["offset"] == case.offset, err
    # The human form names the same things on one line.
    text = run_ws("inspect", path, check=False).stderr
    assert text.startswith("error: ") and str(error_file) in text
    if case.tensor is not None:
        assert f"tensor '{case.tensor}'" in text


def test_every_truncation_of_a_gguf_header_is_an_error(tmp_path):
    """Cut a valid file at every byte: never a crash, always a typed error."""
    full = malformed.base_gguf().build()
    p = tmp_path / "cut.gguf"
    kinds = set()
    for cut in range(len(full)):
        p.write_bytes(full[:cut])
        r = run_ws("inspect", "--json", p, check=False)
        assert r.returncode == 1, cut
        kinds.add(json.loads(r.stderr)["error"]["kind"])
    assert kinds == {"truncated", "out_of_bounds"}


def test_the_safetensors_library_refuses_what_we_refuse_as_duplicate_keys(tmp_path):
    """Our refusal of a repeated field in an entry matches the real
    safetensors package: a scanner using it and a loader using us see the
    same file as broken. (A repeated __metadata__ key the package accepts,
    last wins; we refuse that too: every level, docs/formats.md.)"""
    import safetensors

    checked = False
    for case in malformed.safetensors_cases():
        if case.name != "st_duplicate_field":
            continue
        p, _ = case.write(tmp_path)
        with pytest.raises(Exception):
            safetensors.deserialize(p.read_bytes())
        checked = True
    assert checked
