"""One tensor-parallel rank of test_exchange.py, in its own process (spawn):
a gloo group of `size` ranks, the checkpoint opened from the store, its
row-parallel weights (each rank's column range of every row) fetched by
weightstream_vllm/exchange.py; puts (rank, {name: bits}, fetched bytes of
the weights, share) on the queue, or (rank, error text)."""
from __future__ import annotations

import os
import traceback


def run(rank: int, size: int, port: int, url: str, env: dict, names: list, queue) -> None:
    try:
        os.environ.update(env)
        import torch
        import torch.distributed as dist

        import weightstream
        from weightstream_vllm import exchange
        from weightstream.serving.probe import Region
        from weightstream.serving.sharding import Planned

        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=size)
        ck = weightstream.open(url)
        planned, share = [], 0
        for name in names:
            rows, cols = ck.matrix(name)
            c0, c1 = exchange.row_blocks(cols, size)[rank]  # even column ranges, as vLLM's row-parallel layers
            planned.append(Planned(name, name, Region((0, rows), (c0, c1), tuple(ck.shape(name))), "sliced"))
            share += ck.slice_bytes(name, cols=(c0, c1))
        cands = exchange.candidates(ck, planned, lambda n: False)
        before = ck.fetched()["bytes"]
        got = exchange.fetch(ck, cands, "cpu", rank, size, dist.group.WORLD, dist.group.WORLD)
        fetched = ck.fetched()["bytes"] - before
        out = {p.ck_name: (p.region.cols, got[id(p)].reshape(-1).view(torch.int16).numpy().tobytes()) for p in cands}
        dist.destroy_process_group()
        queue.put((rank, out, fetched, share, len(cands)))
    except Exception:
        queue.put((rank, traceback.format_exc()))
