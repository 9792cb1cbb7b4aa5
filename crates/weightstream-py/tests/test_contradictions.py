"""Checkpoints that contradict themselves, split look-alikes and empty
slices (issue 27): each refused with a typed error naming the file and
tensor, or served as an empty tensor, never plausible wrong BF16, a panic
or a hang. Every file is built here from the generators in tests/fixtures."""
from __future__ import annotations

import json
import struct

import gguf
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import packed
import weightstream
from harness import run_ws


def _rng():
    return np.random.default_rng(27)


def _expect(path, kind, *needles, source="auto"):
    """`weightstream.open(path)` and `inspect --json` both refuse with `kind`."""
    with pytest.raises(weightstream.WeightstreamError) as e:
        weightstream.open(str(path), source=source)
    assert e.value.kind == kind, (e.value.kind, str(e.value))
    for n in needles:
        assert n in str(e.value), (n, str(e.value))
    r = run_ws("inspect", "--json", path, check=False)
    assert r.returncode == 1 and json.loads(r.stderr)["error"]["kind"] == kind, r.stderr
    return e.value


def _config(d):
    return json.loads((d / "config.json").read_text())


def _write_config(d, c):
    (d / "config.json").write_text(json.dumps(c))


# 1 and 2: an INT pack decoded by the width and symmetry its config declares.


def test_int_bits_disagreeing_with_num_bits_is_refused(tmp_path):
    d = tmp_path / "int"
    packed.write_int(d, _rng())
    weightstream.open(str(d))  # as generated: consistent
    for i, (name, bits, *_rest) in enumerate(packed.INT_LAYERS):
        packed.write_int(d, _rng())
        c = _config(d)
        c["quantization_config"]["config_groups"][f"group_{i}"]["weights"]["num_bits"] = 12 - bits  # 4 <-> 8
        _write_config(d, c)
        e = _expect(d, "config_mismatch", f"INT{bits}", f"INT{12 - bits}", name)
        assert e.tensor == name + ".weight_packed" and e.offset is not None and e.file.endswith("model.safetensors")


def test_asymmetric_config_without_zero_points_is_refused(tmp_path):
    d = tmp_path / "int"
    packed.write_int(d, _rng())
    t = load_file(d / "model.safetensors")
    asym = [n for n, *_r, a in packed.INT_LAYERS if a]
    del t[asym[0] + ".weight_zero_point"]
    save_file(t, str(d / "model.safetensors"))
    _expect(d, "config_mismatch", "asymmetric", "symmetric", asym[0])
    # And the reverse: zero points the symmetric config says are not there.
    packed.write_int(d, _rng())
    c = _config(d)
    for g in c["quantization_config"]["config_groups"].values():
        g["weights"]["symmetric"] = True
    _write_config(d, c)
    _expect(d, "config_mismatch", asym[0])


# 3: a name that says "part of a set" over a header that does not.


def _gguf(path, tensors, split=None):
    """A GGUF of `tensors` (name -> array, or (bytes array, ggml type)) with
    `split` keys as llama-gguf-split types them."""
    w = gguf.GGUFWriter(str(path), arch="llama")
    for k, v in (split or {}).items():
        (w.add_int32 if k == "split.tensors.count" else w.add_uint16)(k, v)
    for name, t in tensors.items():
        data, raw = t if isinstance(t, tuple) else (t, None)
        w.add_tensor(name, data, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_split_look_alike_is_refused(tmp_path):
    d = tmp_path / "set"
    d.mkdir()
    ones = np.ones((4, 32), dtype=np.float32)
    # A real second shard beside a first file with no split keys.
    _gguf(d / "m-00001-of-00002.gguf", {"t0": ones})
    _gguf(d / "m-00002-of-00002.gguf", {"t1": ones}, {"split.no": 1, "split.count": 2, "split.tensors.count": 2})
    for path in (d / "m-00001-of-00002.gguf", d):
        _expect(path, "bad_split", "shard 1 of a 2-file split set")
    out = tmp_path / "out.safetensors"
    r = run_ws("convert", d / "m-00001-of-00002.gguf", "-o", out, check=False)
    assert r.returncode == 1 and not out.exists(), r.stderr
    # split.count 1 says "plain file" too: the same disagreement.
    _gguf(d / "m-00001-of-00002.gguf", {"t0": ones}, {"split.count": 1})
    _expect(d / "m-00001-of-00002.gguf", "bad_split")
    # A one-file "set" named as one stays a plain file.
    _gguf(tmp_path / "x-00001-of-00001.gguf", {"t0": ones})
    weightstream.open(str(tmp_path / "x-00001-of-00001.gguf"))


# 4 and 9: empty ranges give empty tensors on every dtype, never a panic.


def _every_dtype(tmp_path):
    """(checkpoint, tensor) pairs: a GGUF of block and float types, FP8 and
    the packed schemes."""
    g = tmp_path / "m.gguf"
    x = _rng().standard_normal((3, 512)).astype(np.float32)
    q = {f"w.{t.name}": (gguf.quants.quantize(x, t), t) for t in (gguf.GGMLQuantizationType.Q4_0, gguf.GGMLQuantizationType.Q8_0)}
    # gguf-py cannot quantize K-quants: random blocks (any bits are a block).
    k = _rng().integers(0, 256, (3, 2 * 144), dtype=np.uint8), gguf.GGMLQuantizationType.Q4_K
    _gguf(g, {**q, "w.Q4_K": k, "w.F32": x, "w.F16": x.astype(np.float16), "norm": x[0]})
    out = [(g, n) for n in ("w.Q4_0", "w.Q4_K", "w.Q8_0", "w.F32", "w.F16", "norm")]
    for scheme in ("nvfp4_ct", "mxfp4_gptoss"):
        packed.write_scheme(tmp_path / scheme, scheme, _rng())
        with weightstream.open(str(tmp_path / scheme)) as ck:
            out.append((tmp_path / scheme, [n for n in ck.keys() if ck.matrix(n)[1] > 32][0]))
    packed.write_int(tmp_path / "int", _rng())
    out.append((tmp_path / "int", packed.INT_LAYERS[0][0] + ".weight"))
    return out


def test_empty_slices_are_empty_tensors(tmp_path):
    for path, name in _every_dtype(tmp_path):
        with weightstream.open(str(path)) as ck:
            rows, cols = ck.matrix(name)
            for r, c in (((0, 1), (cols, cols)), ((0, 0), None), ((rows, rows), (0, cols)), ((1, 1), (0, 0))):
                if len(ck.shape(name)) == 1 and r != (0, 1) and r != (0, 0):
                    continue
                t = ck.get_slice(name, rows=r, cols=c)
                assert t.size == 0 if hasattr(t, "size") else t.numel() == 0, (path, name, r, c)
                assert list(t.shape) == ck.slice_shape(name, rows=r, cols=c)
                assert ck.slice_bytes(name, rows=r, cols=c) == 0
            # Whatever is refused carries a kind (1-D row ranges included).
            with pytest.raises(weightstream.WeightstreamError) as e:
                ck.get_slice(name, rows=(0, rows + 1))
            assert e.value.kind == "bad_slice"


# 5: the scheme a config names must be the tensors'.


def test_config_scheme_over_other_tensors_is_refused(tmp_path):
    d = tmp_path / "mx"
    packed.write_scheme(d, "mxfp4_ct", _rng())
    c = _config(d)
    q = c["quantization_config"]
    q["format"] = q["config_groups"]["group_0"]["format"] = "nvfp4-pack-quantized"
    _write_config(d, c)
    _expect(d, "config_mismatch", "NVFP4", "MXFP4")
    # An FP8 config over NVFP4 tensors.
    n = tmp_path / "nv"
    packed.write_scheme(n, "nvfp4_ct", _rng())
    _write_config(n, {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}})
    _expect(n, "config_mismatch", "FP8", "NVFP4")


# 6: a BF16 output declares no quantization anywhere.


def test_convert_of_modelopt_drops_hf_quant_config(tmp_path):
    d = tmp_path / "mo"
    packed.write_scheme(d, "nvfp4_modelopt", _rng())
    _write_config(d, {"architectures": ["LlamaForCausalLM"], "torch_dtype": "bfloat16"})
    (d / "tokenizer.json").write_text("{}")
    out = tmp_path / "bf16"
    run_ws("convert", d, "-o", out)
    assert not (out / "hf_quant_config.json").exists()
    assert (out / "tokenizer.json").exists() and "quantization_config" not in json.loads((out / "config.json").read_text())


# 7: scale errors at load name the file and byte.


def test_bad_scale_names_file_and_offset(tmp_path):
    d = tmp_path / "mx"
    packed.write_scheme(d, "mxfp4_ct", _rng())
    st = d / "model.safetensors"
    t = load_file(st)
    name = packed.LAYERS[0][0]
    s = t[name + ".weight_scale"].copy()
    s.reshape(-1)[3] = 255
    t[name + ".weight_scale"] = s
    save_file(t, str(st))
    with pytest.raises(weightstream.WeightstreamError) as e:
        weightstream.load_file(str(d))
    assert e.value.kind == "bad_scale" and e.value.file == str(st) and e.value.tensor == name + ".weight"
    header_len = struct.unpack("<Q", st.read_bytes()[:8])[0]
    start = json.loads(st.read_bytes()[8:8 + header_len])[name + ".weight_scale"]["data_offsets"][0]
    assert e.value.offset == 8 + header_len + start + 3, (e.value.offset, str(e.value))


# 8: INT groups that split a word are refused when the file is opened.


def test_int_groups_smaller_than_a_word_are_refused_at_open(tmp_path):
    d = tmp_path / "int"
    d.mkdir()
    rows, cols = 4, 32
    q = _rng().integers(0, 16, (rows, cols), dtype=np.uint32)
    save_file({"l.weight_packed": packed.pack_int32(q, 4, 1), "l.weight_shape": np.array([rows, cols], dtype=np.int64),
               "l.weight_scale": np.ones((rows, cols // 4), dtype=np.float32)}, str(d / "model.safetensors"))
    _expect(d, "scale_mismatch", "groups of 4 values", "l.weight_scale")


# 10: a companion no layout consumes is never handed to a model.


def test_unused_companion_is_refused(tmp_path):
    d = tmp_path / "mo"
    d.mkdir()
    name = "l"
    save_file({name + ".weight": packed.packed_bytes(_rng(), 4, 32),
               name + ".weight_scale": packed.group_scales(_rng(), "e4m3", (4, 2)),
               name + ".weight_scale_2": np.array([0.5], dtype=np.float32),
               name + ".weight_global_scale": np.array([2.0], dtype=np.float32)}, str(d / "model.safetensors"))
    _expect(d, "bad_packed", name + ".weight_global_scale")
    # A BF16 weight with a scale beside it: the scale is no weight either.
    b = tmp_path / "bf16"
    b.mkdir()
    save_file({"a.weight": np.ones((2, 32), dtype=np.float32), "a.weight_zero_point": np.zeros((2, 1), dtype=np.int32)},
              str(b / "model.safetensors"))
    _expect(b, "bad_packed", "a.weight_zero_point")


# 11: bytes_read counts what a load reads.


def test_bytes_read_counts_scales_and_zero_points(tmp_path):
    for scheme in ("nvfp4_ct", "int"):
        d = tmp_path / scheme
        packed.write_int(d, _rng()) if scheme == "int" else packed.write_scheme(d, scheme, _rng())
        st = d / "model.safetensors"
        header_len = struct.unpack("<Q", st.read_bytes()[:8])[0]
        header = json.loads(st.read_bytes()[8:8 + header_len])
        size = {k: v["data_offsets"][1] - v["data_offsets"][0] for k, v in header.items() if k != "__metadata__"}
        # Read by a load: the weights, their group scales and zero points;
        # not the activation and global scales or weight_shape (read at open).
        read = sum(n for k, n in size.items() if not k.endswith(("input_global_scale", "weight_global_scale", "weight_shape")))
        with weightstream.open(str(d), source="read") as ck:
            ck.load()
            assert ck.bytes_read == read, (scheme, ck.bytes_read, read)


def test_docs_list_every_error_kind():
    """docs/formats.md names every kind the library can return."""
    import re

    from harness import ROOT

    kinds = set()
    for src in ("crates/weightstream/src/error.rs", "crates/weightstream-format/src/error.rs"):
        kinds |= set(re.findall(r'=> "([a-z_0-9]+)"', (ROOT / src).read_text()))
    kinds.add("internal")  # the Python package's panicked load thread
    doc = (ROOT / "docs/formats.md").read_text()
    documented = set(re.findall(r"^\| `([a-z_0-9]+)` \|", doc, re.M))
    assert len(kinds) > 40 and kinds <= documented, sorted(kinds - documented)
