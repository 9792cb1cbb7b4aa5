"""The transformers front on a URL (`s3://`, `gs://`, `az://`, `abfs(s)://`,
`https://ACCOUNT.blob.core.windows.net/...`, plain `http(s)://`): what it
reads beside the weights, config.json, comes from the same store through
weightstream's remote reader (the credentials, options and typed errors of
the weights' own reads), into memory: nothing is copied to local disk.
"""
from __future__ import annotations

import json
import re

from . import WeightstreamError
from ._buffers import _error
from ._native import is_url, read_side_files
from ._native import source_name as _source_name

__all__ = ["is_url", "config", "object_beside", "refuse_hub_link"]

# A config.json is kilobytes; a larger object under that name is no config.
_MAX_CONFIG = 16 << 20


# A Hugging Face download link: https://huggingface.co/ORG/NAME/resolve/REV/FILE
# (or /blob/, the page's own link), hf.co the same.
_HUB_LINK = re.compile(r"https?://(?:www\.)?(?:huggingface\.co|hf\.co)/(?!datasets/|spaces/)([^/?#]+/[^/?#]+)/"
                       r"(?:resolve|blob)/([^/?#]+)/([^?#]+)(?:[?#].*)?")


def refuse_hub_link(url: str) -> None:
    """Raise a `remote_redirect` WeightstreamError, before any request, for
    a Hugging Face download link, saying what to pass instead: the hub
    answers one with a redirect to its CDN, which weightstream does not
    follow (a redirect could take a request, and its credentials,
    anywhere), so the load would only fail there, naming the redirect."""
    m = _HUB_LINK.fullmatch(url)
    if m is None:
        return
    repo, rev, name = m.groups()
    extra = "" if rev == "main" else f", revision={rev!r}"
    raise _error("remote_redirect",
                 f"{_source_name(url)} is a Hugging Face download link, which redirects to the hub's CDN "
                 f"(weightstream follows no redirects): pass the repo id and the file name instead, "
                 f"from_pretrained({repo!r}, gguf_file={name!r}{extra}) (transformers downloads it), or, "
                 f"for weightstream to load it, its local copy: huggingface_hub.hf_hub_download({repo!r}, "
                 f"{name!r}{extra})")


def object_beside(url: str, name: str) -> str:
    """How messages name the object `name` beside the checkpoint at `url`:
    under its prefix, or in the directory of the object it names; never
    the URL's query (an Azure SAS token, a presigned signature)."""
    shown = _source_name(url)
    return shown + name if shown.endswith("/") else shown.rsplit("/", 1)[0] + "/" + name


def config(url: str, opened: dict | None = None):
    """transformers' config from the config.json beside the checkpoint at
    `url`, built as AutoConfig.from_pretrained builds it from a directory
    (the same class, from_dict over the same dict). `opened`: the one the
    checkpoint's open already read from the same listing as the weights
    (`Checkpoint.config()`, a prefix's), used rather than fetched again,
    so that the config and the weights are never two versions apart.
    UnsupportedModel where there is none, or where it names code to run
    (auto_map)."""
    from .transformers import UnsupportedModel

    name = object_beside(url, "config.json")
    if opened is not None:
        return _from_dict(name, url, opened)
    try:
        (data,) = read_side_files(url, ["config.json"], _MAX_CONFIG)
    except WeightstreamError as e:
        if e.kind != "remote_bad_url":
            raise
        # A plain HTTP URL (a presigned one) signs one file: nothing beside it can be read.
        raise UnsupportedModel(f"{_source_name(url)}: an HTTP URL names one file, so no config.json beside it can be "
                               "read; pass config= (a transformers config)") from None
    if data is None:
        raise UnsupportedModel(f"{name}: no such object; a safetensors checkpoint is loaded with the config.json "
                               "beside it (or pass config=)")
    try:
        d = json.loads(data)
    except ValueError as e:
        raise UnsupportedModel(f"{name}: not JSON ({e})") from None
    return _from_dict(name, url, d)


def _from_dict(name: str, url: str, d):
    """The config class of `d`'s model_type, from `d`, as AutoConfig does."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    from .transformers import UnsupportedModel

    if not isinstance(d, dict) or "model_type" not in d:
        raise UnsupportedModel(f"{name}: no model_type (transformers cannot tell the architecture)")
    if "AutoConfig" in (d.get("auto_map") or {}):
        raise UnsupportedModel(f"{name}: names its own config code (auto_map), which is never fetched and run from a URL")
    # AutoConfig's own rename (configuration_auto.py): a Mistral config with layer types is Ministral's.
    if d["model_type"] == "mistral" and "layer_types" in d:
        d["model_type"] = "ministral"
    if d["model_type"] not in CONFIG_MAPPING:
        raise UnsupportedModel(f"{name}: model type {d['model_type']!r} is not one this transformers knows")
    return CONFIG_MAPPING[d["model_type"]].from_dict(d, name_or_path=_source_name(url), _from_auto=True)
