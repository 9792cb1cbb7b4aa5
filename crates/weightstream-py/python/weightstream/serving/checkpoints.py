"""What a checkpoint holds that weightstream dequantizes, and the layout
its tensors are handed to a model in: shared by the engine plugins."""
from __future__ import annotations

from typing import Optional

WHAT_TO_DO_UNSUPPORTED = (
    "the message above lists the types weightstream dequantizes; a GGUF with other types can be served "
    "by an engine's own GGUF support (vLLM's vllm-gguf-plugin, SGLang's --load-format gguf on a GPU), which keeps weights quantized"
)


def dequantized_kinds(dtypes) -> list[str]:
    """What weightstream dequantizes among a checkpoint's tensors (dtypes as
    `Checkpoint.dtype` gives them): "FP8" (F8_*), "packed 4-bit" (U8: the
    packed NVFP4 and MXFP4 weights), "packed integer" (I32: compressed-
    tensors pack-quantized INT4/INT8). A load lists no other U8 or I32
    tensor: weightstream refuses them."""
    kinds = set()
    for d in dtypes:
        if d.startswith("F8_"):
            kinds.add("FP8")
        elif d == "U8":
            kinds.add("packed 4-bit")
        elif d == "I32":
            kinds.add("packed integer")
    return sorted(kinds)


def is_packed_expert_stack(ck, name: str) -> bool:
    """A packed 3-D tensor: a gpt-oss expert stack (`X_blocks`, served as
    `X`), stored [experts, out, in]."""
    return ck.dtype(name) == "U8" and len(ck.shape(name)) == 3


def expert_layout(ck, name: str, t):
    """gpt-oss MXFP4 expert stacks are stored [E, out, in] (`gate_up_proj`
    [E, 2I, H], `down_proj` [E, H, I]); the BF16 gpt-oss checkpoints, and
    so vLLM's BF16 weight loading, hold [E, in, out] (transformers'
    convert_moe_packed_tensors transposes them the same way). A view: the
    model's loader copies it into its own layout."""
    return t.transpose(1, 2) if is_packed_expert_stack(ck, name) else t


def drop_hf_quantization_config(model_config, only_none: bool = False) -> None:
    """Remove `quantization_config` from the model's Hugging Face config(s)
    (`model_config.hf_config` and `.hf_text_config`: vLLM's ModelConfig and
    SGLang's both have them):
    some models read it while loading (vLLM's gpt-oss picks its MXFP4 weight
    loading from it, and fails on a None one: what `--hf-overrides
    '{"quantization_config": null}'` leaves; `only_none` removes only that)."""
    for cfg in {id(c): c for c in (model_config.hf_config, model_config.hf_text_config)}.values():
        if not hasattr(cfg, "quantization_config") or (only_none and cfg.quantization_config is not None):
            continue
        try:
            delattr(cfg, "quantization_config")
        except AttributeError:  # a class attribute: shadow it
            cfg.quantization_config = None


class Mapping:
    """How a checkpoint's tensors reach a model's `load_weights`: `names`,
    (checkpoint name, Hugging Face name, expert or None) for every tensor;
    `rows_per_head(name)` > 0 for rows permuted within each head (GGUF q/k
    of llama-family models); `fixup(name, t)` puts a loaded tensor (or a
    range of its whole heads) in the model's layout; `fixup_into(name, t,
    dest)` does so straight into `dest` (None: nothing is written in place
    transformed); `unpermute`: the GGUF's gguf_names.Unpermuter (None for
    safetensors). `model`: the engine's model, whose own parameter names
    the GGUF name map tries first (gguf_names.hf_name_map)."""

    def __init__(self, ck, hf_config, model=None):
        from . import gguf_names

        if ck.format() == "gguf":
            metadata = ck.metadata(tokenizer=False)
            self.names = gguf_names.pairs(ck.keys(), metadata, hf_config, lambda n: ck.shape(n)[0], model)
            self.unpermute = unpermute = gguf_names.Unpermuter(metadata, hf_config)
            self.rows_per_head = lambda n: unpermute.rows_per_head(n, ck.matrix(n)[0])
            self.fixup = lambda n, t: unpermute(n, t, ck.matrix(n)[0])
            self.fixup_into = lambda n, t, dest: unpermute.into(n, t, dest, ck.matrix(n)[0])
        else:
            self.names = [(n, n, None) for n in ck.keys()]
            self.unpermute = None
            self.rows_per_head = lambda n: 0
            self.fixup = lambda n, t: expert_layout(ck, n, t)
            self.fixup_into = None  # nothing is transformed but swapped stacks, never written in place
        self.transposed = lambda n: ck.format() != "gguf" and is_packed_expert_stack(ck, n)

    def transforms(self, name: str) -> bool:
        return self.rows_per_head(name) > 0


def open_checkpoint(path, o, device: str, dtype=None):
    """weightstream.open with the loader options `o` (options.Options); an
    error names the file and what to do."""
    import weightstream

    try:
        return weightstream.open(path, device=device, source=o.source, threads=o.threads,
                                 staging_slots=o.staging_slots, staging_bytes=o.staging_bytes, readers=o.readers,
                                 ignore_transforms=o.ignore_transforms, cache=o.cache, dtype=dtype)
    except weightstream.WeightstreamError as e:
        hint = WHAT_TO_DO_UNSUPPORTED if getattr(e, "kind", "") == "unsupported" else "the file is not a valid checkpoint"
        raise RuntimeError(f"weightstream cannot load {path}: {e}. {hint}.") from e


def fetched_since(ck, before: Optional[dict]) -> Optional[dict]:
    """{"bytes", "requests"}: what this process really fetched from stores
    since `before` (weightstream.fetched_total() when the load began; every
    open's headers included); None for a local checkpoint."""
    import weightstream

    if ck.fetched() is None:
        return None
    now = weightstream.fetched_total()
    return {k: now[k] - (before or {}).get(k, 0) for k in now}


def fetched_note(ck, f: Optional[dict]) -> str:
    """`fetched_since`'s count `f` against the checkpoint's tensor bytes,
    for the load's log line ("" for a local checkpoint)."""
    if f is None:
        return ""
    total = sum(ck.slice_bytes(n) for n in ck.keys())
    return (f"; fetched {f['bytes']} bytes in {f['requests']} ranged GETs from the store "
            f"({f['bytes'] / max(total, 1):.3f} of the checkpoint's {total} tensor bytes)")


def log_opened(ck, logger) -> None:
    """What an open skipped (a warning) and how each file is read."""
    if ck.skipped():
        logger.warning("weightstream: skipped %s", ck.skipped())
    for s in ck.sources():
        logger.info("weightstream: %s read with %s%s", s["path"], s["source"], f" ({s['note']})" if s["note"] else "")
