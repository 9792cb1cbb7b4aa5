"""Files that only look like mainline GGUF are refused, saying what they
are: a tensor whose stored size fits another layout than its type's
(PrismML's older group-128 Q2_0 under id 42, or any other size), type ids
mainline does not define (naming the fork known to use one), and metadata
declaring a transform of the weights (prism.hadamard.*) that a plain
dequantization ignores, with the option that loads it anyway."""
from __future__ import annotations

import json
import struct

import numpy as np
import pytest

import malformed as m
import reference
from harness import run_ws


def gguf_file(path, tensors, kv=()):
    """tensors: (name, ne, type id, raw bytes), written back to back, each
    padded to 32 bytes as llama.cpp and gguf-py write them."""
    g = m.Gguf()
    g.kv = [(b"general.architecture", m.STRING, m.gstr(b"llama")), *kv]
    data = bytearray()
    for name, ne, typ, raw in tensors:
        data += b"\0" * (-len(data) % 32)
        g.tensors.append((name.encode(), ne, typ, len(data)))
        data += raw
    data += b"\0" * (-len(data) % 32)
    g.data = bytes(data)
    path.write_bytes(g.build())
    return path, g.at


def error(path, *args):
    r = run_ws("inspect", "--json", path, *args, check=False)
    assert r.returncode == 1, r.stdout
    return json.loads(r.stderr)["error"], run_ws("inspect", path, *args, check=False).stderr


def prism_q2_0(rows: int, cols: int) -> bytes:
    """PrismML's older Q2_0: per 128 values an f16 d and 32 bytes of codes."""
    rng = np.random.default_rng(0)
    return b"".join(struct.pack("<H", 0x2E66) + rng.integers(0, 256, 32, dtype=np.uint8).tobytes()
                    for _ in range(rows * cols // 128))


@pytest.mark.parametrize("last", [False, True])
@pytest.mark.parametrize("cols", [512, 4096])
def test_prism_group_128_q2_0_is_named(tmp_path, cols, last):
    """Mainline Q2_0 needs 18 bytes per 64 values, the fork's file 34 per
    128: refused wherever the tensor sits, naming id, tensor, both sizes and
    the fork. From 2048 values on the two differ by at least the 32-byte
    padding (below, one padded span can hold either: docs/formats.md)."""
    f32 = ("norm", [64], 0, bytes(256))
    w = ("blk.0.attn_q.weight", [cols, 4], 42, prism_q2_0(4, cols))
    path, _ = gguf_file(tmp_path / "prism.gguf", [f32, w] if last else [w, f32])
    err, text = error(path)
    assert err["kind"] == "type_size_mismatch" and err["tensor"] == "blk.0.attn_q.weight", err
    found = len(w[3]) + (-len(w[3]) % 32)
    for s in ["ggml type 42 (Q2_0)", f"needs {4 * cols // 64 * 18}", f"holds {found} bytes", "PrismML", "128 values in 34 bytes"]:
        assert s in err["message"] and s in text, (s, err["message"])


def test_mainline_q2_0_of_the_same_shape_loads(tmp_path):
    raw = np.random.default_rng(1).integers(0, 256, 4 * 4096 // 64 * 18, dtype=np.uint8).tobytes()
    path, _ = gguf_file(tmp_path / "ok.gguf", [("w", [4096, 4], 42, raw), ("norm", [64], 0, bytes(256))])
    assert run_ws("inspect", path).returncode == 0


def test_a_size_no_layout_explains_is_refused(tmp_path):
    """A Q4_0 tensor followed by more bytes than its padding: some other layout."""
    q4 = ("w", [64, 2], 2, bytes(4 * 18 + 64))
    path, _ = gguf_file(tmp_path / "gap.gguf", [q4, ("norm", [8], 0, bytes(32))])
    err, text = error(path)
    assert err["kind"] == "type_size_mismatch" and err["tensor"] == "w"
    assert "ggml type 2 (Q4_0) needs 72" in text and "holds 160 bytes" in text and "the size of" not in text


@pytest.mark.parametrize("typ,fork", [(142, "PQ2_0 in PrismML"), (143, "PTQ1_0 in PrismML"), (43, "IQ1_XS in unslothai"),
                                      (156, "IQ3_KS in ik_llama.cpp"), (99, None)])
def test_unknown_ids_name_the_fork_using_them(tmp_path, typ, fork):
    path, at = gguf_file(tmp_path / "fork.gguf", [("w", [128], typ, bytes(64))])
    err, text = error(path)
    assert err["kind"] == "unknown_ggml_type" and err["tensor"] == "w" and err["offset"] == at["t0.type"]
    assert f"unknown ggml type id {typ}" in text
    assert (fork in text) if fork else ("used by a fork" not in text)


HADAMARD = (b"prism.hadamard.block_size", m.U32, struct.pack("<I", 128))


@pytest.mark.parametrize("key", [b"prism.hadamard.block_size", b"quip.rotation_seed", b"x.codebook", b"y.permutation"])
def test_transform_metadata_is_refused_naming_the_key(tmp_path, key):
    q = np.random.default_rng(2).integers(0, 256, 4 * 18, dtype=np.uint8).tobytes()
    path, _ = gguf_file(tmp_path / "rot.gguf", [("w", [256], 42, q)], kv=[(key, m.U32, struct.pack("<I", 128))])
    for cmd in (["inspect"], ["load", "--device", "cpu"], ["convert", "-o", tmp_path / "o.safetensors"]):
        r = run_ws(*cmd, path, "--json", check=False)
        assert r.returncode == 1
        err = json.loads(r.stderr)["error"]
        assert err["kind"] == "weight_transform" and f"'{key.decode()}'" in err["message"], err
        assert "--ignore-transform" in err["message"] and "ignore_transforms" in err["message"]


def test_ignore_transform_loads_the_weights_as_stored(tmp_path):
    q = np.random.default_rng(3).integers(0, 256, 4 * 18, dtype=np.uint8).tobytes()
    path, _ = gguf_file(tmp_path / "rot.gguf", [("w", [256], 42, q)], kv=[HADAMARD])
    out = tmp_path / "o.safetensors"
    run_ws("convert", path, "-o", out, "--ignore-transform")
    import safetensors

    (name, t), = safetensors.deserialize(out.read_bytes())
    got = np.frombuffer(bytes(t["data"]), dtype=np.uint16)
    assert name == "w" and (got == reference.ggml_c(q, 42)).all()
    assert run_ws("load", path, "--device", "cpu", "--ignore-transform", "--verify").returncode == 0


def test_python_ignore_transforms(tmp_path):
    weightstream = pytest.importorskip("weightstream")
    q = np.random.default_rng(4).integers(0, 256, 4 * 18, dtype=np.uint8).tobytes()
    path, _ = gguf_file(tmp_path / "rot.gguf", [("w", [256], 42, q)], kv=[HADAMARD])
    with pytest.raises(weightstream.WeightstreamError, match="prism.hadamard.block_size"):
        weightstream.open(path)
    got = weightstream.open(path, ignore_transforms=True).load()["w"]
    assert (got.view(np.uint16).ravel() == reference.ggml_c(q, 42)).all()
