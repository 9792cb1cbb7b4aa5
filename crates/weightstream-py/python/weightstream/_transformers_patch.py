"""weightstream.transformers.patch(): transformers' from_pretrained(...,
gguf_file=...) through weightstream (re-exported by weightstream.transformers)."""
from __future__ import annotations

import copy
import os
import re
import threading
import warnings
from typing import Optional

import torch
import transformers as _hf
from transformers.modeling_utils import PreTrainedModel

from . import transformers as _wst
from ._native import source_name as _source_name

# While patched: PreTrainedModel's from_pretrained, and each Auto class's.
_ORIGINAL: list = []
_AUTO_ORIGINALS: dict = {}
_DEPTH = [0]
_LOCAL = threading.local()
# from_pretrained arguments that change nothing for a local file.
_HARMLESS = {"cache_dir", "force_download", "proxies", "local_files_only", "token", "revision", "trust_remote_code",
             "low_cpu_mem_usage", "_from_auto", "_from_pipeline", "use_safetensors", "weights_only", "subfolder",
             "gguf_file", "config", "dtype", "torch_dtype", "device_map", "attn_implementation", "adapter_kwargs",
             "output_loading_info"}


def _device_of(device_map) -> Optional[str]:
    if device_map is None:
        return "cpu"  # transformers' default
    if isinstance(device_map, dict):
        return _device_of(device_map[""]) if set(device_map) == {""} else None
    if isinstance(device_map, int):
        return f"cuda:{device_map}"
    s = str(device_map)
    if s == "auto":
        return "auto" if torch.cuda.device_count() <= 1 else None
    return s if s == "cpu" or s == "cuda" or re.fullmatch(r"cuda:\d+", s) else None


def _shown(gguf_file) -> str:
    """How messages name `gguf_file`: a URL without its query (an Azure SAS
    `sig=`, a presigned `X-Amz-Signature`), as every other message does."""
    f = os.fspath(gguf_file)
    return repr(_source_name(f) if _wst._remote.is_url(f) else f)


def _not_here(kwargs) -> str:
    return f"{_shown(kwargs['gguf_file'])} is not a local file or an object-storage URL (a hub download is transformers' to make)"


def _why_not(name_or_path, model_args, kwargs) -> tuple[Optional[str], dict]:
    """(the reason this call cannot go through weightstream, or None; the
    load_model arguments when it can)."""
    path = _local_gguf(name_or_path, kwargs)
    if path is None:
        return _not_here(kwargs), {}
    unknown = sorted(k for k in kwargs if k not in _HARMLESS)
    if model_args or unknown:
        return f"arguments weightstream cannot honour: {', '.join(unknown) or 'positional model_args'}", {}
    if kwargs.get("trust_remote_code") or kwargs.get("adapter_kwargs") or kwargs.get("output_loading_info"):
        return "trust_remote_code, adapter_kwargs or output_loading_info asked for", {}
    dtype = kwargs.get("dtype", kwargs.get("torch_dtype"))
    if dtype is None or dtype == "auto":
        return ("no dtype given: transformers would dequantize to float32 exactly, and weightstream produces "
                "BF16 (pass dtype=torch.bfloat16, or another dtype to cast the BF16 values to)"), {}
    device = _device_of(kwargs.get("device_map"))
    if device is None:
        return f"device_map={kwargs.get('device_map')!r} (weightstream loads onto one device)", {}
    config = kwargs.get("config")
    if config is not None and not isinstance(config, _hf.PreTrainedConfig):
        return "config is not a PreTrainedConfig object", {}
    return None, dict(path=path, dtype=dtype, device=device, config=config,
                      attn_implementation=kwargs.get("attn_implementation"))


def _local_gguf(name_or_path, kwargs) -> Optional[str]:
    """The GGUF file from_pretrained would read, if it is on this machine
    (transformers' own order: gguf_file as a path, then inside the repo dir)
    or a URL weightstream reads (`s3://`, `gs://`, `az://`, ...)."""
    gguf_file = os.fspath(kwargs["gguf_file"])
    _wst._remote.refuse_hub_link(gguf_file)
    if _wst._remote.is_url(gguf_file) or os.path.isfile(gguf_file):
        return gguf_file
    if name_or_path is not None:
        local = os.path.join(os.fspath(name_or_path), kwargs.get("subfolder") or "", gguf_file)
        if os.path.isfile(local):
            return local
    return None


def _fall_back(cls, kwargs, reason, original, args):
    if _wst._remote.is_url(os.fspath(kwargs["gguf_file"])):
        # transformers' own loader reads no URL: handed one it fails with
        # an OSError that quotes it whole, query (credential) included.
        raise _wst.UnsupportedModel(f"{cls.__name__}.from_pretrained(gguf_file={_shown(kwargs['gguf_file'])}): "
                                    f"weightstream cannot serve it ({reason}), and transformers' own loader "
                                    "reads no URLs") from None
    warnings.warn(f"weightstream.transformers: {cls.__name__}.from_pretrained(gguf_file={_shown(kwargs['gguf_file'])}) "
                  f"goes to transformers' own loader: {reason}", _wst.FallbackWarning, stacklevel=4)
    _LOCAL.falling_back = True  # one warning: the Auto class's call ends in the model class's
    try:
        return original(cls, *args, **kwargs)
    finally:
        _LOCAL.falling_back = False


def _from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs):
    original = _ORIGINAL[0].__func__
    if kwargs.get("gguf_file") is None or getattr(_LOCAL, "falling_back", False):
        return original(cls, pretrained_model_name_or_path, *model_args, **kwargs)
    reason, args = _why_not(pretrained_model_name_or_path, model_args, kwargs)
    if reason is None:
        try:
            config = args["config"]
            prepared = _wst._prepare(args["path"], cls, args["dtype"], None if config is None else copy.deepcopy(config),
                                args["attn_implementation"], {})
        except (_wst.UnsupportedModel, ValueError) as e:
            reason = str(e)
    if reason is not None:
        return _fall_back(cls, kwargs, reason, original, (pretrained_model_name_or_path, *model_args))
    return _wst._materialize(*prepared, args["device"])


def _auto_from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs):
    """The Auto classes read the config before the model class's
    from_pretrained runs: a GGUF not on this machine is handed back here."""
    original = _AUTO_ORIGINALS[cls].__func__
    if kwargs.get("gguf_file") is None or getattr(_LOCAL, "falling_back", False):
        return original(cls, pretrained_model_name_or_path, *model_args, **kwargs)
    path = _local_gguf(pretrained_model_name_or_path, kwargs)
    if path is None:
        return _fall_back(cls, kwargs, _not_here(kwargs), original, (pretrained_model_name_or_path, *model_args))
    # A URL: transformers' Auto class cannot derive a config from one, so
    # the model class's from_pretrained (which warns) would never run: the
    # fallback, and its warning, happen here.
    url = _wst._remote.is_url(path)
    reason = _why_not(pretrained_model_name_or_path, model_args, kwargs)[0]
    if reason is None and kwargs.get("config") is None:
        # The Auto class would derive the config with transformers'
        # load_gguf_checkpoint, which parses the whole vocabulary with
        # gguf-py (2 s for 32000 tokens here) before the model class's
        # from_pretrained, which weightstream serves, even runs: give it
        # the same config from weightstream's metadata reader.
        try:
            kwargs = dict(kwargs, config=_wst.gguf_config(path))
        except (_wst.UnsupportedModel, ValueError) as e:
            reason = str(e) if url else None  # else transformers' own derivation, and its own message
    if reason is not None and url:
        return _fall_back(cls, kwargs, reason, original, (pretrained_model_name_or_path, *model_args))
    return original(cls, pretrained_model_name_or_path, *model_args, **kwargs)


def _auto_classes() -> list:
    """Every AutoModel* class: each holds its own copy of from_pretrained
    (auto_factory.auto_class_update), so each is patched on its own."""
    from transformers.models.auto import modeling_auto  # noqa: F401 (defines them all)
    from transformers.models.auto.auto_factory import _BaseAutoModelClass

    found, todo = [], [_BaseAutoModelClass]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if "from_pretrained" in sub.__dict__:
                found.append(sub)
    return found


class _Patch:
    """What patch() returns: active already; `with` deactivates it on exit."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        unpatch()
        return False


def patch() -> _Patch:
    """Route `from_pretrained(..., gguf_file=...)` (AutoModel* classes and
    model classes alike) through weightstream until unpatch() or the end of
    the `with` block. Calls it cannot serve bit-exactly (an architecture it
    does not map, a hub id not on disk, arguments it cannot honour, no
    dtype) go to transformers' own loader with one FallbackWarning naming
    the reason; for a URL, which transformers' loader cannot read, they
    raise UnsupportedModel instead, naming the object without its query."""
    if not _ORIGINAL:
        _ORIGINAL.append(PreTrainedModel.__dict__["from_pretrained"])
        PreTrainedModel.from_pretrained = classmethod(_from_pretrained)
        for auto in _auto_classes():
            _AUTO_ORIGINALS[auto] = auto.__dict__["from_pretrained"]
            auto.from_pretrained = classmethod(_auto_from_pretrained)
    _DEPTH[0] += 1
    return _Patch()


def unpatch() -> None:
    """Undo one patch() (the last one restores transformers' from_pretrained)."""
    _DEPTH[0] = max(0, _DEPTH[0] - 1)
    if _DEPTH[0] == 0 and _ORIGINAL:
        PreTrainedModel.from_pretrained = _ORIGINAL.pop()
        for auto, original in _AUTO_ORIGINALS.items():
            auto.from_pretrained = original
        _AUTO_ORIGINALS.clear()
