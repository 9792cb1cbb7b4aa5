"""Hugging Face transformers models filled by weightstream.

    from weightstream.transformers import load_model, patch

    model = load_model("model-q4_k_m.gguf")                 # or a split set, or an FP8/NVFP4/... directory
    model = load_model("s3://bucket/llama-fp8/")            # or gs://, az://, ...: object storage
    with patch():                                            # or patch() once at start-up
        model = AutoModelForCausalLM.from_pretrained(d, gguf_file="model-q4_k_m.gguf", dtype=torch.bfloat16)

The model is built from its config on the meta device, as transformers'
own `from_pretrained` builds it, and every parameter is then allocated once
on the target device and filled by weightstream: no float32 copy of the
model ever exists. GGUF names and tensor layouts are transformers' own
(its `get_gguf_hf_weights_map` and the architecture's `TensorProcessor`
from modeling_gguf_pytorch_utils run on the BF16 bits), so a parameter
holds exactly what transformers' own GGUF loader gives it, rounded to BF16.

`transformers` (and torch) are optional dependencies of weightstream: only
this module imports them.
"""
from __future__ import annotations

import glob
import os
import re
from typing import Any, Optional

import numpy as np
import torch
import transformers as _hf
from transformers import modeling_gguf_pytorch_utils as _gguf_utils
from transformers.modeling_utils import _load_parameter_into_model

from . import Checkpoint, WeightstreamError, _parse_device
from . import _transformers_remote as _remote
from ._gguf_config import transformers_config as _transformers_config

__all__ = ["load_model", "patch", "unpatch", "UnsupportedModel", "IncompleteCheckpoint", "FallbackWarning"]

# transformers' TensorProcessors that only move values (rename, permute,
# stack, add an axis). weightstream hands them the BF16 bits as int16, so
# one that does arithmetic on the values (Gemma's and Nemotron's `w - 1`,
# Mamba's log) would compute garbage: those are refused by name, as is a
# processor class this list does not know (a newer transformers).
_DATA_MOVEMENT = {"TensorProcessor", "LlamaTensorProcessor", "Qwen2MoeTensorProcessor", "Lfm2TensorProcessor",
                  "MiniMaxM2TensorProcessor"}
# GGUF tensors transformers' loader skips on purpose: llama.cpp's
# precomputed Llama 3 RoPE factors, which transformers derives from the config.
_IGNORED_GGUF = re.compile(r"^rope_freqs\.weight$")
# Staged tensors (those transformers reorders) are loaded this many BF16 bytes at a time.
_STAGE_BYTES = 64 << 20


class UnsupportedModel(ValueError):
    """The checkpoint cannot be loaded bit-exactly through weightstream (an
    architecture, processor or tensor without a mapping); raised before any
    tensor is read. `patch()` falls back to transformers on it."""


class IncompleteCheckpoint(WeightstreamError):
    """The checkpoint lacks a tensor the model needs (a parameter, or one of
    the GGUF tensors transformers fuses into one). Never a reason for
    `patch()` to fall back: transformers would fill the gap with zeros or
    random values."""

    def __init__(self, message: str, file: Optional[str] = None):
        super().__init__(message)
        self.kind, self.file, self.tensor, self.offset = "incomplete", file, None, None


class FallbackWarning(UserWarning):
    """`patch()` handed a `from_pretrained` call back to transformers."""


def _gguf_files(path: str) -> tuple[str, bool]:
    """(the file holding the GGUF metadata, whether `path` is GGUF at all):
    a .gguf file, the first file of a split set, or a directory of them."""
    if os.path.isdir(path):
        files = sorted(glob.glob(os.path.join(path, "*.gguf")))
        if not files:
            return "", False
        first = [f for f in files if re.search(r"-0*1-of-\d+\.gguf$", f)]
        if len(first) > 1 or (not first and len(files) > 1):
            raise UnsupportedModel(f"{path}: more than one GGUF model in the directory ({len(files)} files)")
        return (first or files)[0], True
    return path, path.endswith(".gguf")


def _model_class(config, model_class):
    from transformers.models.auto.auto_factory import _get_model_class

    if model_class is not None and getattr(model_class, "_model_mapping", None) is None:
        return model_class  # a concrete class (LlamaForCausalLM)
    mapping = model_class._model_mapping if model_class is not None else _hf.AutoModelForCausalLM._model_mapping
    if type(config) not in mapping:
        raise UnsupportedModel(f"no {getattr(model_class, '__name__', 'AutoModelForCausalLM')} class for {type(config).__name__}")
    return _get_model_class(config, mapping)


class _Plan:
    """Where each checkpoint tensor goes: `direct` ones straight into their
    parameter, `staged` ones through transformers' processor first."""

    def __init__(self):
        self.direct: dict[str, str] = {}  # checkpoint name -> parameter
        self.staged: list[str] = []  # checkpoint names, in file order
        self.sources: dict[str, int] = {}  # parameter -> staged tensors that make it
        self.processor = None
        self.mapping: dict[str, str] = {}


def gguf_config(path):
    """The transformers config of a GGUF file (or split set, or directory
    holding one), as transformers' AutoConfig.from_pretrained(gguf_file=...)
    derives it, from weightstream's metadata reader (_gguf_config); a URL
    too (s3://, gs://, az://, ...)."""
    meta_file = None if _remote.is_url(os.fspath(path)) else _gguf_files(os.fspath(path))[0]
    with Checkpoint(os.fspath(path), "cpu") as ckpt:
        metadata = ckpt.metadata(tokenizer=False)
        # UnsupportedModel for an architecture weightstream does not serve
        # (those on transformers' new GGUF path derive their config there).
        _processor_class(metadata["general.architecture"])
        return _transformers_config(meta_file, ckpt, metadata, metadata["general.architecture"])[0]


def _processor_class(arch: str):
    """transformers' TensorProcessor for a GGUF architecture, if weightstream
    can run it on BF16 bits (raised on otherwise, before anything is built)."""
    from transformers.integrations.gguf.utils import is_gguf_arch_supported

    if is_gguf_arch_supported(arch):
        raise UnsupportedModel(f"GGUF architecture {arch!r} goes through transformers' new GGUF path "
                               "(conversion ops, not a TensorProcessor), which weightstream does not map yet")
    proc_class = _gguf_utils.TENSOR_PROCESSORS.get(arch, _gguf_utils.TensorProcessor)
    if proc_class.__name__ not in _DATA_MOVEMENT:
        raise UnsupportedModel(f"GGUF architecture {arch!r}: transformers converts its tensors with "
                               f"{proc_class.__name__}, which changes values (not only their order); "
                               "weightstream's BF16 cannot reproduce that bit for bit")
    return proc_class


def _gguf_plan(model, config_dict: dict, arch: str, ckpt: Checkpoint) -> _Plan:
    proc_class = _processor_class(arch)
    plan = _Plan()
    plan.processor = proc_class(config=config_dict)
    plan.mapping = _weights_map(model, plan.processor)
    params = dict(model.named_parameters())
    unmapped = []
    for name in ckpt.keys():
        target = plan.mapping.get(name) or plan.mapping.get(name.rsplit(".", 1)[0])
        if target is None:
            if not _IGNORED_GGUF.match(name):
                unmapped.append(name)
            continue
        shape = ckpt.shape(name)
        if target == plan.mapping.get(name) and target in params and list(params[target].shape) == shape \
                and _untouched(plan, name, shape):
            plan.direct[name] = target
        else:
            plan.staged.append(name)
            plan.sources[target] = plan.sources.get(target, 0) + 1
    if unmapped:
        raise UnsupportedModel(f"GGUF tensors with no {type(model).__name__} parameter in transformers' mapping: "
                               f"{', '.join(unmapped[:8])}{' ...' if len(unmapped) > 8 else ''}")
    _check_sources(plan, ckpt)
    return plan


def _check_sources(plan: _Plan, ckpt: Checkpoint) -> None:
    """A parameter transformers' processor makes from several GGUF tensors
    (Qwen-MoE's gate_up_proj from ffn_gate_exps and ffn_up_exps) needs all
    of them: with one missing, the processor leaves its part zero."""
    wanted: dict[str, set[str]] = {}
    for key, target in plan.mapping.items():
        if target in plan.sources:
            wanted.setdefault(target, set()).add(key)
    for target, keys in wanted.items():
        if len(keys) != plan.sources[target]:
            have = {n for n in plan.staged if (plan.mapping.get(n) or plan.mapping.get(n.rsplit(".", 1)[0])) == target}
            have_keys = {n if n in plan.mapping else n.rsplit(".", 1)[0] for n in have}
            raise IncompleteCheckpoint(f"{ckpt.path}: {target} is made from GGUF tensors {', '.join(sorted(keys))}; "
                                       f"the checkpoint has no {', '.join(sorted(keys - have_keys))}", str(ckpt.path))


def _weights_map(model, processor) -> dict[str, str]:
    """transformers' get_gguf_hf_weights_map, given gguf-py's name tables
    without gguf-py's package import (_gguf_tables.as_gguf: 0.2-0.5 s of
    tokenizer back ends it does not use), get_tensor_name_map memoized (it
    recurses into every submodule and rebuilds the same table each time,
    0.7 s of a 1.4 GB Llama's 2 s load here)."""
    from ._gguf_tables import as_gguf

    with as_gguf():
        return _gguf_utils.get_gguf_hf_weights_map(model, processor)


def _untouched(plan: _Plan, name: str, shape: list[int]) -> bool:
    """Whether transformers' processor passes this tensor through as it is:
    asked with a zero-stride stand-in of its shape (no memory)."""
    probe = np.broadcast_to(np.int16(0), shape)
    out = plan.processor.process(weights=probe, name=name, tensor_key_mapping=plan.mapping,
                                 parsed_parameters={"tensors": {}})
    return out.weights is probe and out.name == name


def _safetensors_plan(model, ckpt: Checkpoint) -> _Plan:
    plan = _Plan()
    params = dict(model.named_parameters())
    ignore = [re.compile(p) for p in (getattr(model, "_keys_to_ignore_on_load_unexpected", None) or [])]
    unknown = []
    for name in ckpt.keys():
        if name in params and list(params[name].shape) == ckpt.shape(name):
            plan.direct[name] = name
        elif not any(p.search(name) for p in ignore):
            unknown.append(f"{name} {ckpt.shape(name)}" if name in params else name)
    if unknown:
        raise UnsupportedModel(f"checkpoint tensors that are no {type(model).__name__} parameter (or of another "
                               f"shape): {', '.join(unknown[:8])}{' ...' if len(unknown) > 8 else ''}")
    return plan


def _build(model_class, config, dtype):
    """The model on the meta device, under transformers' own init context
    (default dtype, no tying, no init)."""
    from transformers.modeling_utils import patch_output_recorders

    from transformers.utils.generic import ContextManagers

    with ContextManagers(model_class.get_init_context(dtype, False, False, None)):
        model = model_class(config)
        patch_output_recorders(model)
    return model


def _bits_as(a: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a)).view(dtype)


def _fill(model, ckpt: Checkpoint, plan: _Plan, device: torch.device, kind: str, index: int) -> set[str]:
    """Allocate every planned parameter on `device` and fill it; returns the
    parameters filled."""
    params = dict(model.named_parameters())
    filled: dict[str, torch.Tensor] = {}

    def allocate(pname):
        t = torch.empty(params[pname].shape, dtype=params[pname].dtype, device=device)
        filled[pname] = t
        return t

    # Direct tensors: weightstream writes into the parameters themselves
    # (those of its output dtype, BF16 or float16; another dtype is cast
    # from those bits in batches).
    made = getattr(torch, ckpt.out_dtype)
    names = list(ckpt.keys())
    pos = {n: i for i, n in enumerate(names)}
    direct = [(n, p) for n, p in plan.direct.items() if params[p].dtype == made]
    if direct:
        ckpt._run([pos[n] for n, _ in direct], [allocate(p) for _, p in direct], kind, index, ckpt._stream(kind, index))
    cast = [n for n, p in plan.direct.items() if params[p].dtype != made]
    for batch in _batches(ckpt, cast):
        temps = ckpt._load([pos[n] for n in batch], kind, index)
        for n, t in zip(batch, temps):
            allocate(plan.direct[n]).copy_(t)
        del temps
    # Staged tensors: on the CPU, as int16 numpy arrays of the BF16 bits,
    # through transformers' processor, then copied into their parameter.
    parsed: dict[str, Any] = {"tensors": {}}
    left = dict(plan.sources)
    for batch in _batches(ckpt, plan.staged):
        temps = ckpt._load([pos[n] for n in batch], "cpu", 0)
        for n, t in zip(batch, temps):
            bits = t.view(torch.int16).numpy()
            out = plan.processor.process(weights=bits, name=n, tensor_key_mapping=plan.mapping, parsed_parameters=parsed)
            target = plan.mapping.get(n) or plan.mapping[n.rsplit(".", 1)[0]]
            if out.name is not None:
                parsed["tensors"][plan.mapping[out.name]] = out.weights
            left[target] -= 1
            if left[target] == 0:  # every source of the parameter is in
                value = parsed["tensors"].pop(target)
                value = _bits_as(value, made) if isinstance(value, np.ndarray) else value.view(made)
                if target not in params or list(value.shape) != list(params[target].shape):
                    raise WeightstreamError(f"{n}: transformers' mapping gives {target} of shape {list(value.shape)}, "
                                            f"the model's is {list(params[target].shape) if target in params else 'absent'}")
                if device.type == "cpu" and params[target].dtype == made and value.is_contiguous() \
                        and not np.shares_memory(value.view(torch.int16).numpy(), bits):
                    filled[target] = value  # the processor's own copy becomes the parameter
                else:
                    allocate(target).copy_(value)
        del temps
    for pname, t in filled.items():
        _load_parameter_into_model(model, pname, t)
        model.get_parameter(pname)._is_hf_initialized = True
    return set(filled)


def _batches(ckpt: Checkpoint, names: list[str]):
    batch, size = [], 0
    for n in names:
        b = 2 * int(np.prod(ckpt.shape(n)))
        if batch and size + b > _STAGE_BYTES:
            yield batch
            batch, size = [], 0
        batch.append(n)
        size += b
    if batch:
        yield batch


def _dtype(dtype) -> torch.dtype:
    d = getattr(torch, dtype, None) if isinstance(dtype, str) else dtype
    if not isinstance(d, torch.dtype) or not d.is_floating_point:
        raise ValueError(f"dtype {dtype!r}: use a floating torch dtype (torch.bfloat16, torch.float32, ...)")
    return d


def _prepare(path, model_class, dtype, config, attn_implementation, options):
    """Config, model on the meta device and the tensor plan; raises
    UnsupportedModel before any tensor is read."""
    path = os.fspath(path)
    dtype = _dtype(dtype)
    url = _remote.is_url(path)
    if url:
        _remote.refuse_hub_link(path)
    # A URL's format is what weightstream found under it (a prefix may hold a split GGUF set).
    meta_file, is_gguf = (None, False) if url else _gguf_files(path)
    # A float16 model is filled with float16, each value rounded once.
    ckpt = Checkpoint(path, "cpu", **options, dtype=torch.float16 if dtype == torch.float16 else None)
    is_gguf = is_gguf or (url and ckpt.format() == "gguf")
    if is_gguf:
        # weightstream's own reader parsed the header; the vocabulary stays in Rust.
        metadata = ckpt.metadata(tokenizer=False)
        arch = metadata["general.architecture"]
        _processor_class(arch)
        cfg, cfg_dict = _transformers_config(meta_file, ckpt, metadata, arch)
        if config is not None:  # the caller's, but whether lm_head exists is the file's to say
            cfg = config
            cfg.tie_word_embeddings = cfg_dict["tie_word_embeddings"]
    else:
        cfg = config
        if cfg is None and url:
            cfg = _remote.config(path, ckpt.config())
        if cfg is None:
            d = path if os.path.isdir(path) else os.path.dirname(path)
            if not os.path.isfile(os.path.join(d, "config.json")):
                raise UnsupportedModel(f"{path}: no config.json beside the safetensors")
            cfg = _hf.AutoConfig.from_pretrained(d)
        # The model is built in plain BF16: what the checkpoint's
        # quantization_config describes is undone by weightstream.
        if getattr(cfg, "quantization_config", None) is not None:
            del cfg.quantization_config
    if attn_implementation is not None:
        cfg._attn_implementation = attn_implementation
    cfg.name_or_path = ckpt.path  # a URL without its query (an Azure SAS token, a presigned signature)
    model = _build(_model_class(cfg, model_class), cfg, dtype)
    plan = _gguf_plan(model, cfg_dict, arch, ckpt) if is_gguf else _safetensors_plan(model, ckpt)
    targets = set(plan.direct.values()) | set(plan.sources)
    tied = {t for t, s in model.all_tied_weights_keys.items() if s in targets and t not in targets}
    missing = sorted(set(dict(model.named_parameters())) - targets - tied)
    if missing:
        raise IncompleteCheckpoint(f"{ckpt.path}: {type(model).__name__} parameters the checkpoint does not hold: "
                               f"{', '.join(missing[:8])}{' ...' if len(missing) > 8 else ''}")
    return model, ckpt, plan, tied


def _materialize(model, ckpt, plan, tied, device):
    """Fill the parameters, then what transformers' from_pretrained does
    after loading: non-persistent buffers (rotary inv_freq) moved off the
    meta device and initialized by the model's own _init_weights, tied
    weights tied, eval mode."""
    kind, index = _parse_device(device)
    dev = torch.device("cpu") if kind == "cpu" else torch.device("cuda", index)
    _fill(model, ckpt, plan, dev, kind, index)
    for t in tied:
        model.get_parameter(t)._is_hf_initialized = True
    model._move_missing_keys_from_meta_to_device(set(), {"": dev}, None, None)
    model._initialize_missing_keys(False)
    model.tie_weights(missing_keys=set(tied), recompute_mapping=False)
    model.eval()
    left = [n for n, t in [*model.named_parameters(), *model.named_buffers()] if t.is_meta]
    if left:
        raise WeightstreamError(f"{type(model).__name__}: left on the meta device after loading: {', '.join(left[:8])}")
    return model


def load_model(path, *, model_class=None, device="auto", dtype=torch.bfloat16, config=None,
               attn_implementation: Optional[str] = None, **options):
    """A transformers model filled from a GGUF file (or split set, or a
    directory holding one) or a directory of safetensors (FP8, NVFP4, MXFP4,
    INT4/INT8, BF16...) with its config.json.

    `path` may be a URL (docs/storage.md): `s3://`, `gs://`, `az://`,
    `abfs(s)://` or `https://ACCOUNT.blob.core.windows.net/` naming a GGUF
    object (a split set's first) or a prefix (`.../model/`) holding a split
    set or safetensors with their config.json, which is read from the same
    store (the weights' credentials and typed errors; nothing copied to
    local disk); a plain `http(s)://` URL names one file (a safetensors one
    then needs `config=`). GGUF architectures whose config transformers
    derives itself from a local file (gpt-oss) are refused for URLs.

    - model_class: a model class (LlamaForCausalLM) or an Auto class
      (default AutoModelForCausalLM), resolved against the config;
    - device: 'auto' (GPU 0 when usable, else the CPU), 'cpu', 'cuda[:N]';
    - dtype: torch.bfloat16 or torch.float16, which weightstream produces
      (each value rounded once from the format's exact value); another
      dtype is cast from the BF16 values;
    - config: a transformers config to use instead of the checkpoint's;
    - options: weightstream.open's (source, threads, readers, ...).

    Raises UnsupportedModel (before reading any tensor) for an architecture,
    processor or tensor that has no bit-exact mapping."""
    model, ckpt, plan, tied = _prepare(path, model_class, dtype, config, attn_implementation, options)
    return _materialize(model, ckpt, plan, tied, device)


# patch() lives beside this module (module size); it calls load_model's parts through this module.
from ._transformers_patch import patch, unpatch  # noqa: E402
