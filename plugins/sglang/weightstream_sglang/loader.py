"""The weightstream model loader for SGLang (`--load-format weightstream`).

What it serves is what the vLLM plugin serves, through the same shared code
(weightstream.serving): GGUF of every type weightstream dequantizes (split
sets too; names mapped to the model's Hugging Face names, llama-family q/k
rows un-permuted), FP8 / packed 4-bit / packed integer safetensors
dequantized to the model's dtype with the checkpoint's quantization_config
dropped before SGLang builds the model, so that SGLang builds a plain BF16
model; local files or a URL (`file`: s3://, gs://, az://, http(s)://).

The model is built as SGLang's DefaultModelLoader builds it; the weights
then go in as in the vLLM plugin: each is probed through the model's own
`load_weights` (weightstream.serving.probe), which says what this rank
keeps of it and into which parameter; the weights that go into a
parameter unchanged are dequantized straight into it in one call of the
library, the rest are handed to `load_weights`. SGLang's own post-load step
(quant methods' process_weights_after_loading) runs last.
"""
from __future__ import annotations

import logging
import time
from typing import Optional

import torch
from torch import nn

import weightstream
from weightstream._native import source_name
from weightstream.serving import load_record, sharding
from weightstream.serving.checkpoints import (Mapping, dequantized_kinds, drop_hf_quantization_config, fetched_note,
                                              fetched_since, log_opened, open_checkpoint)
from weightstream.serving.options import Options, find_checkpoint, is_url

from sglang.srt.configs.device_config import DeviceConfig
from sglang.srt.configs.load_config import LoadConfig
from sglang.srt.configs.model_config import ModelConfig
from sglang.srt.model_loader.loader import BaseModelLoader, DefaultModelLoader, _get_quantization_config, _initialize_model
from sglang.srt.model_loader.utils import set_default_torch_dtype

logger = logging.getLogger("sglang.plugins.weightstream")

# Set on the model (its __dict__) by an update_weights_from_disk load that
# failed: {"path", "wrote"} (load_weights_and_postprocess).
FAILED_UPDATE = "_weightstream_failed_update"

# What the vLLM plugin has and SGLang cannot take through this loader.
NOT_IN_SGLANG = {"keep": "keep=quantized hands GGUF blocks to vLLM's GPTQ kernels; SGLang's CPU and GPU "
                         "linear methods for those layouts are not wired to this loader: serve BF16 (drop \"keep\")"}


class WeightstreamModelLoader(DefaultModelLoader):
    """A DefaultModelLoader only so that SGLang's `update_weights_from_disk`
    (which takes no other loader) reloads through it: `Engine.
    update_weights_from_disk(path_or_url, load_format="weightstream")` puts
    another checkpoint of the same model into a running engine
    (`_get_weights_iterator` and `load_weights_and_postprocess` below). Its
    extra config is weightstream's, not DefaultModelLoader's."""

    def __init__(self, load_config: LoadConfig):
        BaseModelLoader.__init__(self, load_config)
        extra = dict(load_config.model_loader_extra_config or {})
        for key, why in NOT_IN_SGLANG.items():
            if extra.get(key, "bf16") != "bf16":
                raise ValueError(f"weightstream (SGLang): model_loader_extra_config {key}={extra[key]!r} is not supported: {why}")
        self.options = Options.parse(extra)

    def _get_weights_iterator(self, source):
        # update_weights_from_disk: what to load is the source's model path;
        # load_weights_and_postprocess reads it (its own plan, not an
        # iterator of whole tensors).
        return source

    def load_weights_and_postprocess(self, model, weights, target_device):
        """update_weights_from_disk's load. A failed update is refused
        whole where it can be: SGLang 0.5.23 "rolls back" by loading again
        the path that just failed (weight_updater.py sets model_path before
        loading), which fails again and takes the server down, or, after a
        transient fault, serves the new weights while reporting the
        original ones restored. So the call that follows a failed update of
        the same path is taken as that rollback: where the failure came
        before any weight was written (a missing, truncated or mismatched
        checkpoint: every check runs first), the weights are the original
        ones and stay; where weights were already replaced, the original
        cannot be restored here and the rollback is refused, naming why."""
        if not isinstance(weights, DefaultModelLoader.Source):
            raise TypeError("weightstream (SGLang): update_weights_from_disk with a weight name filter is not supported")
        path = str(weights.model_config.model_path)
        # Named without a URL's query (a presigned URL's is its credential).
        shown = source_name(path)
        failed = model.__dict__.pop(FAILED_UPDATE, None)
        if failed is not None and failed["path"] == path:
            if failed["wrote"]:
                raise RuntimeError(f"weightstream (SGLang): the failed update from {shown} had already replaced some "
                                   "weights, and SGLang's rollback would load the same checkpoint again, not the "
                                   "original: refusing to serve a mix; restart the server")
            logger.warning("weightstream: the failed update from %s wrote no weight: the engine keeps the weights it "
                           "had", shown)
            DefaultModelLoader.postprocess_weights(model, target_device)
            return
        progress = {"wrote": False}
        try:
            self.load_weights(model, weights.model_config, target_device, weightstream.fetched_total(), progress)
        except BaseException:
            model.__dict__[FAILED_UPDATE] = {"path": path, "wrote": progress["wrote"]}
            raise
        DefaultModelLoader.postprocess_weights(model, target_device)

    def _checkpoint(self, model_config: ModelConfig):
        # A URL as the model path: what update_weights_from_disk("s3://...")
        # gives (an engine cannot start from one: SGLang reads the config
        # from the model path first).
        if is_url(model_config.model_path) and not self.options.file:
            return model_config.model_path
        return find_checkpoint(model_config.model_path, self.options)

    def download_model(self, model_config: ModelConfig) -> None:
        self._checkpoint(model_config)

    def _open(self, model_config: ModelConfig, device: str):
        # A float16 model gets float16 weights, each rounded once from the
        # exact value; any other dtype gets BF16 (docs/numerics.md).
        dtype = torch.float16 if model_config.dtype == torch.float16 else None
        return open_checkpoint(self._checkpoint(model_config), self.options, device, dtype)

    def load_model(self, *, model_config: ModelConfig, device_config: DeviceConfig) -> nn.Module:
        fetched0 = weightstream.fetched_total()
        if model_config.quantization is not None:
            # A checkpoint of weights weightstream dequantizes becomes a BF16
            # model: no quantized linear or MoE methods. Anything else
            # quantized (a GPTQ/AWQ checkpoint) is SGLang's own to serve.
            with self._open(model_config, "cpu") as ck:
                kinds = dequantized_kinds(ck.dtype(n) for n in ck.keys())
            if not kinds:
                raise ValueError(f"weightstream (SGLang): {model_config.model_path} is a {model_config.quantization} "
                                 "checkpoint with no tensors weightstream dequantizes (FP8, packed 4-bit, packed "
                                 "integer); SGLang serves it with its own kernels: drop --load-format weightstream")
            logger.info("weightstream: %s checkpoint (%s weights) served as %s: ignoring its quantization_config",
                        model_config.quantization, " and ".join(kinds), model_config.dtype)
            model_config.quantization = None
            drop_hf_quantization_config(model_config)
        else:
            drop_hf_quantization_config(model_config, only_none=True)
        target_device = torch.device(device_config.device)
        quant_config = _get_quantization_config(model_config, self.load_config)
        with set_default_torch_dtype(model_config.dtype):
            with target_device:
                model = _initialize_model(model_config, self.load_config, quant_config)
            self.load_weights(model, model_config, target_device, fetched0)
            DefaultModelLoader.postprocess_weights(model, target_device)
        return model.eval()

    def load_weights(self, model: nn.Module, model_config: ModelConfig, device: torch.device, fetched0=None,
                     progress: Optional[dict] = None) -> None:
        """The load; `progress["wrote"]` turns True when the first weight
        is about to be written (every check of the checkpoint against the
        model comes before)."""
        # (Not from sglang.srt.distributed: that import fails in 0.5.23.)
        from sglang.srt.distributed.parallel_state import (get_tensor_model_parallel_rank,
                                                           get_tensor_model_parallel_world_size)

        target = f"cuda:{torch.cuda.current_device()}" if device.type == "cuda" else "cpu"
        rank, size = get_tensor_model_parallel_rank(), get_tensor_model_parallel_world_size()
        pp_rank, pp_size = _pp_rank_and_size()
        record_path = None
        if self.options.stats is not None:
            record_path = load_record.path_for(self.options.stats, rank=pp_rank * size + rank, ranks=size * pp_size,
                                               dp=None, dps=_dp_size())
        t0 = time.perf_counter()
        with self._open(model_config, target) as ck:
            log_opened(ck, logger)
            m = Mapping(ck, model_config.hf_config, model)
            planned = sharding.plan(ck, model, m.names, m.rows_per_head, transposed=m.transposed)
            _check_every_parameter_is_written(model, planned, ck.path)
            share, full = load_record.share(ck, planned)
            if size > 1:
                whole = sorted({p.ck_name for p in planned if p.region is None and p.note not in ("skipped", "replicated")})
                logger.info("weightstream: tensor-parallel rank %d/%d plans to read %d of %d file bytes%s", rank, size, share,
                            full, f" ({len(whole)} read whole: {whole[:5]})" if whole else "")
            if progress is not None:
                progress["wrote"] = True
            direct = sharding.bulk_load(ck, model, planned, target, m.rows_per_head, m.fixup_into)
            done = {id(p) for p in direct}
            rest = [p for p in planned if id(p) not in done]
            model.load_weights(sharding.load(ck, rest, target, m.fixup, m.transforms))
        seconds, through = time.perf_counter() - t0, sum(p.note != "skipped" for p in rest)
        fetched = fetched_since(ck, fetched0)
        logger.info("weightstream: loaded %s on %s in %.2f s (%d tensors: %d dequantized into their parameters, %d "
                    "through the model's loaders), %d file bytes read%s", ck.path, target, seconds,
                    len(planned), len(direct), through, ck.bytes_read, fetched_note(ck, fetched))
        if record_path is not None:
            layout = {"tp_rank": rank, "tp_size": size, "pp_rank": pp_rank, "pp_size": pp_size}
            rec = load_record.record(ck, seconds=seconds, device=target, layout=layout, planned=planned, share=share,
                                     whole=full, fetched=fetched,
                                     counts={"into_parameters": len(direct), "through_model": through})
            logger.info("weightstream: load record written to %s", load_record.write(record_path, rec))


def _pp_rank_and_size() -> tuple[int, int]:
    from sglang.srt.distributed.parallel_state import (get_pipeline_model_parallel_rank,
                                                       get_pipeline_model_parallel_world_size)

    try:
        return get_pipeline_model_parallel_rank(), get_pipeline_model_parallel_world_size()
    except AssertionError:  # no pipeline group (a model built outside an engine)
        return 0, 1


def _dp_size() -> int:
    """SGLang's data-parallel replicas (--dp-size): each a scheduler of its
    own that does not tell its loader which replica it is."""
    try:
        from sglang.srt.runtime_context import get_server_args

        return int(getattr(get_server_args(), "dp_size", 1) or 1)
    except (ImportError, AttributeError, RuntimeError):
        return 1


def _check_every_parameter_is_written(model: nn.Module, planned: list, path) -> None:
    """SGLang's models do not report what their load_weights loaded (vLLM's
    do), so a parameter no checkpoint tensor reaches would keep its
    uninitialised memory: refuse that. The probe saw where each weight is
    copied; where a copy went through a parameter subclass's own copy_ its
    destination is unknown, and nothing can be concluded."""
    if any(p.dest is None and p.note != "skipped" for p in planned):
        return
    written = {p.dest.untyped_storage().data_ptr() for p in planned if p.dest is not None}
    missing = [n for n, t in model.named_parameters() if t.untyped_storage().data_ptr() not in written]
    if missing:
        raise RuntimeError(f"weightstream: {len(missing)} model weight(s) are in no tensor of {path} (first: {missing[:5]}); "
                           "does the checkpoint match the model config?")
