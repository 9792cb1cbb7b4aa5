#!/usr/bin/env python3
"""Greedy tokens from vLLM for several runs in one process, each with its
own LLM keyword arguments (generate.py's `--each` takes none):

    python plugins/vllm/tests/generate_s3.py '[["MODEL", "LOAD_FORMAT", {"model_loader_extra_config": {...}}], ...]' [--tp N]

prints "TOKENS i [...]" or "FAILED i <error>" for the i-th run."""
import json
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from generate import generate  # noqa: E402


def main():
    args = sys.argv[1:]
    tp = 1
    if "--tp" in args:
        i = args.index("--tp")
        tp = int(args[i + 1])
        del args[i:i + 2]
    for i, (model, load_format, extra) in enumerate(json.loads(args[0])):
        if tp > 1:
            extra.update(tensor_parallel_size=tp, distributed_executor_backend="mp")
        try:
            print(f"TOKENS {i} " + json.dumps(generate(model, load_format, shutdown=True, **extra)), flush=True)
        except Exception as e:  # the others still run
            traceback.print_exc()
            print(f"FAILED {i} " + json.dumps(f"{type(e).__name__}: {e}"), flush=True)


if __name__ == "__main__":
    main()
