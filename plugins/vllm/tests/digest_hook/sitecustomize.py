"""Test-only: on PYTHONPATH for plugins/vllm/tests/layouts.py, so that every process
vLLM spawns (engine core, workers: the CPU platform spawns them, so a
patch made in the parent is not inherited) records a digest of its model's
parameters right after the load format's `load_weights` and before vLLM's
post-load processing (which on the CPU packs linear weights for oneDNN and
empties the parameters). It wraps `process_weights_after_loading` in
vllm.model_executor.model_loader.base_loader as that module is imported;
layouts.py reads `model._weightstream_test_digests` back with
collective_rpc."""
import importlib.abc
import importlib.util
import sys

TARGET = "vllm.model_executor.model_loader.base_loader"


def parameter_digests(model) -> dict:
    """{name: sha256 prefix of the bits} of a model's parameters."""
    import hashlib

    import torch

    out = {}
    for name, p in model.named_parameters():
        t = p.detach().contiguous().cpu()
        if t.dtype.is_floating_point and t.element_size() == 2:
            t = t.view(torch.int16)
        out[name] = hashlib.sha256(t.numpy().tobytes()).hexdigest()[:16]
    return out


def _wrap(module) -> None:
    original = module.process_weights_after_loading

    def wrapped(model, *args, **kwargs):
        model._weightstream_test_digests = parameter_digests(model)
        return original(model, *args, **kwargs)

    module.process_weights_after_loading = wrapped


class _Loader(importlib.abc.Loader):
    def __init__(self, inner):
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        _wrap(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != TARGET:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Loader(spec.loader)
        return spec


sys.meta_path.insert(0, _Finder())
