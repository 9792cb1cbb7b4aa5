"""Column ranges whose edges fall inside a block (issue 28): through the
Python API, every block format, the packed schemes (two E2M1 values per
byte, eight INT4 per word) and floats give exactly the whole tensor's
values cut to the rectangle, and read only the blocks covering it."""
from __future__ import annotations

import numpy as np

import weightstream
from test_contradictions import _every_dtype


def _bits(t) -> np.ndarray:
    """BF16 values as their 16-bit patterns (numpy or torch)."""
    if hasattr(t, "view") and hasattr(t, "numpy"):  # torch
        import torch

        return t.contiguous().view(torch.int16).numpy().view(np.uint16)
    return np.ascontiguousarray(t).view(np.uint16)


def _cuts(cols: int) -> list[tuple[int, int]]:
    cuts = [(1, cols - 1), (3, min(cols, 37)), (cols // 2 - 1, cols // 2 + 1), (cols - 5, cols), (0, 1), (17, 17)]
    return [c for c in cuts if 0 <= c[0] <= c[1] <= cols]


def test_column_edges_inside_blocks_give_the_whole_tensors_values(tmp_path):
    checked = 0
    for path, name in _every_dtype(tmp_path):
        with weightstream.open(str(path)) as ck:
            rows, cols = ck.matrix(name)
            whole = _bits(ck.get_tensor(name)).reshape(rows, cols)
            full_bytes = ck.slice_bytes(name)
            shape = ck.shape(name)
            # Rows of a 3-D expert stack: whole experts keep the rank, others
            # (part of an expert, tensor parallelism inside experts) are 2-D.
            row_ranges = [(0, rows), (1, rows - 1)] if len(shape) == 3 else [(0, rows), (rows // 2, rows)] if rows > 1 else [(0, 1)]
            for r in row_ranges:
                for c in _cuts(cols):
                    got = ck.get_slice(name, rows=r, cols=c)
                    want = whole[r[0]:r[1], c[0]:c[1]]
                    assert list(got.shape) == ck.slice_shape(name, rows=r, cols=c)
                    if len(shape) == 3 and r == (1, rows - 1):
                        assert list(got.shape) == [r[1] - r[0], c[1] - c[0]]
                    assert np.array_equal(_bits(got).reshape(want.shape), want), (path.name, name, r, c)
                    # Never more than the rows' share of the file, never the whole for a part.
                    part = ck.slice_bytes(name, rows=r, cols=c)
                    assert part <= full_bytes * (r[1] - r[0]) / rows + 1e-9, (name, r, c, part)
                    checked += 1
    assert checked > 50


def test_row_ranges_read_only_their_rows_scales(tmp_path):
    """A row range of a packed weight (an expert-parallel rank's experts of
    a gpt-oss MXFP4 stack, a tensor-parallel rank's rows of an NVFP4
    weight) reads the scale rows of its own rows, not the whole scale
    tensor (issue 28), and gives the whole tensor's values."""
    import packed

    for scheme in ("nvfp4_ct", "mxfp4_gptoss"):
        path = tmp_path / scheme
        packed.write_scheme(path, scheme, np.random.default_rng(5))
        with weightstream.open(str(path)) as ck:
            names = [n for n in ck.keys() if ck.dtype(n) == "U8"]
        assert names, scheme

        def read(name, r):
            with weightstream.open(str(path)) as ck:
                before = ck.bytes_read
                t = ck.get_slice(name, rows=r)
                return _bits(t).reshape(r[1] - r[0], -1), ck.bytes_read - before, ck.slice_bytes(name, rows=r)

        for name in names:
            with weightstream.open(str(path)) as ck:
                rows = ck.matrix(name)[0]
            whole, n_all, data_all = read(name, (0, rows))
            scales_all = n_all - data_all
            assert scales_all > 0, (scheme, name)
            for r in ((0, rows // 2), (rows // 2, rows), (1, 2)):
                part, n, data = read(name, r)
                assert np.array_equal(part, whole[r[0]:r[1]]), (scheme, name, r)
                assert n - data == scales_all * (r[1] - r[0]) // rows, (scheme, name, r, n - data, scales_all)


def test_load_into_fills_every_out_in_one_call_as_get_slice_would(tmp_path):
    """Checkpoint.load_into: whole tensors and slices of every dtype into
    given buffers, in one call, the same bits as get_slice; a buffer of
    the wrong size is refused and nothing is written."""
    checked = 0
    for path, name in _every_dtype(tmp_path):
        with weightstream.open(str(path)) as ck:
            rows, cols = ck.matrix(name)
            pieces = [None, ((0, rows), (1, cols - 1)), ((rows // 2, rows), (0, cols))]
            names, outs, want = [], [], []
            for piece in pieces:
                r, c = piece if piece is not None else ((0, rows), (0, cols))
                want.append(_bits(ck.get_slice(name, rows=r, cols=c)))
                outs.append(np.full(ck.slice_shape(name, r, c), 0x7FC1, dtype=np.uint16))
                names.append(name)
            ck.load_into(names, outs, slices=pieces)
            for got, w in zip(outs, want):
                assert np.array_equal(got.reshape(-1), w.reshape(-1)), name
            small = np.full(max(1, outs[0].size - 1), 0x7FC1, dtype=np.uint16)
            try:
                ck.load_into([name], [small])
            except weightstream.WeightstreamError as e:
                assert "needs a 2-byte aligned buffer" in str(e)
            else:
                raise AssertionError(f"{name}: a short buffer was accepted")
            assert (small == 0x7FC1).all()
            checked += 1
    assert checked >= 8


def test_metadata_without_the_tokenizer(tmp_path):
    """metadata(tokenizer=False): every key but the tokenizer.* ones, in the file's order."""
    import gguf

    path = tmp_path / "vocab.gguf"
    w = gguf.GGUFWriter(str(path), arch="llama")
    w.add_block_count(2)
    w.add_tokenizer_model("llama")
    w.add_token_list([f"t{i}" for i in range(1000)])
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tensor("output_norm.weight", np.ones(32, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with weightstream.open(str(path)) as ck:
        full, small = ck.metadata(), ck.metadata(tokenizer=False)
    assert len(full["tokenizer.ggml.tokens"]) == 1000
    assert list(small) == [k for k in full if not k.startswith("tokenizer.")]
    assert small == {k: v for k, v in full.items() if not k.startswith("tokenizer.")}
    assert small["llama.attention.layer_norm_rms_epsilon"] == full["llama.attention.layer_norm_rms_epsilon"]


def test_load_into_unpermutes_rows_within_heads(tmp_path):
    """load_into(unpermute=): rows stored permuted within each head (GGUF
    q/k of llama-family models, LlamaModel.permute) come out in Hugging
    Face order, whole tensors and row ranges of whole heads, block and
    float types: stored row h*p + 2j + s at h*p + s*p/2 + j (transformers'
    reverse_permute_weights). Heads that do not fit are refused, nothing
    written."""
    import gguf
    from test_contradictions import _gguf, _rng

    x = _rng().standard_normal((12, 256)).astype(np.float32)
    T = gguf.GGMLQuantizationType
    tensors = {f"w.{t.name}": (gguf.quants.quantize(x, t), t) for t in (T.Q4_0, T.Q8_0)}
    tensors["w.Q4_K"] = _rng().integers(0, 256, (12, 144), dtype=np.uint8), T.Q4_K
    tensors["w.F16"] = x.astype(np.float16)
    _gguf(tmp_path / "m.gguf", tensors)
    checked = 0
    with weightstream.open(str(tmp_path / "m.gguf")) as ck:
        for name in tensors:
            rows = ck.matrix(name)[0]
            for p, r in ((2, (0, 12)), (4, (0, 12)), (4, (4, 8)), (6, (6, 12)), (12, (0, 12))):
                stored = _bits(ck.get_slice(name, rows=r)).reshape(r[1] - r[0], -1)
                n = stored.shape[0]
                want = stored.reshape(n // p, p // 2, 2, -1).transpose(0, 2, 1, 3).reshape(n, -1)
                out = np.full(ck.slice_shape(name, rows=r), 0x7FC1, dtype=np.uint16)
                ck.load_into([name], [out], slices=[(r, None)], unpermute=[p])
                assert np.array_equal(out.reshape(n, -1), want), (name, p, r)
                checked += 1
            for p, r in ((2, (1, 3)), (3, (0, rows)), (4, (0, 6))):
                out = np.full(ck.slice_shape(name, rows=r), 0x7FC1, dtype=np.uint16)
                try:
                    ck.load_into([name], [out], slices=[(r, None)], unpermute=[p])
                except weightstream.WeightstreamError as e:
                    assert f"cannot be un-permuted in heads of {p} rows" in str(e)
                else:
                    raise AssertionError(f"{name}: rows {r} un-permuted in heads of {p}")
                assert (out == 0x7FC1).all()
    assert checked == 20, checked
