#!/usr/bin/env python3
"""Greedy tokens from vLLM for one checkpoint and load format, as JSON on
the line that starts with "TOKENS ". Runs in its own process (vLLM starts engine
processes; a script that starts LLM needs the __main__ guard).

    python tests/vllm/generate.py MODEL_DIR LOAD_FORMAT [HF_CONFIG_DIR] [--tp N]

With --tp N the model runs tensor-parallel on N CPU ranks (one OpenMP
thread set per rank: VLLM_CPU_OMP_THREADS_BIND, set by the caller).
"""
import json
import sys

PROMPTS = [[1, 17, 42, 99, 7], [3, 200, 5]]


def main():
    from vllm import LLM, SamplingParams

    args = sys.argv[1:]
    tp = 1
    if "--tp" in args:
        i = args.index("--tp")
        tp = int(args[i + 1])
        del args[i:i + 2]
    model, load_format = args[0], args[1]
    extra = {"hf_config_path": args[2]} if len(args) > 2 else {}
    if tp > 1:
        extra.update(tensor_parallel_size=tp, distributed_executor_backend="mp")
    llm = LLM(model=model, load_format=load_format, dtype="bfloat16", enforce_eager=True, skip_tokenizer_init=True,
              gpu_memory_utilization=0.1, max_model_len=128, seed=0, **extra)
    outs = llm.generate([{"prompt_token_ids": p} for p in PROMPTS], SamplingParams(max_tokens=16, temperature=0.0))
    print("TOKENS " + json.dumps([list(o.outputs[0].token_ids) for o in outs]), flush=True)


if __name__ == "__main__":
    main()
