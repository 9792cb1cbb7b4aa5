#!/usr/bin/env python3
"""Greedy tokens from SGLang on the CPU for checkpoints in turn, in this one
process (SGLang imported once), as JSON lines:

    python plugins/sglang/tests/sglang_run.py '[{"model": DIR, "load_format": "weightstream", ...}, ...]'

Each run starts `sglang.Engine` on its model and load format and prints
"RESULT i {...}": the tokens for PROMPTS, the engine start's seconds, and
for every `reload` entry ({"model": DIR, "load_format": "auto"}) the tokens
and the seconds of `update_weights_from_disk` putting that checkpoint into
the same engine, through weightstream or SGLang's default loader ("auto":
the BF16 reference of the exact dequantization; same config, one engine
start fewer). An entry with "fails": true must be refused: its
(ok, message) goes in "failed", and the tokens after it in "reloads" as
any other. A failed run prints
"RESULT i {"error": ...}" and the next still runs.
"""
import json
import os
import sys
import time
import traceback

PROMPTS = [[1, 17, 42, 99, 7], [3, 200, 5], [11, 12, 13, 14, 15, 16]]
MAX_TOKENS = 16
# The smallest settings a CPU engine takes: SGLang's CPU engine
# (SGLANG_USE_CPU_ENGINE=1), torch_native attention (this CPU has no AMX
# for SGLang's CPU kernels), no CUDA graphs, no radix cache, a small KV pool;
# INFO logs: the loader's lines are what the tests read.
ENGINE = dict(device="cpu", attention_backend="torch_native", sampling_backend="pytorch", skip_tokenizer_init=True,
              disable_cuda_graph=True, disable_radix_cache=True, dtype="bfloat16", context_length=128,
              max_total_tokens=1024, max_running_requests=4, chunked_prefill_size=-1, mem_fraction_static=0.3,
              random_seed=0, log_level="info")


def tokens(engine) -> list:
    outs = engine.generate(input_ids=PROMPTS, sampling_params={"max_new_tokens": MAX_TOKENS, "temperature": 0.0})
    return [o["output_ids"] for o in outs]


def run(spec: dict) -> dict:
    import sglang

    extra = {k: v for k, v in spec.items() if k not in ("model", "reload")}
    t0 = time.perf_counter()
    engine = sglang.Engine(model_path=spec["model"], **{**ENGINE, **extra})
    out = {"start_s": round(time.perf_counter() - t0, 1)}
    try:
        out["tokens"] = tokens(engine)
        out["reloads"], out["reload_s"] = [], []
        for r in spec.get("reload", []):
            t0 = time.perf_counter()
            ok, message = engine.update_weights_from_disk(r["model"], r.get("load_format", "auto"))[:2]
            out["reload_s"].append(round(time.perf_counter() - t0, 3))
            if r.get("fails"):  # must fail, and the engine must go on
                out.setdefault("failed", []).append({"model": r["model"], "ok": ok, "message": message})
            elif not ok:
                raise RuntimeError(f"update_weights_from_disk({r['model']}): {message}")
            out["reloads"].append(tokens(engine))
    finally:
        engine.shutdown()
    return out


def main():
    os.environ.setdefault("SGLANG_USE_CPU_ENGINE", "1")
    for i, spec in enumerate(json.loads(sys.argv[1])):
        try:
            out = run(spec)
        except Exception as e:  # the others still run
            traceback.print_exc()
            out = {"error": f"{type(e).__name__}: {e}"}
        print(f"RESULT {i} " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
