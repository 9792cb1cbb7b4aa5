"""The weightstream model loader for vLLM (`--load-format weightstream`).

- GGUF (every type gguf-py dequantizes: Q4_0-Q8_0, Q2_K-Q6_K, IQ1-IQ4, MXFP4, NVFP4, TQ1_0/TQ2_0,
  F16, F32, BF16): tensors mapped to the model's Hugging
  Face names, llama-family q/k rows un-permuted, output.weight absent means
  tied embeddings (vLLM's model ties them itself).
- FP8 safetensors (block weight_scale_inv, per-tensor or per-channel
  weight_scale) and packed 4-bit safetensors (NVFP4: ModelOpt, compressed-
  tensors nvfp4-pack-quantized; MXFP4: compressed-tensors
  mxfp4-pack-quantized, gpt-oss *_blocks/*_scales) and compressed-tensors
  pack-quantized INT4/INT8: dequantized to BF16; the
  checkpoint's quantization_config is dropped before the model is built, so
  vLLM builds a plain BF16 model. gpt-oss expert stacks, stored [E, out, in],
  are handed over as [E, in, out], the layout of the BF16 gpt-oss checkpoints.
- Tensors are produced on the model's device: by the GPU kernels when vLLM
  runs on CUDA, by the CPU kernels otherwise.
- `keep: quantized` (keep_quantized.py, kept_tensors.py): GGUF linear
  weights whose blocks map exactly onto GPTQ (Q4_0, Q1_0, Q2_0, TQ1_0,
  TQ2_0; on a GPU also Q8_0, Q5_0, IQ4_NL) or compressed-tensors' FP4 (on a
  GPU: NVFP4, MXFP4) stay quantized, served by vLLM's own kernels.
"""
from __future__ import annotations

import dataclasses
import re
import time
from typing import Optional

import torch
from torch import nn
from vllm.config import ModelConfig, VllmConfig
from vllm.config.load import LoadConfig
from vllm.logger import init_logger
from vllm.model_executor.model_loader import register_model_loader
from vllm.model_executor.model_loader.base_loader import BaseModelLoader

import weightstream
from weightstream.serving import gguf_names, load_record, sharding
from weightstream.serving.checkpoints import (Mapping, dequantized_kinds, drop_hf_quantization_config, fetched_note,
                                              fetched_since, log_opened, open_checkpoint)
from weightstream.serving.options import Options, find_checkpoint

from . import LOAD_FORMAT, exchange, heap, keep_quantized, kept_tensors, parallel

# Under "vllm." so that messages go through vLLM's own handler and level
# (VLLM_LOGGING_LEVEL); a logger outside that tree has no handler and its
# INFO lines would be lost.
logger = init_logger("vllm.plugins.weightstream")


KV_CACHE_SCALE = re.compile(r"\.attn\.(q|k|v|prob)_(scale|zero_point)$")


@register_model_loader(LOAD_FORMAT)
class WeightstreamModelLoader(BaseModelLoader):
    def __init__(self, load_config: LoadConfig):
        super().__init__(load_config)
        self.options = Options.parse(load_config.model_loader_extra_config)
        # Checkpoint name -> keep_quantized.Kept: the weights served
        # quantized, under compressed-tensors' config where `_ct`.
        self._kept: dict = {}
        self._ct = False
        # (data-parallel replica, replicas at least): from load_model's VllmConfig.
        self._dp = (0, 1)

    def download_model(self, model_config: ModelConfig) -> None:
        find_checkpoint(model_config.model, self.options)

    def _open(self, model_config: ModelConfig, device: str):
        # A float16 model gets float16 weights, each rounded once from the
        # exact value (a BF16 load cast to float16 would round twice and
        # lose 3 of float16's mantissa bits); any other dtype gets BF16.
        dtype = torch.float16 if model_config.dtype == torch.float16 else None
        return open_checkpoint(find_checkpoint(model_config.model, self.options), self.options, device, dtype)

    def load_model(self, vllm_config: VllmConfig, model_config: ModelConfig, prefix: str = "") -> nn.Module:
        # What this worker has fetched from stores before the load: the log
        # gives what every open of the load fetched (the quantization check's
        # too), from this baseline.
        self._fetched0 = weightstream.fetched_total()
        # The replica: data_parallel_index, since vLLM makes each replica of
        # a dense model an independent DP=1 engine (data_parallel_rank 0,
        # data_parallel_size 1; EngineCoreProc), keeping only the index.
        # So the replica count is known only to be above the index there.
        pc = vllm_config.parallel_config
        dp = int(getattr(pc, "data_parallel_index", getattr(pc, "data_parallel_rank", 0)) or 0)
        self._dp = (dp, max(int(getattr(pc, "data_parallel_size", 1) or 1), dp + 1))
        # A stats path that ranks would share is refused before any work.
        self._record_path(parallel.layout())
        # A checkpoint of weights weightstream dequantizes (FP8, packed NVFP4
        # or MXFP4) becomes a BF16 model: no quantized linear or MoE methods.
        # (vLLM has already accepted the checkpoint's quantization_config; where
        # it refuses it outright, --hf-overrides '{"quantization_config": null}'.)
        if vllm_config.quant_config is not None or model_config.quantization is not None:
            with self._open(model_config, "cpu") as ck:
                kinds = dequantized_kinds(ck.dtype(n) for n in ck.keys())
            if kinds:
                logger.info("weightstream: %s checkpoint (%s weights) served as BF16: ignoring its quantization_config",
                            model_config.quantization, " and ".join(kinds))
                vllm_config.quant_config = None
                model_config.quantization = None
                drop_hf_quantization_config(model_config)
        else:
            drop_hf_quantization_config(model_config, only_none=True)
        if self.options.keep == "quantized":
            self._keep_quantized(vllm_config, model_config)
        model = super().load_model(vllm_config, model_config, prefix)
        # vLLM's post-load repacking (its CPU GPTQ kernel's, in keep=quantized)
        # leaves its freed temporaries resident in the malloc heap: give them
        # back (heap.py).
        t0 = time.perf_counter()
        released = heap.release_freed()
        if released is not None:
            logger.info("weightstream: returned %.1f MiB of freed heap memory to the system after loading "
                        "(malloc_trim, %.3f s)", released / 2**20, time.perf_counter() - t0)
        # A worker loads once: the pinned staging ring the process would keep
        # for a next GPU load is host and device memory vLLM can use instead.
        rings = weightstream.release_staging()
        if rings:
            logger.info("weightstream: freed %d pinned staging ring(s) after loading", rings)
        return model

    def _keep_quantized(self, vllm_config: VllmConfig, model_config: ModelConfig) -> None:
        """Choose the weights that stay quantized and give vLLM the GPTQ
        config that serves them (keep_quantized.py), before the model is
        built with it."""
        from vllm.model_executor.model_loader.utils import get_model_architecture

        with self._open(model_config, "cpu") as ck:
            if ck.format() != "gguf":
                raise ValueError(f"weightstream: keep=quantized serves GGUF checkpoints; {ck.path} is {ck.format()} "
                                 "(vLLM serves quantized safetensors with its own kernels: drop --load-format weightstream)")
            if vllm_config.quant_config is not None:
                raise ValueError(f"weightstream: keep=quantized with --quantization {model_config.quantization}: "
                                 "the plugin chooses the quantization itself; drop --quantization")
            metadata = ck.metadata(tokenizer=False)
            names = gguf_names.pairs(ck.keys(), metadata, model_config.hf_config, lambda n: ck.shape(n)[0])
            packed = getattr(get_model_architecture(model_config)[0], "packed_modules_mapping", None) or {}
            device = str(vllm_config.device_config.device)
            kept = keep_quantized.choose(ck, names, packed, vllm_config.parallel_config.tensor_parallel_size, device)
            linear = [hf.rpartition(".")[0] for n, hf, *rest in names
                      if hf.endswith(".weight") and len(ck.shape(n)) == 2 and not (rest and rest[0] is not None)]
        if not kept:
            logger.warning("weightstream: keep=quantized: no weight of %s has an exact quantized layout on %s "
                           "(Q4_0, Q1_0, Q2_0, TQ1_0, TQ2_0 everywhere; Q8_0, Q5_0, IQ4_NL, NVFP4, MXFP4 on a GPU): "
                           "every weight is served as BF16", ck.path, device)
            return
        self._kept, self._ct = kept, keep_quantized.uses_compressed_tensors(kept)
        vllm_config.quant_config = keep_quantized.quant_config(kept, packed, linear)
        model_config.quantization = "compressed-tensors" if self._ct else "auto_gptq"
        by_layout = {(k.layout != "gptq", k.bits, k.group): k for k in kept.values()}  # integers first
        layouts = [by_layout[key].describe() for key in sorted(by_layout)]
        logger.info("weightstream: keep=quantized: %d weights stay quantized (%s %s), the rest is served as %s",
                    len(kept), "compressed-tensors" if self._ct else "GPTQ", ", ".join(layouts), model_config.dtype)
        if model_config.dtype != torch.float16 and any(k.layout == "gptq" for k in kept.values()):
            logger.warning("weightstream: keep=quantized under %s: GGUF block scales are fp16 and vLLM holds GPTQ "
                           "scales in the model's dtype, so each is rounded to it; --dtype float16 keeps them exact",
                           model_config.dtype)

    def load_weights(self, model: nn.Module, model_config: ModelConfig) -> None:
        param = next(model.parameters(), None)
        device = param.device if param is not None else torch.device("cpu")
        target = f"cuda:{device.index or 0}" if device.type == "cuda" else "cpu"
        where = parallel.layout(model)
        record_path = self._record_path(where)
        t0 = time.perf_counter()
        with self._open(model_config, target) as ck:
            log_opened(ck, logger)
            loaded, facts = self._load(ck, model, model_config, target, where)
        # compressed-tensors' config (keep=quantized with FP4) gives attention
        # layers KV-cache scales, which keep their defaults unless a
        # checkpoint holds some (a GGUF never does).
        expected = {n for n, _ in model.named_parameters() if not (self._ct and KV_CACHE_SCALE.search(n))}
        if loaded is not None:
            missing = sorted(expected - set(loaded))
            if missing:
                raise RuntimeError(
                    f"weightstream: {len(missing)} model weight(s) were not in the checkpoint (first: {missing[:5]}); "
                    "does the checkpoint match the model config?"
                )
        seconds = time.perf_counter() - t0
        fetched = fetched_since(ck, getattr(self, "_fetched0", None))
        logger.info("weightstream: loaded %s on %s in %.2f s, %d file bytes read%s", ck.path, target,
                    seconds, ck.bytes_read, fetched_note(ck, fetched))
        if record_path is not None:
            layout = {**dataclasses.asdict(where), "dp_rank": self._dp[0]}
            rec = load_record.record(ck, seconds=seconds, device=target, layout=layout, fetched=fetched, **facts)
            rec["tensors"]["kept_quantized"] = len(self._kept)
            logger.info("weightstream: load record written to %s", load_record.write(record_path, rec))

    def _record_path(self, where: parallel.Layout):
        """This rank's stats file (None: no "stats" option)."""
        if self.options.stats is None:
            return None
        return load_record.path_for(self.options.stats, rank=where.pp_rank * where.tp_size + where.tp_rank,
                                    ranks=where.tp_size * where.pp_size, dp=self._dp[0], dps=self._dp[1])

    def _load(self, ck, model, model_config: ModelConfig, target: str, where: parallel.Layout) -> tuple[Optional[set], dict]:
        """Every layout, one rank or many: each weight is first passed through
        the model's own loaders as a probe (weightstream.serving.sharding), which says what this
        rank keeps of it and where it goes. Weights that go unchanged into a
        parameter are dequantized straight into it, all in one call of the
        library; the others (GGUF q/k rows un-permuted, fused or transposed
        tensors) are read and handed to the model's load_weights. Under
        tensor, pipeline or expert parallelism only this rank's part of each
        weight is read, and nothing of the weights it does not hold (other
        stages' layers, other ranks' experts). Returns the parameter names
        loaded (None: the model's load_weights does not report them) and the
        load's facts for its record (load_record.record's keywords)."""
        m = Mapping(ck, model_config.hf_config, model)
        names, rows_per_head, fixup, fixup_into, transforms = m.names, m.rows_per_head, m.fixup, m.fixup_into, m.transforms
        kept_reports = []
        if self._kept:
            names = [n for n in names if n[0] not in self._kept]
            regions = kept_tensors.regions(model, ck, self._kept, self._ct) if where.splits() else {}
            kept_reports.append(model.load_weights(kept_tensors.tensors(ck, self._kept, regions, rows_per_head, m.unpermute,
                                                                         target, self._ct)))
        t0 = time.perf_counter()
        planned = sharding.plan(ck, model, names, rows_per_head, transposed=m.transposed)
        probe_s, probed = time.perf_counter() - t0, len(planned)
        share, whole = load_record.share(ck, planned)
        facts = {"planned": planned, "share": share, "whole": whole, "counts": {}}
        if where.splits():
            self._log_shares(ck, planned, where, share, whole)
        if where.tp_size > 1 and ck.fetched() is not None:
            # From a store: row-parallel weights as row blocks, columns swapped.
            swapped, swapped_reports = exchange.load(ck, model, planned, target, transforms, logger)
            planned = [p for p in planned if id(p) not in swapped]
            facts["counts"]["exchanged"] = len(swapped)
            kept_reports += swapped_reports
        t0 = time.perf_counter()
        direct = sharding.bulk_load(ck, model, planned, target, rows_per_head, fixup_into)
        direct_s = time.perf_counter() - t0
        done = {id(p) for p in direct}
        rest = [p for p in planned if id(p) not in done]
        t0 = time.perf_counter()
        reports = kept_reports + [p.loaded for p in direct] + [model.load_weights(sharding.load(ck, rest, target, fixup, transforms))]
        # A model whose load_weights reports nothing: nothing to check against.
        loaded = None if any(r is None for r in reports) else set().union(*reports)
        logger.info("weightstream: %d tensors probed in %.3f s; %d dequantized into their parameters in %.3f s, "
                    "%d through the model's loaders in %.3f s", probed, probe_s, len(direct), direct_s,
                    sum(p.note != "skipped" for p in rest), time.perf_counter() - t0)
        facts["counts"].update(into_parameters=len(direct), through_model=sum(p.note != "skipped" for p in rest))
        return loaded, facts

    @staticmethod
    def _log_shares(ck, planned: list, where: parallel.Layout, share: int, full: int) -> None:
        whole = [p for p in planned if p.region is None and p.note not in ("skipped", "replicated")]
        for p in whole:
            logger.info("weightstream: %s read whole on every rank: %s", p.ck_name, p.note)
        for p in planned:
            if p.note.startswith("expert read whole"):
                logger.info("weightstream: %s (%s) %s", p.ck_name, p.hf_name, p.note)
        logger.info("weightstream: %s plans to read %d of %d file bytes (%d tensors sliced, "
                    "%d replicated, %d read whole, %d skipped, %d experts of stacks kept)", where.describe(),
                    share, full, sum(p.region is not None and not p.note.startswith("expert") for p in planned),
                    sum(p.note == "replicated" for p in planned),
                    len(whole), sum(p.note == "skipped" for p in planned), sum(p.note.startswith("expert") for p in planned))
