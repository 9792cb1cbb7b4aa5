"""A load's record as JSON, for scripts: `--model-loader-extra-config
'{"stats": "/var/log/ws/load-{rank}.json"}'` in vLLM and SGLang.

Each rank writes its own file when its load ends: what it read and what it
really fetched from a store (bytes and ranged GETs, the opens' headers
included: egress, not a plan), its share of the checkpoint, the seconds the
load took and where it sits in the parallel layout, so that an operator
sees each node's egress without parsing logs. The path may hold `{rank}`
(the worker's rank in its engine: pipeline stage x tensor-parallel size +
tensor-parallel rank), `{dp}` (vLLM's data-parallel replica; SGLang does
not tell its loader, so there use `{pid}`) and `{pid}`; a
path that several ranks or replicas would share is refused before the load
starts, so no rank's record overwrites another's. The file is written
whole or not at all (a temporary file renamed over it).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional

FIELDS = ("rank", "dp", "pid")


def check_template(template: Any) -> str:
    """`template` as given in the extra config, or a ValueError saying what
    is wrong with it (at option parsing, before any engine work)."""
    if not isinstance(template, str) or not template:
        raise ValueError(f"--model-loader-extra-config: stats is a file path (it may hold {{rank}}, {{dp}}, {{pid}}), "
                         f"not {template!r}")
    try:
        template.format(**{f: 0 for f in FIELDS})
    except (KeyError, IndexError, ValueError) as e:
        raise ValueError(f"--model-loader-extra-config: stats {template!r}: only {{rank}}, {{dp}} and {{pid}} may be "
                         f"filled in ({type(e).__name__}: {e}); write a literal brace as {{{{ or }}}}") from None
    return template


def path_for(template: str, *, rank: int, ranks: int, dp: Optional[int] = 0, dps: int = 1) -> Path:
    """This rank's record file; a ValueError where another rank or replica
    would write the same file. `dp` None: the runtime does not say which
    replica this is (then only {pid} tells replicas apart)."""
    if ranks > 1 and "{rank}" not in template:
        raise ValueError(f"--model-loader-extra-config: stats {template!r} would be written by each of this engine's "
                         f"{ranks} ranks: put {{rank}} in it (e.g. load-{{rank}}.json)")
    apart = ("{pid}",) if dp is None else ("{dp}", "{pid}")
    if dps > 1 and not any(f in template for f in apart):
        raise ValueError(f"--model-loader-extra-config: stats {template!r} would be written by each of the {dps} "
                         f"data-parallel replicas: put {apart[0]} in it (e.g. load-{apart[0]}-{{rank}}.json)")
    return Path(template.format(rank=rank, dp=-1 if dp is None else dp, pid=os.getpid()))


def share(ck, planned: list) -> tuple[int, int]:
    """(the bytes this rank plans to read, the bytes of every tensor it
    plans for, read whole): its part of checkpoint `ck` under `planned`
    (sharding.plan's list), for the logs and the record."""
    mine = sum(p.region.bytes(ck, p.ck_name) if p.region is not None else ck.slice_bytes(p.ck_name)
               for p in planned if p.note != "skipped")
    return mine, sum(ck.slice_bytes(n) for n in {p.ck_name for p in planned})


def record(ck, *, seconds: float, device: str, layout: dict, planned: list, share: int, whole: int,
           fetched: Optional[dict], counts: dict) -> dict:
    """The record of one rank's load of checkpoint `ck` (weightstream.Checkpoint):
    `planned` its sharding plan, `counts` how many tensors took each way
    into the model ({"into_parameters": n, "through_model": n, ...}),
    `fetched` checkpoints.fetched_since's count (the log line's)."""
    return {
        "checkpoint": str(ck.path),
        "format": ck.format(),
        "device": device,
        "layout": layout,
        "seconds": round(seconds, 6),
        "tensors": {"planned": len(planned), "skipped": sum(p.note == "skipped" for p in planned), **counts},
        # share: what this rank plans to read of the tensors it touches;
        # whole: those tensors' bytes; read: what its loads asked for.
        "bytes": {"share": share, "whole": whole, "read": ck.bytes_read},
        # From a store since this load began ({"bytes", "requests"}); null
        # for local files.
        "fetched": fetched,
        "sources": ck.sources(),
    }


def write(path: Path, rec: dict) -> Path:
    """`rec` as JSON at `path` (parents made), whole or not at all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(rec, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
