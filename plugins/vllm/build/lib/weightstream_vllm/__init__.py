"""vLLM plugin for weightstream.

vLLM calls `register()` once in every process (front end, engine core, each
worker) through the `vllm.general_plugins` entry point. It is idempotent,
imports vLLM lazily and never touches CUDA.
"""
from __future__ import annotations

LOAD_FORMAT = "weightstream"
_registered = False


def register() -> None:
    global _registered
    if _registered:
        return
    # Importing the module registers the loader with vLLM.
    from . import loader  # noqa: F401

    _registered = True
