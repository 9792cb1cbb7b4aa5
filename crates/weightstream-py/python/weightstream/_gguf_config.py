"""transformers' config for a GGUF file, from weightstream's own metadata
reader.

transformers derives it in `load_gguf_checkpoint` (modeling_gguf_pytorch_utils),
which opens the file with gguf-py's GGUFReader and parses every field: the
vocabulary, merges and scores too, one memmap slice per string (about 2 s
for a 32000-token Llama here, 10 s for Llama 3's 128256 tokens and 280147
merges). This is the same derivation over the key-values weightstream's
Rust reader already parsed, without the `tokenizer.*` arrays, mapped with
transformers' own tables (GGUF_CONFIG_MAPPING, GGUF_CONFIG_DEFAULTS_MAPPING,
GGUF_SUPPORTED_ARCHITECTURES) in load_gguf_checkpoint's order and with its
special cases. The tests hold it equal to load_gguf_checkpoint's config for
every architecture they build. Architectures whose derivation reads
gguf-py's raw field parts (gpt-oss) or changes the config class (T5) are
derived by transformers itself (`None` here), from a local file only.
"""
from __future__ import annotations

from typing import Callable, Optional

# load_gguf_checkpoint's architecture renames.
_RENAMES = {"qwen2moe": "qwen2_moe", "gpt_oss": "gpt_oss", "gpt-oss": "gpt_oss", "qwen3moe": "qwen3_moe",
            "minimax-m2": "minimax_m2"}


def _updated(arch: str, name) -> Optional[str]:
    """load_gguf_checkpoint's `updated_architecture` (None: an architecture
    left to transformers itself)."""
    if "t5" in arch or "gpt_oss" in arch or "gpt-oss" in arch:
        return None
    # load_gguf_checkpoint asks `"mistral" in read_field(reader, "general.name")`:
    # membership of a one-element list, so the name must be exactly "mistral".
    updated = "mistral" if "llama" in arch and name == "mistral" else arch
    for key, renamed in _RENAMES.items():
        if key in arch:
            return renamed
    return updated


def _value(v):
    """A value as load_gguf_checkpoint's `_gguf_parse_value` leaves it: a
    one-element array is its element."""
    return v[0] if isinstance(v, list) and len(v) == 1 else v


def config_dict(metadata: dict, tensor_names: list[str], token_count: Callable[[], int]) -> Optional[dict]:
    """load_gguf_checkpoint(path)["config"] for a GGUF whose key-values
    (without the tokenizer's, `Checkpoint.metadata(tokenizer=False)`) and
    tensor names are given; `token_count()` (the tokenizer's tokens, 0
    for none) is asked only when the config has no vocab_size. None: an architecture left to transformers. Raises
    ValueError as load_gguf_checkpoint does for an unsupported one."""
    from transformers.integrations import GGUF_CONFIG_DEFAULTS_MAPPING
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES, GGUF_TO_TRANSFORMERS_MAPPING

    arch = metadata["general.architecture"]
    updated = _updated(arch, metadata.get("general.name"))
    if updated is None:
        return None
    config: dict = {}
    if "stablelm" in arch:
        config["use_qkv_bias"] = any(b in n for n in tensor_names for b in ("attn_q.bias", "attn_k.bias", "attn_v.bias"))
        config["use_parallel_residual"] = not any("ffn_norm" in n for n in tensor_names)
    if arch not in GGUF_SUPPORTED_ARCHITECTURES and updated not in GGUF_SUPPORTED_ARCHITECTURES:
        raise ValueError(f"GGUF model with architecture {arch} is not supported yet.")
    config["tie_word_embeddings"] = all(n != "output.weight" for n in tensor_names) or arch in ("falcon", "bloom")
    for key, value in GGUF_CONFIG_DEFAULTS_MAPPING.get(updated, GGUF_CONFIG_DEFAULTS_MAPPING.get(arch) or {}).items():
        config.setdefault(key, value)
    renames = GGUF_TO_TRANSFORMERS_MAPPING["config"]
    for key, value in metadata.items():
        key = key.replace(arch, updated)
        prefix, _, config_key = key.partition(".")
        value = _value(value)
        if isinstance(value, str) and arch in value:
            value = value.replace(arch, updated)
        rename = renames.get(prefix, {}).get(config_key, -1) if prefix in renames else -1
        if rename not in (-1, None):
            config[rename] = value
    model_type = config.get("model_type")
    if model_type == "gemma3":
        config["model_type"] = "gemma3_text"
    if model_type == "gemma4":
        config["model_type"] = "gemma4_text"
        config["eos_token_id"] = [1, 106, 50]
    if config.get("model_type") == "minimax_m2" and isinstance(config.get("scoring_func"), int):
        config["scoring_func"] = {0: "none", 1: "softmax", 2: "sigmoid"}.get(config["scoring_func"], "softmax")
    if config.get("model_type") == "lfm2":
        heads = config["num_key_value_heads"]
        config["num_key_value_heads"] = max(heads)
        config["block_auto_adjust_ff_dim"] = False
        config["full_attn_idxs"] = [i for i, n in enumerate(heads) if n > 0]
    if "vocab_size" not in config:
        # From the tokenizer's token list, as load_gguf_checkpoint does (none: left out).
        count = token_count()
        if count:
            config["vocab_size"] = count
    return config


def transformers_config(meta_file: Optional[str], ckpt, metadata: dict, arch: str):
    """(transformers' own config object, its dict) for the GGUF opened as
    `ckpt`: `config_dict` over weightstream's parsed metadata, or, for the
    architectures it leaves to transformers, load_gguf_checkpoint itself on
    the local file `meta_file` (None for a URL: refused, UnsupportedModel);
    tie_word_embeddings taken from all tensors of a split set."""
    from transformers import AutoConfig  # noqa: F401 (CONFIG_MAPPING is filled lazily through it)
    from transformers import modeling_gguf_pytorch_utils as gguf_utils
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    from .transformers import UnsupportedModel

    names = ckpt.keys() + [n for n, _ in ckpt.skipped()]
    try:
        d = config_dict(metadata, names, lambda: len(ckpt.metadata().get("tokenizer.ggml.tokens") or []))
        if d is None and meta_file is not None:
            d = gguf_utils.load_gguf_checkpoint(meta_file, return_tensors=False)["config"]
    except ValueError as e:  # "GGUF model with architecture X is not supported yet."
        raise UnsupportedModel(f"{meta_file or ckpt.path}: {e}") from None
    if d is None:
        # gguf-py's reader (under load_gguf_checkpoint) memory-maps a local
        # file: from a URL that would take a local copy of all of it.
        raise UnsupportedModel(f"{ckpt.path}: transformers derives the config of GGUF architecture {arch!r} itself, "
                               "from a local file, which a URL is not (load a local copy)")
    # load_gguf_checkpoint's own rule, over every file of a split set, not
    # just the first (where output.weight may not be).
    d["tie_word_embeddings"] = "output.weight" not in names or arch in ("falcon", "bloom")
    return CONFIG_MAPPING[d["model_type"]].from_dict(dict(d)), d
