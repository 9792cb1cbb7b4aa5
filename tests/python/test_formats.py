"""`weightstream formats` reports the block formats from their one
definition; checked here against ggml's own type traits (the built
llama.cpp's libggml-base) and gguf-py's table (GGML_QUANT_SIZES and type
ids), independent sources, and against the field order gguf-py's
dequantize reads (each block's f16 fields where gguf-py splits them)."""
from __future__ import annotations

import json

import gguf

import reference
from harness import run_ws


def test_formats_json_agrees_with_gguf_py():
    table = json.loads(run_ws("formats", "--json").stdout)
    blocks = {f["name"]: f for f in table["block_formats"]}
    assert {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"} <= set(blocks)
    for name, f in blocks.items():
        # ggml's own table (the built llama.cpp) for every format; gguf-py's
        # too where it knows the type (0.19 lacks Q2_0).
        assert reference.ggml_traits(f["ggml_id"]) == (name, f["elements"], f["bytes"]), name
        if name in gguf.GGMLQuantizationType.__members__:
            qtype = gguf.GGMLQuantizationType[name]
            assert f["ggml_id"] == int(qtype)
            assert (f["elements"], f["bytes"]) == gguf.GGML_QUANT_SIZES[qtype], name
        assert sum(x["bytes"] for x in f["fields"]) == f["bytes"], name
        assert name in table["supported"]
    # Where the f16 scale sits: first for most, last for Q2_K/Q3_K/Q6_K (gguf-py
    # splits those blocks with the scale at the end).
    assert [x["name"] for x in blocks["Q6_K"]["fields"]][-1] == "d"
    assert [(x["name"], x["offset"]) for x in blocks["Q2_K"]["fields"]][-2:] == [("d", 80), ("dmin", 82)]


def test_formats_text_lists_every_block_format():
    text = run_ws("formats").stdout
    for name in ("Q4_0", "Q4_K", "Q6_K"):
        assert name in text
    assert "bits/weight".upper() in text
