"""weightstream.transformers with the real transformers (CPU torch): every
parameter bit for bit the BF16 reference (gguf-py's dequantization, or the
packed formats' reference decoders), logits equal to the same model class
loaded by transformers from that BF16 reference, transformers' own
from_pretrained(gguf_file=...) compared, and patch()."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, LlamaForCausalLM, PreTrainedModel

import doc_examples  # tests/fixtures: the docs' blocks and their markers
import models
import weightstream
import weightstream.transformers as wst

transformers.logging.set_verbosity_error()
GGUF = ["llama-q4_k_m", "llama-q8_0", "llama-iq4_xs", "qwen3-q4_k_m", "qwen3moe-q4_k_m", "qwen3moe-iq4_xs",
        "llama-q8_0-tied", "llama-q4_k_m-split"]
TOKENS = torch.tensor([[1, 17, 42, 99, 7, 300, 5, 250]])


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.detach().contiguous().view(torch.int16)


def assert_bits(model, want: dict[str, torch.Tensor]) -> None:
    got = model.state_dict()
    for name, t in want.items():
        assert got[name].shape == t.shape, name
        assert torch.equal(bits(got[name]), bits(t)), f"{name} differs from the reference"


def reference_model(ref: Path):
    return AutoModelForCausalLM.from_pretrained(ref, dtype=torch.bfloat16)


def logits(model) -> torch.Tensor:
    with torch.no_grad():
        return model(TOKENS).logits


@pytest.mark.parametrize("name", GGUF)
def test_gguf_parameters_and_logits_equal_the_bf16_reference(gguf_models, name):
    path, ref, files = gguf_models[name]
    model = wst.load_model(path, device="cpu")
    want = load_file(ref / "model.safetensors")
    tied = name.endswith("-tied")
    assert set(model.state_dict()) == set(want) | ({"lm_head.weight"} if tied else set())
    assert all(p.dtype == torch.bfloat16 and p.device.type == "cpu" for p in model.parameters())
    assert_bits(model, want)
    if tied:
        assert model.lm_head.weight is model.model.embed_tokens.weight
    expected = reference_model(ref)
    # Buffers (rotary inv_freq) as transformers' own load initializes them.
    for (n, b), (_, c) in zip(model.named_buffers(), expected.named_buffers()):
        assert torch.equal(b, c), n
    assert torch.equal(logits(model), logits(expected))
    if name.endswith("-split"):  # the set by its directory, and by its first file (above)
        assert_bits(wst.load_model(path.parent, device="cpu"), want)


@pytest.mark.parametrize("name", GGUF)
def test_transformers_own_gguf_loader_compared(gguf_models, name):
    """transformers dequantizes with gguf-py in float32 and casts to BF16
    (round to nearest even) after its processor: the same bits, except for
    a split set, of which it reads only the file it is given: every tensor
    in the other files keeps its random initialization."""
    pytest.importorskip("accelerate", reason="transformers needs accelerate to load a GGUF")
    path, ref, files = gguf_models[name]
    ours = wst.load_model(path, device="cpu").state_dict()
    theirs = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.bfloat16).state_dict()
    differ = sorted(k for k in ours if not torch.equal(bits(ours[k]), bits(theirs[k])))
    if not name.endswith("-split"):
        assert differ == []
        return
    import gguf

    first = {t.name for t in gguf.GGUFReader(files[0]).tensors}
    assert differ and len(first) < len(ours)
    # What differs is exactly what lies outside the first file (mapped to transformers names).
    want = load_file(ref / "model.safetensors")
    outside = {k for k in want if not torch.equal(bits(theirs[k]), bits(want[k]))}
    assert set(differ) == outside and "model.embed_tokens.weight" not in outside


@pytest.mark.parametrize("kind", ["fp8", "nvfp4-modelopt", "nvfp4-ct"])
def test_packed_safetensors_parameters_and_logits(packed_models, kind):
    d, ref = packed_models[kind]
    model = wst.load_model(d, device="cpu")
    assert getattr(model.config, "quantization_config", None) is None
    want = load_file(ref / "model.safetensors")
    assert set(model.state_dict()) == set(want)
    assert_bits(model, want)
    assert torch.equal(logits(model), logits(reference_model(ref)))


def test_a_declared_fp8_scale_that_is_missing_is_refused(packed_models, tmp_path):
    """Issue 40 item 13 through transformers: block FP8 whose config declares
    weight_block_size, one weight_scale_inv left out. It loaded as if every
    scale were 1; now refused, naming the weight."""
    import shutil

    from safetensors.torch import save_file

    d = tmp_path / "fp8-no-scale"
    shutil.copytree(packed_models["fp8"][0], d)
    (st,) = d.glob("*.safetensors")
    tensors = load_file(st)
    dropped = next(n for n in sorted(tensors) if n.endswith("_scale_inv"))
    del tensors[dropped]
    save_file(tensors, str(st), metadata={"format": "pt"})
    with pytest.raises(weightstream.WeightstreamError, match=dropped.removesuffix("_scale_inv")) as e:
        wst.load_model(d, device="cpu")
    assert e.value.kind == "config_mismatch"


@pytest.mark.parametrize("name", ["llama-q4_k_m", "qwen3moe-q4_k_m"])
def test_float16_parameters_are_rounded_once_from_the_exact_values(gguf_models, name):
    """dtype=torch.float16 (issue 57): every parameter is gguf-py's exact
    dequantization rounded once to float16 by numpy, not the BF16 values
    cast (which loses 3 of float16's mantissa bits)."""
    path, _, files = gguf_models[name]
    model = wst.load_model(path, device="cpu", dtype=torch.float16)
    want = models.reference(files, np.float16)
    twice = models.reference(files)
    assert any(not np.array_equal(want[n], twice[n].astype(np.float16)) for n in want), "the check could not fail"
    for n, x in want.items():
        got = model.get_parameter(n)
        assert got.dtype == torch.float16 and torch.equal(bits(got), torch.from_numpy(x.view(np.int16))), n


def test_other_dtype_is_cast_from_the_bf16_bits(gguf_models):
    path, ref, _ = gguf_models["llama-q4_k_m"]
    model = wst.load_model(path, device="cpu", dtype=torch.float32)
    for name, t in load_file(ref / "model.safetensors").items():
        got = model.get_parameter(name)
        assert got.dtype == torch.float32 and torch.equal(got, t.float()), name


def test_unmapped_tensor_and_arithmetic_processor_are_refused(gguf_models, tmp_path):
    path = gguf_models["llama-q8_0"][0]
    odd = models.rewrite(path, tmp_path / "odd.gguf", drop=(), extra={"blk.0.mystery.weight": np.ones(8, np.float32)})
    with pytest.raises(wst.UnsupportedModel, match=r"blk\.0\.mystery\.weight"):
        wst.load_model(odd, device="cpu")
    import gguf

    w = gguf.GGUFWriter(str(tmp_path / "gemma2.gguf"), arch="gemma2")
    w.add_block_count(1)
    w.add_tensor("output_norm.weight", np.ones(8, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(wst.UnsupportedModel, match="Gemma2TensorProcessor"):
        wst.load_model(tmp_path / "gemma2.gguf", device="cpu")


def test_an_incomplete_checkpoint_is_refused_and_never_falls_back(gguf_models, tmp_path):
    """A Qwen3-MoE GGUF without one layer's ffn_up_exps: transformers' own
    loader leaves that half of the fused gate_up_proj zero; weightstream
    refuses it by name, and patch() does not hand it to transformers."""
    path = gguf_models["qwen3moe-q4_k_m"][0]
    d = tmp_path / "incomplete"
    d.mkdir()
    gap = models.rewrite(path, d / "model.gguf", drop=("blk.1.ffn_up_exps.weight",))
    with pytest.raises(wst.IncompleteCheckpoint, match=r"gate_up_proj .*has no blk\.1\.ffn_up_exps"):
        wst.load_model(gap, device="cpu")
    with wst.patch(), warnings.catch_warnings():
        warnings.simplefilter("error", wst.FallbackWarning)
        with pytest.raises(wst.IncompleteCheckpoint, match="ffn_up_exps"):
            AutoModelForCausalLM.from_pretrained(d, gguf_file="model.gguf", dtype=torch.bfloat16)
    # A parameter with no tensor at all (the final norm): refused the same way.
    gap = models.rewrite(path, d / "no-norm.gguf", drop=("output_norm.weight",))
    with pytest.raises(wst.IncompleteCheckpoint, match=r"model\.norm\.weight"):
        wst.load_model(gap, device="cpu")


@pytest.fixture
def spy(monkeypatch):
    """The loads that went through weightstream."""
    calls = []
    real = wst._materialize
    monkeypatch.setattr(wst, "_materialize", lambda *a: calls.append(a[0]) or real(*a))
    return calls


def test_patch_routes_from_pretrained_through_weightstream(gguf_models, spy):
    original = PreTrainedModel.__dict__["from_pretrained"]
    path, ref, _ = gguf_models["llama-q4_k_m"]
    want = load_file(ref / "model.safetensors")
    with warnings.catch_warnings():
        warnings.simplefilter("error", wst.FallbackWarning)
        with wst.patch():
            model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.bfloat16)
        assert PreTrainedModel.__dict__["from_pretrained"] is original
        assert spy == [model]
        assert_bits(model, want)
        # Once at start-up, until unpatch(); a model class, a gguf_file path of its own.
        wst.patch()
        try:
            model = LlamaForCausalLM.from_pretrained(None, gguf_file=str(path), dtype="bfloat16", device_map="cpu")
        finally:
            wst.unpatch()
    assert PreTrainedModel.__dict__["from_pretrained"] is original
    assert len(spy) == 2 and isinstance(model, LlamaForCausalLM)
    assert_bits(model, want)
    # Not patched any more: transformers' own loader (accelerate needed).
    if pytest.importorskip("accelerate"):
        AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.bfloat16)
        assert len(spy) == 2


def test_patched_auto_class_never_parses_the_file_with_gguf_py(gguf_models, spy, monkeypatch):
    """Under patch(), AutoModelForCausalLM gets its config from weightstream's
    metadata reader: transformers' load_gguf_checkpoint (gguf-py's parse of
    the whole vocabulary, 2 s for 32000 tokens) is not called at all."""
    import transformers.configuration_utils as cu

    def refuse(*a, **k):
        raise AssertionError("load_gguf_checkpoint was called")

    monkeypatch.setattr(cu, "load_gguf_checkpoint", refuse)
    monkeypatch.setattr(wst._gguf_utils, "load_gguf_checkpoint", refuse)
    path, ref, _ = gguf_models["llama-q4_k_m"]
    with wst.patch(), warnings.catch_warnings():
        warnings.simplefilter("error", wst.FallbackWarning)
        model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.bfloat16)
    assert spy == [model]
    assert_bits(model, load_file(ref / "model.safetensors"))


@pytest.mark.parametrize("case", ["no dtype", "extra kwarg", "hub id"])
def test_patch_falls_back_with_one_warning(gguf_models, spy, monkeypatch, case):
    pytest.importorskip("accelerate", reason="the fallback is transformers' GGUF loader, which needs accelerate")
    path = gguf_models["llama-q8_0"][0]
    args, kwargs = (path.parent,), {"gguf_file": path.name, "dtype": torch.bfloat16}
    reason = {"no dtype": "no dtype given", "extra kwarg": "output_loading_info", "hub id": "not a local file"}[case]
    if case == "no dtype":
        del kwargs["dtype"]
    elif case == "extra kwarg":
        kwargs["output_loading_info"] = True
    else:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        args, kwargs["gguf_file"] = ("weightstream-test/not-on-this-machine",), "model.gguf"
    with wst.patch(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            model = AutoModelForCausalLM.from_pretrained(*args, **kwargs)
        except OSError:
            model = None  # offline: transformers' own loader cannot fetch it either
    ours = [w for w in caught if issubclass(w.category, wst.FallbackWarning)]
    assert len(ours) == 1 and reason in str(ours[0].message), [str(w.message) for w in ours]
    assert spy == []
    if case == "no dtype":
        assert next(model.parameters()).dtype == torch.float32  # transformers' float32 dequantization
    elif case == "extra kwarg":
        model, info = model  # transformers' (model, loading info)
        assert info["missing_keys"] == set() or not info["missing_keys"]
    else:
        assert model is None


def test_doc_examples_run(gguf_models, packed_models, tmp_path, monkeypatch):
    """The Python blocks of the docs marked to run here (`<!-- example:
    vllm-venv (this file) -->`: docs/transformers.md's and README.md's), each
    doc's in order in one namespace, in a directory holding the files they
    name (README.md's model-q4_k_m.gguf is the same stand-in)."""
    (tmp_path / "tiny-llama-q4_k_m.gguf").symlink_to(gguf_models["llama-q4_k_m"][0])
    (tmp_path / "model-q4_k_m.gguf").symlink_to(gguf_models["llama-q4_k_m"][0])
    (tmp_path / "tiny-llama-split").symlink_to(gguf_models["llama-q4_k_m-split"][0].parent)
    (tmp_path / "tiny-llama-fp8").symlink_to(packed_models["fp8"][0])
    monkeypatch.chdir(tmp_path)
    blocks = doc_examples.blocks_for(__file__)
    assert all(b.lang == "python" for b in blocks), [b.where for b in blocks]
    assert len([b for b in blocks if b.doc == "docs/transformers.md"]) >= 3
    for doc in dict.fromkeys(b.doc for b in blocks):
        namespace: dict = {}
        try:
            for b in blocks:
                if b.doc == doc:
                    exec(compile(b.body, b.where, "exec"), namespace)
        finally:
            wst.unpatch()  # whatever the examples left patched
