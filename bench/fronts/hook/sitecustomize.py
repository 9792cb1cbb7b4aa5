"""Put on PYTHONPATH by bench/fronts/vllm_load.py: every process of a vLLM
engine (the engine itself, each tensor-parallel worker) times its model
loader's `load_weights` and appends {"pid", "loader", "seconds", "user",
"sys", "faults", "param_bytes"} (wall seconds; the process's CPU seconds in user space and
in the kernel, and its minor page faults, over the call; the model's parameter bytes
after it, and those of its linear layers) as a JSON line to
$WS_BENCH_TIMES; with $WS_BENCH_PROFILE set, the call runs under
cProfile and its stats go to $WS_BENCH_PROFILE.<pid>."""
import importlib.abc
import json
import os
import sys
import time

TARGET = "vllm.model_executor.model_loader.base_loader"


def _patch(module) -> None:
    base = module.BaseModelLoader
    original = base.load_model

    def load_model(self, *args, **kwargs):
        inner = type(self).load_weights.__get__(self)

        def timed(model, model_config):
            profile = os.environ.get("WS_BENCH_PROFILE")
            prof = None
            if profile:
                import cProfile

                prof = cProfile.Profile()
                prof.enable()
            import resource

            ru0 = resource.getrusage(resource.RUSAGE_SELF)
            t0 = time.perf_counter()
            try:
                return inner(model, model_config)
            finally:
                # The weights' bytes as loaded (before vLLM's post-load
                # processing repacks them for its kernels).
                param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
                # Of which the linear layers' (LinearBase: what a quantization
                # config can keep quantized; not embeddings, head or norms).
                from vllm.model_executor.layers.linear import LinearBase

                linear_bytes = sum(p.numel() * p.element_size() for m in model.modules() if isinstance(m, LinearBase)
                                   for p in m.parameters(recurse=False))
                seconds = time.perf_counter() - t0
                ru1 = resource.getrusage(resource.RUSAGE_SELF)
                if prof is not None:
                    prof.disable()
                    prof.dump_stats(f"{profile}.{os.getpid()}")
                with open(os.environ["WS_BENCH_TIMES"], "a") as f:
                    f.write(json.dumps({"pid": os.getpid(), "loader": type(self).__name__, "seconds": seconds,
                                        # CPU seconds of the whole process, in the kernel apart (page
                                        # faults of fresh parameter memory), and its minor faults.
                                        "user": ru1.ru_utime - ru0.ru_utime, "sys": ru1.ru_stime - ru0.ru_stime,
                                        "faults": ru1.ru_minflt - ru0.ru_minflt, "param_bytes": param_bytes,
                                        "linear_bytes": linear_bytes}) + "\n")

        self.load_weights = timed
        try:
            return original(self, *args, **kwargs)
        finally:
            del self.load_weights

    base.load_model = load_model


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != TARGET:
            return None
        sys.meta_path.remove(self)
        try:
            import importlib.util

            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        loader = spec.loader
        exec_module = loader.exec_module

        def patched(module):
            exec_module(module)
            _patch(module)

        loader.exec_module = patched
        return spec


if os.environ.get("WS_BENCH_TIMES"):
    sys.meta_path.insert(0, _Finder())
