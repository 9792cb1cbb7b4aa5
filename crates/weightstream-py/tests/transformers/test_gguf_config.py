"""weightstream.transformers derives a GGUF's config from weightstream's own
metadata reader (_gguf_config.py), not from a second parse of the file
with gguf-py: it must stay exactly what transformers' load_gguf_checkpoint
derives, for the test models and for every special case of its code."""
from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest
from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

import weightstream
from weightstream._gguf_config import config_dict

from test_transformers import GGUF


def ours(path: Path) -> dict | None:
    with weightstream.open(path, skip_unsupported=True) as ck:
        names = ck.keys() + [n for n, _ in ck.skipped()]
        return config_dict(ck.metadata(tokenizer=False), names,
                           lambda: len(ck.metadata().get("tokenizer.ggml.tokens") or []))


def theirs(path: Path) -> dict:
    return load_gguf_checkpoint(str(path), return_tensors=False)["config"]


@pytest.mark.parametrize("name", GGUF)
def test_test_models_config_equals_load_gguf_checkpoints(gguf_models, name):
    path = gguf_models[name][0]
    assert ours(path) == theirs(path)


def write(path: Path, arch: str, name: str | None = "m", tokens: int = 0, extra=(), tensors=("output.weight",)) -> Path:
    """A GGUF of `arch`'s usual keys, a tokenizer of `tokens` tokens,
    `extra` (key, value, type) key-values and tiny F32 tensors."""
    w = gguf.GGUFWriter(str(path), arch=arch)
    if name is not None:
        w.add_name(name)
    w.add_context_length(256)
    w.add_embedding_length(64)
    w.add_block_count(2)
    w.add_feed_forward_length(128)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    if tokens:
        w.add_tokenizer_model("gpt2")
        w.add_token_list([f"t{i}" for i in range(tokens)])
        w.add_token_types([1] * tokens)
    for key, value, vtype in extra:
        w.add_key_value(key, value, vtype, sub_type=gguf.GGUFValueType.UINT32 if vtype == gguf.GGUFValueType.ARRAY else None)
    for t in tensors:
        w.add_tensor(t, np.ones((2, 32), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


U32, ARRAY = gguf.GGUFValueType.UINT32, gguf.GGUFValueType.ARRAY
CASES = {
    # vocab_size absent: from the token list; present: its own value.
    "llama-vocab-from-tokens": dict(arch="llama", tokens=300),
    "llama-vocab-key": dict(arch="llama", tokens=300, extra=[("llama.vocab_size", 512, U32)]),
    # general.name exactly "mistral" makes it Mistral; a name containing it does not.
    "llama-named-mistral": dict(arch="llama", name="mistral"),
    "llama-named-mistral-7b": dict(arch="llama", name="mistral-7b"),
    "llama-no-name": dict(arch="llama", name=None),
    "llama-tied": dict(arch="llama", tensors=("token_embd.weight",)),
    "qwen2": dict(arch="qwen2"),
    "qwen2moe": dict(arch="qwen2moe", extra=[("qwen2moe.expert_count", 4, U32), ("qwen2moe.expert_used_count", 2, U32)]),
    "qwen3moe": dict(arch="qwen3moe", extra=[("qwen3moe.expert_count", 4, U32)]),
    "gemma3": dict(arch="gemma3"),
    "falcon-tie-exception": dict(arch="falcon"),
    "stablelm-bias-parallel": dict(arch="stablelm", tensors=("blk.0.attn_q.bias",)),
    "stablelm-ffn-norm": dict(arch="stablelm", tensors=("blk.0.ffn_norm.weight", "output.weight")),
    "phi3": dict(arch="phi3"),
    # A one-element array reads as its element; a longer one as a list.
    "lfm2-kv-heads-array": dict(arch="lfm2", extra=[("lfm2.attention.head_count_kv", [0, 2], ARRAY),
                                                    ("lfm2.shortconv.l_cache", 3, U32)]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_special_cases_equal_load_gguf_checkpoints(tmp_path, case):
    path = write(tmp_path / f"{case}.gguf", **CASES[case])
    assert ours(path) == theirs(path)


def test_an_unsupported_architecture_is_refused_as_transformers_refuses_it(tmp_path):
    path = write(tmp_path / "bert.gguf", "bert")
    with pytest.raises(ValueError, match="not supported") as e:
        theirs(path)
    with pytest.raises(ValueError, match=str(e.value)):
        ours(path)


def test_gpt_oss_and_t5_are_left_to_transformers(tmp_path):
    for arch in ("gpt-oss", "t5"):
        assert ours(write(tmp_path / f"{arch}.gguf", arch)) is None
