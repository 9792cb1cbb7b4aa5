"""--model-loader-extra-config for the weightstream load format, and where
the checkpoint is."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

KNOWN = {"file", "source", "threads", "staging_slots", "staging_bytes", "readers", "ignore_transforms", "keep", "cache",
         "stats"}
KEEP = ("bf16", "quantized")


@dataclass
class Options:
    #: The checkpoint: a .gguf or .safetensors file or a directory (default:
    #: the --model directory, or the --model file), or a URL
    #: (s3://bucket/key.gguf, s3://bucket/prefix/, gs://..., az://..., https://...): then
    #: --model is a local directory of config and tokenizer files only.
    file: Optional[str] = None
    #: How to read it: "auto" (measures the page cache: read through it when
    #: warm, O_DIRECT when cold), "read", "mmap", "direct" or "gds" (cuFile).
    source: str = "auto"
    #: CPU dequant threads (default: every core).
    threads: Optional[int] = None
    #: Read-ahead (CPU and GPU): buffers, bytes per read, reader threads.
    staging_slots: Optional[int] = None
    staging_bytes: Optional[int] = None
    readers: Optional[int] = None
    #: Load a GGUF file whose metadata declares a transform of the weights
    #: that weightstream does not apply (prism.hadamard.*, ...), ignoring it:
    #: the weights load as stored, untransformed.
    ignore_transforms: bool = False
    #: "bf16" (default): every weight dequantized to the model's dtype.
    #: "quantized": GGUF linear weights with an exact GPTQ layout (Q4_0,
    #: Q1_0, Q2_0, TQ1_0, TQ2_0; on a GPU also Q8_0, Q5_0, IQ4_NL) stay
    #: quantized, served by vLLM's GPTQ kernels (keep_quantized.py).
    keep: str = "bf16"
    #: For a URL: a local directory keeping the fetched bytes, read again by
    #: the next load of the same object version (default:
    #: $WEIGHTSTREAM_CACHE_DIR). Tensor-parallel ranks of one host share it.
    cache: Optional[str] = None
    #: A JSON record of each rank's load written to this path (it may hold
    #: {rank}, {dp}, {pid}): seconds, bytes read, bytes and GETs fetched
    #: from a store, the rank's share (load_record.py).
    stats: Optional[str] = None

    @classmethod
    def parse(cls, extra: Any) -> "Options":
        extra = dict(extra or {})
        unknown = set(extra) - KNOWN
        if unknown:
            raise ValueError(
                f"--model-loader-extra-config: unknown option(s) {sorted(unknown)} for --load-format weightstream; "
                f"known: {sorted(KNOWN)}"
            )
        if extra.get("keep", "bf16") not in KEEP:
            raise ValueError(f"--model-loader-extra-config: keep is one of {list(KEEP)}, not {extra['keep']!r}")
        if "stats" in extra:
            from .load_record import check_template

            check_template(extra["stats"])
        return cls(**extra)


# The URL schemes weightstream reads (crates/weightstream-remote/src/url.rs, is_url).
REMOTE = ("s3://", "s3a://", "gs://", "az://", "abfs://", "abfss://", "http://", "https://")


def is_url(s) -> bool:
    return isinstance(s, str) and s.lower().startswith(REMOTE)


def find_checkpoint(model: str, options: Options) -> "Path | str":
    """The checkpoint weightstream reads for `--model model`: a local path,
    or the URL `file` names (the weights in object storage; `model` is then
    a local directory of config and tokenizer files)."""
    if is_url(options.file):
        return options.file
    if options.file:
        p = Path(options.file)
        if not p.is_absolute() and Path(model).is_dir():
            p = Path(model) / p
        if not p.exists():
            raise FileNotFoundError(f"weightstream: model_loader_extra_config file {str(p)!r} does not exist")
        return p
    p = Path(model)
    if p.is_file():
        return p
    if not p.is_dir():
        raise FileNotFoundError(
            f"weightstream: --model {model!r} is not a local directory or file; --load-format weightstream reads "
            "local checkpoints (download one with `huggingface-cli download` first)"
        )
    ggufs = sorted(p.glob("*.gguf"))
    if list(p.glob("*.safetensors")):
        return p
    if len(ggufs) == 1:
        return ggufs[0]
    if len(ggufs) > 1 and _one_split_set(ggufs):
        # llama-gguf-split's <prefix>-NNNNN-of-NNNNN.gguf: weightstream opens
        # the whole set from its directory (and names a missing shard).
        return p
    if len(ggufs) > 1:
        raise ValueError(
            f"weightstream: {model} holds {len(ggufs)} GGUF files; choose one with "
            "--model-loader-extra-config '{\"file\": \"NAME.gguf\"}'"
        )
    raise FileNotFoundError(f"weightstream: no *.safetensors or *.gguf checkpoint in {model}")


def _one_split_set(ggufs: list[Path]) -> bool:
    """Whether every file is a shard of one llama.cpp split set."""
    import re

    sets = set()
    for g in ggufs:
        m = re.fullmatch(r"(.+)-(\d{5})-of-(\d{5})\.gguf", g.name)
        if m is None:
            return False
        sets.add((m.group(1), m.group(3)))
    return len(sets) == 1
