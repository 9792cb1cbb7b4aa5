"""Run by tests/python/test_s3.py with a Python that has torch and
transformers (the vLLM venv: the object-store suite's own has neither),
in one store's environment: `weightstream.transformers.load_model` of each
(local path, URL) pair, and of each URL that must be refused. Prints one
JSON object: per pair, the parameters and buffers whose bits differ and
the config keys that differ; per refused URL, the error's type, kind and
message; transformers' from_pretrained(gguf_file=URL) under patch(); and
the docs' example blocks given, run. One process for all of a store's cases: importing transformers
is most of its time.

    python transformers_loads.py '{"same": [[local, url], ...], "refused": [url, ...],
                                  "patched": [[local, url], ...], "run": [[where, code], ...]}'
"""
from __future__ import annotations

import json
import sys

import torch

import weightstream
from weightstream.transformers import load_model


def tensors(model) -> dict:
    """Every parameter and buffer (tied ones once per name), as raw bytes."""
    named = dict(model.named_parameters(remove_duplicate=False))
    named.update(model.named_buffers(remove_duplicate=False))
    return {k: (str(v.dtype), list(v.shape), v.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
            for k, v in named.items()}


def compare(local: str, url: str) -> dict:
    want, got = load_model(local, device="cpu"), load_model(url, device="cpu")
    a, b = tensors(want), tensors(got)
    ca, cb = want.config.to_dict(), got.config.to_dict()
    return {"tensors": len(a), "class": type(got).__name__,
            "differ": sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k)),
            "config_differ": sorted(k for k in ca.keys() | cb.keys() if ca.get(k) != cb.get(k) and k != "_name_or_path"),
            "name_or_path": cb.get("_name_or_path")}


def patched(local: str, url: str) -> dict:
    """transformers' own from_pretrained(gguf_file=url) under patch(): served
    by weightstream (no FallbackWarning), the same model as load_model(local)."""
    import warnings

    from transformers import AutoModelForCausalLM

    from weightstream.transformers import FallbackWarning, patch
    with warnings.catch_warnings(record=True) as caught, patch():
        warnings.simplefilter("always")
        got = AutoModelForCausalLM.from_pretrained(".", gguf_file=url, dtype=torch.bfloat16)
    a, b = tensors(load_model(local, device="cpu")), tensors(got)
    return {"tensors": len(a), "differ": sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k)),
            "fallbacks": [str(w.message) for w in caught if issubclass(w.category, FallbackWarning)]}


def refusal(url: str) -> dict:
    try:
        load_model(url, device="cpu")
    except Exception as e:  # noqa: BLE001 (what was raised is the result)
        return {"type": type(e).__name__, "kind": getattr(e, "kind", None), "message": str(e)}
    return {"type": None}


def run(blocks: list) -> list:
    """The docs' example blocks ([where, code]), in order in one namespace:
    what each printed."""
    import contextlib
    import io
    namespace: dict = {}
    printed = []
    for where, body in blocks:
        with contextlib.redirect_stdout(io.StringIO()) as f:
            exec(compile(body, where, "exec"), namespace)
        printed.append(f.getvalue())
    return printed


def main() -> None:
    cases = json.loads(sys.argv[1])
    out = {"weightstream": weightstream.__file__,
           "same": [compare(local, url) for local, url in cases.get("same", [])],
           "refused": [refusal(url) for url in cases.get("refused", [])],
           "patched": [patched(local, url) for local, url in cases.get("patched", [])],
           "run": run(cases.get("run", []))}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
