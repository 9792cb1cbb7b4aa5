#!/usr/bin/env python3
"""Greedy tokens from vLLM for one checkpoint and load format, as JSON on
the line that starts with "TOKENS ". Runs in its own process (vLLM starts engine
processes; a script that starts LLM needs the __main__ guard).

    python tests/vllm/generate.py MODEL_DIR LOAD_FORMAT [HF_CONFIG_DIR]
"""
import json
import sys

PROMPTS = [[1, 17, 42, 99, 7], [3, 200, 5]]


def main():
    from vllm import LLM, SamplingParams

    model, load_format = sys.argv[1], sys.argv[2]
    extra = {"hf_config_path": sys.argv[3]} if len(sys.argv) > 3 else {}
    llm = LLM(model=model, load_format=load_format, dtype="bfloat16", enforce_eager=True, skip_tokenizer_init=True,
              gpu_memory_utilization=0.1, max_model_len=128, seed=0, **extra)
    outs = llm.generate([{"prompt_token_ids": p} for p in PROMPTS], SamplingParams(max_tokens=16, temperature=0.0))
    print("TOKENS " + json.dumps([list(o.outputs[0].token_ids) for o in outs]), flush=True)


if __name__ == "__main__":
    main()
