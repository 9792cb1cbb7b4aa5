"""Row-parallel weights from object storage, each byte fetched by one rank
(issue 59 item 2).

A tensor-parallel rank keeps a column range of every row of a row-parallel
weight (o_proj, down_proj, and any weight whose probe region is every row
and some columns). From a local file it reads just those bytes. From a
store the row pieces lie a few hundred bytes to a few KiB apart, and the
library fetches their whole span with one ranged GET (a GET per row would
cost a request per piece), so every rank fetched the whole weight: TP times
its share, 125-129 % of a rank's share of a Llama at TP=2 across two Ray
nodes, about 3x at TP=8.

Here each rank instead fetches a contiguous block of rows, 1/TP of the
weight (its share of the bytes), dequantizes it, and the ranks swap column
ranges over the tensor-parallel group vLLM already has
(`all_to_all_single`: NCCL on GPUs, gloo on the CPU), so each ends with its
columns of every row: the same bits the column slice would have given (a
row's values do not depend on which columns are read; blocks are cut
along rows). The swap moves (TP-1)/TP of each rank's BF16 part between
ranks, over the group's own links, not from the store.

Chosen per weight where the other columns of a row are at most `GAP` bytes
(the span the library reads through, crates/weightstream/src/cpu/groups.rs
MAX_GAP): wider gaps are fetched as the columns themselves, one ranged GET
per row piece, which already costs no more than the share. Only for remote
checkpoints (`Checkpoint.fetched()` is not None): from a local file the
column slice reads its share from the page cache without any exchange.
"""
from __future__ import annotations

from typing import Callable, Optional

import torch

from weightstream.serving.sharding import Planned, _in_place

GAP = 16 << 10


def candidates(ck, planned: list[Planned], transforms: Callable[[str], bool]) -> list[Planned]:
    """The column-sliced weights whose row pieces the library would fetch
    as their whole span, in name order (every rank the same)."""
    out = []
    for p in planned:
        r = p.region
        if r is None or p.expert is not None or p.swap or r.repeat[0] != 1 or transforms(p.ck_name):
            continue
        rows, cols = ck.matrix(p.ck_name)
        if r.rows != (0, rows) or r.cols == (0, cols):
            continue
        if ck.slice_bytes(p.ck_name, rows=(0, 1)) - ck.slice_bytes(p.ck_name, rows=(0, 1), cols=r.cols) <= GAP:
            out.append(p)
    return sorted(out, key=lambda p: p.ck_name)


def row_blocks(rows: int, size: int) -> list[tuple[int, int]]:
    """Rank k's rows: [k * rows // size, (k + 1) * rows // size)."""
    return [(k * rows // size, (k + 1) * rows // size) for k in range(size)]


def fetch(ck, cands: list[Planned], device: str, rank: int, size: int, group, cpu_group) -> Optional[dict[int, torch.Tensor]]:
    """{id(planned): this rank's columns of every row, rows x width}, each
    weight fetched as row blocks and swapped; None (nothing fetched) where
    the ranks' candidates differ, so that every rank falls back together."""
    import torch.distributed as dist

    mine = [(p.ck_name, tuple(p.region.cols)) for p in cands]
    every = [None] * size
    dist.all_gather_object(every, mine, group=cpu_group)
    if any([n for n, _ in e] != [n for n, _ in mine] for e in every):
        return None
    out = {}
    for i, p in enumerate(cands):
        rows, cols = ck.matrix(p.ck_name)
        blocks = row_blocks(rows, size)
        widths = [e[i][1] for e in every]
        r0, r1 = blocks[rank]
        block = ck.get_slice(p.ck_name, rows=(r0, r1), device=device).reshape(r1 - r0, cols)
        el = block.element_size()
        # Byte views: gloo has no 16-bit integer all_to_all, and bytes are
        # moved as they are (NaN payloads included).
        send = torch.cat([block[:, c0:c1].reshape(-1) for c0, c1 in widths]).view(torch.uint8)
        w0, w1 = widths[rank]
        recv = torch.empty(rows * (w1 - w0) * el, dtype=torch.uint8, device=device)
        dist.all_to_all_single(recv, send, [(b1 - b0) * (w1 - w0) * el for b0, b1 in blocks],
                               [(r1 - r0) * (c1 - c0) * el for c0, c1 in widths], group=group)
        out[id(p)] = recv.view(block.dtype).reshape(rows, w1 - w0)
        del block, send
    return out


def load(ck, model, planned: list[Planned], device: str, transforms: Callable[[str], bool], logger) -> tuple[set, list]:
    """Fetch and swap the candidates of this rank's plan, then write each
    into its parameter (where the probe found one taking it unchanged) or
    hand it to the model's loaders as a full-shape tensor with the region
    filled. Returns the ids of the planned weights done, and the loaders'
    reports."""
    cands = candidates(ck, planned, transforms)
    if not cands:
        return set(), []
    from vllm.distributed import parallel_state as ps

    tp = ps.get_tp_group()
    group = tp.device_group if torch.device(device).type == "cuda" else tp.cpu_group
    got = fetch(ck, cands, device, tp.rank_in_group, tp.world_size, group, tp.cpu_group)
    if got is None:
        logger.warning("weightstream: the tensor-parallel ranks disagree on the row-parallel weights; each fetches "
                       "its columns' span instead")
        return set(), []
    storages = {t.untyped_storage().data_ptr() for t in model.parameters()}
    reports = []
    for p in cands:
        part = got.pop(id(p))
        if _in_place(ck, p, device, storages) is not None:
            p.dest.copy_(part.reshape(p.dest.shape))
            reports.append(p.loaded)
            continue
        full = torch.empty(p.region.full_shape, dtype=part.dtype, device=device)
        full.reshape(-1, full.shape[-1])[:, p.region.cols[0]:p.region.cols[1]].copy_(part)
        reports.append(model.load_weights([(p.hf_name, full)]))
    logger.info("weightstream: %d row-parallel weights fetched as row blocks of 1/%d and their columns swapped over "
                "the tensor-parallel group (each rank fetched only its share of them)", len(cands), tp.world_size)
    return {id(p) for p in cands}, reports
