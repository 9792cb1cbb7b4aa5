"""This worker's place in vLLM's parallel layout: tensor, pipeline and
expert parallel ranks, as vLLM's own process groups say (never parsed from
names). What a rank keeps of each weight is then asked of the model itself
(weightstream.serving.sharding's probe): its loaders narrow tensor-parallel weights, skip the
layers of other pipeline stages (`is_pp_missing_parameter`, `PPMissingLayer`)
and the experts another expert-parallel rank holds (FusedMoE's expert map,
linear or round-robin placement)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    tp_rank: int = 0
    tp_size: int = 1
    pp_rank: int = 0
    pp_size: int = 1
    ep_rank: int = 0
    ep_size: int = 1

    def splits(self) -> bool:
        """Whether this rank keeps less than the whole model."""
        return self.tp_size > 1 or self.pp_size > 1 or self.ep_size > 1

    def describe(self) -> str:
        parts = [f"{k} rank {r}/{n}" for k, r, n in (("tensor-parallel", self.tp_rank, self.tp_size),
                                                        ("pipeline stage", self.pp_rank, self.pp_size),
                                                        ("expert-parallel", self.ep_rank, self.ep_size)) if n > 1]
        return ", ".join(parts) or "the only rank"


def _group(getter) -> tuple[int, int]:
    try:
        g = getter()
        return int(g.rank_in_group), int(g.world_size)
    except (AssertionError, AttributeError, RuntimeError, ImportError):
        return 0, 1


def layout(model=None) -> Layout:
    """This worker's ranks; all zero of one where vLLM set up no groups (a
    model built outside an engine). Expert parallelism as the model's MoE
    layers were built with it (their `moe_parallel_config`, on the layer or
    its `moe_config`)."""
    try:
        from vllm.distributed import parallel_state as ps
    except ImportError:
        return Layout()
    tp_rank, tp_size = _group(ps.get_tp_group)
    pp_rank, pp_size = _group(ps.get_pp_group)
    ep_rank, ep_size = 0, 1
    for m in model.modules() if model is not None else ():
        cfg = getattr(m, "moe_parallel_config", None) or getattr(getattr(m, "moe_config", None), "moe_parallel_config", None)
        if cfg is not None and getattr(cfg, "use_ep", False):
            ep_rank, ep_size = int(cfg.ep_rank), int(cfg.ep_size)
            break
    return Layout(tp_rank, tp_size, pp_rank, pp_size, ep_rank, ep_size)
