"""Write the Hugging Face config.json that vLLM and SGLang need for a GGUF
file, from the GGUF's own metadata.

vLLM reads the model's configuration before any load format runs, and it
reads a `--model` that is a file as a JSON config, so a directory that holds
only `model.gguf` cannot start. This writes the config once:

    python -m weightstream.serving.hf_config model.gguf -o ./model-config
    vllm serve ./gguf-dir --hf-config-path ./model-config --load-format weightstream

(or write it next to the GGUF file: `-o ./gguf-dir`). A split set
(`model-00001-of-00003.gguf` ... from `llama-gguf-split`) works from any of
its files or its directory: the metadata comes from the first file, the
tensors from every shard.

transformers' GGUF support maps the `<arch>.*` keys (block count, heads,
lengths, norm epsilon, rope) to the config. Three things it cannot know from
the keys alone are taken from the file the way llama.cpp does: the vocabulary
size (rows of `token_embd.weight`), tied embeddings (no `output.weight`
tensor), and float fields stored as f32 in GGUF are written as the shortest
decimal of that f32 (1e-05, not 9.999999747378752e-06).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np


class ConfigError(Exception):
    pass


def _tensor_names(path: Path) -> tuple[dict[str, list[int]], set[str]]:
    """Shapes (outermost first) of the loadable tensors, and every tensor name
    (a k-quant `output.weight` still means the embeddings are not tied)."""
    import weightstream

    try:
        with weightstream.open(path, skip_unsupported=True) as ck:
            shapes = {name: list(ck.shape(name)) for name in ck.keys()}
            return shapes, set(shapes) | {name for name, _ in ck.skipped()}
    except weightstream.WeightstreamError as e:
        raise ConfigError(str(e)) from e


_SPLIT = re.compile(r"(.+)-(\d{5})-of-(\d{5})\.gguf")


def metadata_file(path: Path) -> Path:
    """The GGUF whose metadata describes the model at `path`: the file
    itself, the first file of the split set it belongs to (only that one
    carries the model's keys), or for a directory the one GGUF or the one
    split set's first file in it."""
    path = Path(path)
    if path.is_dir():
        ggufs = sorted(p for p in path.glob("*.gguf") if not p.name.startswith("."))
        if len(ggufs) == 1:
            return ggufs[0]
        sets = {(m.group(1), m.group(3)) if m else None for m in (_SPLIT.fullmatch(g.name) for g in ggufs)}
        if len(sets) != 1 or None in sets:
            names = ", ".join(g.name for g in ggufs[:8]) or "none"
            raise ConfigError(f"{path}: expected one GGUF file or one split set, found {len(ggufs)} GGUF files ({names}); "
                              "pass the file (a split set: its first file)")
        ((prefix, count),) = sets
        return path / f"{prefix}-00001-of-{count}.gguf"
    m = _SPLIT.fullmatch(path.name)
    if m and m.group(2) != "00001":
        return path.with_name(f"{m.group(1)}-00001-of-{m.group(3)}.gguf")
    return path


def _shortest_f32(x):
    return float(str(np.float32(x))) if isinstance(x, float) else x


def config_dict(gguf_path: Path) -> dict:
    """The config.json contents for a GGUF file."""
    from transformers import AutoConfig
    from transformers.utils import logging as hf_logging

    gguf_path = Path(gguf_path)
    # transformers reads the metadata, which a split set keeps in its first
    # file; the tensors come from weightstream, which opens the set whole
    # (and names a missing or wrong shard).
    meta_path = metadata_file(gguf_path)
    # transformers warns that vocab_size is missing when the GGUF has no
    # tokenizer; it is taken from token_embd.weight below.
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        config = AutoConfig.from_pretrained(str(meta_path.parent), gguf_file=meta_path.name)
    except Exception as e:  # transformers raises ValueError/KeyError/... for unknown architectures
        raise ConfigError(f"{gguf_path}: transformers cannot build a config from this GGUF's metadata: {e}; "
                          "give the engine the original model's config.json (vLLM: --hf-config-path)") from e
    finally:
        hf_logging.set_verbosity(verbosity)
    d = {k: _shortest_f32(v) for k, v in config.to_dict().items()}
    if isinstance(d.get("rope_parameters"), dict):
        d["rope_parameters"] = {k: _shortest_f32(v) for k, v in d["rope_parameters"].items()}
    shapes, names = _tensor_names(gguf_path)
    embd = shapes.get("token_embd.weight")
    if embd is None:
        raise ConfigError(f"{gguf_path}: no tensor 'token_embd.weight', so the vocabulary size is unknown")
    d["vocab_size"] = int(embd[0])
    d["tie_word_embeddings"] = "output.weight" not in names
    if not d.get("architectures"):
        d["architectures"] = [type(config).__name__.replace("Config", "ForCausalLM")]
    d["dtype"] = "bfloat16"  # what weightstream produces
    for k in ("transformers_version", "_name_or_path", "torch_dtype"):
        d.pop(k, None)
    return d


def write(gguf_path: Path, out_dir: Path) -> Path:
    d = config_dict(gguf_path)
    out_dir.mkdir(parents=True, exist_ok=True)
    dest = out_dir / "config.json"
    tmp = dest.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(d, indent=2, sort_keys=True) + "\n")
    tmp.replace(dest)
    return dest


def main(argv=None, prog: str = "python -m weightstream.serving.hf_config") -> int:
    ap = argparse.ArgumentParser(
        prog=prog,
        description=__doc__.split("\n\n")[0].replace("\n", " "),
        epilog=f"example: {prog} model.gguf -o ./model-config && "
               "vllm serve ./gguf-dir --hf-config-path ./model-config --load-format weightstream",
    )
    ap.add_argument("gguf", type=Path, help="the GGUF file (a split set: any of its files, or its directory)")
    ap.add_argument("-o", "--out", type=Path, required=True, help="directory to write config.json into")
    ap.add_argument("--json", action="store_true", help="print the config to stdout as well")
    a = ap.parse_args(argv)
    try:
        dest = write(a.gguf, a.out)
    except (ConfigError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if a.json:
        print(dest.read_text(), end="")
    else:
        print(f"wrote {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
