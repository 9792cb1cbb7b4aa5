"""gguf-py's tensor-name tables without gguf-py's package `__init__`.

Mapping GGUF tensor names to Hugging Face ones (the vLLM plugin's
gguf_names, transformers' get_gguf_hf_weights_map under
weightstream.transformers) needs two of gguf-py's modules: `constants`
(MODEL_ARCH_NAMES) and `tensor_mapping` (get_tensor_name_map). Importing
`gguf` also imports its reader, writer, quantizers and tokenizer back ends,
mistral_common among them: 0.2-0.5 s here, more than a 0.3 GB model takes
to load. These are the same two files of the installed gguf-py, loaded as
a private package; where `gguf` is already imported, its own modules.
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import sys
import threading
import types

_PACKAGE = __name__ + "._gguf"
_lock = threading.Lock()


def tables() -> tuple[types.ModuleType, types.ModuleType]:
    """(constants, tensor_mapping) of the installed gguf-py."""
    if "gguf" in sys.modules and hasattr(sys.modules["gguf"], "constants"):
        import gguf

        return gguf.constants, gguf.tensor_mapping
    with _lock:
        if _PACKAGE not in sys.modules:
            spec = importlib.util.find_spec("gguf")
            if spec is None or not spec.submodule_search_locations:
                raise ImportError("gguf-py (the `gguf` package) is needed to map GGUF tensor names")
            package = types.ModuleType(_PACKAGE)
            package.__path__ = list(spec.submodule_search_locations)
            sys.modules[_PACKAGE] = package
    return importlib.import_module(_PACKAGE + ".constants"), importlib.import_module(_PACKAGE + ".tensor_mapping")


@contextlib.contextmanager
def as_gguf():
    """While it lasts, `from gguf import MODEL_ARCH_NAMES, get_tensor_name_map`
    (what transformers' get_gguf_hf_weights_map imports) finds gguf-py's own
    two modules, get_tensor_name_map memoized (the function recurses into
    every submodule and rebuilds the same table each time). Where `gguf` is
    imported already, it is used as it is, memoized the same way. Another
    thread importing `gguf` meanwhile would get an error, never other code."""
    constants, tensor_mapping = tables()
    real = sys.modules.get("gguf")
    stand_in = types.ModuleType("gguf")
    stand_in.__spec__ = importlib.util.find_spec("gguf") if real is None else real.__spec__  # for find_spec("gguf") callers
    stand_in.MODEL_ARCH_NAMES = constants.MODEL_ARCH_NAMES
    stand_in.get_tensor_name_map = functools.lru_cache(maxsize=None)(tensor_mapping.get_tensor_name_map)
    if real is not None:
        original = real.get_tensor_name_map
        real.get_tensor_name_map = stand_in.get_tensor_name_map
        try:
            yield
        finally:
            real.get_tensor_name_map = original
        return
    sys.modules["gguf"] = stand_in
    try:
        yield
    finally:
        if sys.modules.get("gguf") is stand_in:
            del sys.modules["gguf"]
