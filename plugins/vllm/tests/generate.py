#!/usr/bin/env python3
"""Greedy tokens from vLLM for one checkpoint and load format, as JSON on
the line that starts with "TOKENS ". Runs in its own process (vLLM starts engine
processes; a script that starts LLM needs the __main__ guard).

    python plugins/vllm/tests/generate.py MODEL_DIR LOAD_FORMAT [HF_CONFIG_DIR] [--tp N]

With --tp N the model runs tensor-parallel on N CPU ranks (one OpenMP
thread set per rank: VLLM_CPU_OMP_THREADS_BIND, set by the caller).

    python plugins/vllm/tests/generate.py --each '[["MODEL_DIR", "LOAD_FORMAT"], ...]'

runs several in turn in this one process (vLLM imported once: about 15 s
less each on 2 cores), printing "TOKENS i [...]" or "FAILED i <error>" for
the i-th.
"""
import json
import sys

# The test suite's prompts and engine settings (the suite starts its
# engines through engine_runner.py; this script is the by-hand form).
from engine_runner import ENGINE, MAX_TOKENS, PROMPTS


def generate(model: str, load_format: str, shutdown: bool = False, **extra) -> list[list[int]]:
    from vllm import LLM, SamplingParams

    llm = LLM(model=model, load_format=load_format, **{**ENGINE, **extra})
    try:
        outs = llm.generate([{"prompt_token_ids": p} for p in PROMPTS], SamplingParams(max_tokens=MAX_TOKENS, temperature=0.0))
        return [list(o.outputs[0].token_ids) for o in outs]
    finally:
        if shutdown:  # its engine processes, before the next one starts
            llm.llm_engine.engine_core.shutdown()


def each(runs: list) -> None:
    import gc
    import traceback

    for i, (model, load_format) in enumerate(runs):
        try:
            print(f"TOKENS {i} " + json.dumps(generate(model, load_format, shutdown=True)), flush=True)
        except Exception as e:  # the others still run
            traceback.print_exc()
            print(f"FAILED {i} " + json.dumps(f"{type(e).__name__}: {e}"), flush=True)
        gc.collect()


def main():
    args = sys.argv[1:]
    if args[0] == "--each":
        each(json.loads(args[1]))
        return
    tp = 1
    if "--tp" in args:
        i = args.index("--tp")
        tp = int(args[i + 1])
        del args[i:i + 2]
    model, load_format = args[0], args[1]
    extra = {"hf_config_path": args[2]} if len(args) > 2 else {}
    if tp > 1:
        extra.update(tensor_parallel_size=tp, distributed_executor_backend="mp")
    print("TOKENS " + json.dumps(generate(model, load_format, **extra)), flush=True)


if __name__ == "__main__":
    main()
