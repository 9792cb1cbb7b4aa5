"""The tensors of the weights keep=quantized serves quantized
(keep_quantized.py chose them and the config), in the checkpoint layout
the config's vLLM scheme loads, for the model's own loaders: GPTQ's
`qweight`, `scales`, `qzeros`; under compressed-tensors' config (a model
with FP4 weights) `weight_packed` and `weight_scale` (NVFP4 also
`weight_global_scale`, 1; the integer layouts `weight_shape`). Under
tensor parallelism each rank reads only the region its loaders keep."""
from __future__ import annotations

from .keep_quantized import QZEROS, Kept


def _probed_tensor(k: Kept, rows: int, cols: int, ct: bool) -> tuple[str, tuple[int, int], int, bool]:
    """(parameter, shape, input features per element of its input axis,
    whether the input features are its rows) of the tensor probed for `k`."""
    per = 2 if k.layout == "fp4" else 32 // k.bits
    if ct:
        return f"{k.module}.weight_packed", (rows, cols // per), per, False
    return f"{k.module}.qweight", (cols // per, rows), per, True


def regions(model, ck, kept: dict[str, Kept], ct: bool) -> dict:
    """{checkpoint name: (output rows, input columns) this rank keeps, or
    None: read whole}, asked of the model's own loaders with a probe of
    each packed tensor (weightstream.serving.sharding's probe): a column-parallel rank keeps
    a range of the output features, a row-parallel one a range of the
    packed input features (whole groups)."""
    from weightstream.serving.probe import probe_all

    items, shapes = [], []
    for k in kept.values():
        name, shape, per, inputs_are_rows = _probed_tensor(k, *ck.matrix(k.ck_name), ct)
        items.append((name, shape, False))
        shapes.append((shape, per, inputs_are_rows))
    out = {}
    for k, (shape, per, inputs_are_rows), probed in zip(kept.values(), shapes, probe_all(model, items)):
        r = probed.region
        step = k.group // per  # packed elements per group
        if r is None or r.repeat[0] != 1:
            out[k.ck_name] = None
            continue
        (outs, ins) = (r.cols, r.rows) if inputs_are_rows else (r.rows, r.cols)
        if ins[0] % step or ins[1] % step or (r.rows == (0, shape[0]) and r.cols == (0, shape[1])):
            out[k.ck_name] = None
        else:
            out[k.ck_name] = (outs, (ins[0] * per, ins[1] * per))
    return out


def _full(part, shape: tuple, at: tuple):
    """`part` placed at `at` (slices) of an uninitialised tensor of `shape`
    (the elements other ranks hold: the loaders never touch them)."""
    import torch

    full = torch.empty(shape, dtype=part.dtype, device=part.device)
    full[at] = part
    return full


def tensors(ck, kept: dict[str, Kept], regions: dict, rows_per_head, unpermute, device: str = "cpu", ct: bool = False):
    """(HF name, tensor) of each kept weight's tensors, on `device` (the
    model's: on a GPU the bits move there, by weightstream's kernels).
    Where this rank keeps a region (`regions`), only its bytes are read,
    into full-shape tensors. GGUF q/k output features are permuted within
    each head (llama.cpp's converter): put back in Hugging Face order (a
    rank's range is whole heads)."""
    import torch

    for k in kept.values():
        rows, cols = ck.matrix(k.ck_name)
        region = regions.get(k.ck_name)
        per_head = rows_per_head(k.ck_name)
        if region is not None and per_head and region[0][0] % per_head:
            region = None
        (r0, r1), (c0, c1) = region or ((0, rows), (0, cols))
        out_at = slice(r0, r1)
        if k.layout == "fp4":
            packed, scales = ck.get_fp4(k.ck_name, rows=(r0, r1), cols=(c0, c1), device=device)
            if per_head:
                packed, scales = unpermute(k.ck_name, packed, rows), unpermute(k.ck_name, scales, rows)
            if region is not None:
                packed = _full(packed, (rows, cols // 2), (out_at, slice(c0 // 2, c1 // 2)))
                scales = _full(scales, (rows, cols // k.group), (out_at, slice(c0 // k.group, c1 // k.group)))
            yield f"{k.module}.weight_packed", packed.contiguous()
            yield f"{k.module}.weight_scale", (scales.view(torch.float8_e4m3fn) if k.group == 16 else scales).contiguous()
            if k.group == 16:
                # compressed-tensors stores the global scale's inverse; 1 either way.
                yield f"{k.module}.weight_global_scale", torch.ones(1, dtype=torch.float32, device=packed.device)
            continue
        qweight, scales = ck.get_gptq(k.ck_name, rows=(r0, r1), cols=(c0, c1), device=device)
        if per_head:
            qweight = unpermute(k.ck_name, qweight.t(), rows).t()
            scales = unpermute(k.ck_name, scales.t(), rows).t()
        pack = 32 // k.bits
        if region is not None:
            qweight = _full(qweight, (cols // pack, rows), (slice(c0 // pack, c1 // pack), out_at))
            scales = _full(scales, (cols // k.group, rows), (slice(c0 // k.group, c1 // k.group), out_at))
        if ct:
            # compressed-tensors' pack-quantized: the same words, [out, in / pack].
            yield f"{k.module}.weight_packed", qweight.t().contiguous()
            yield f"{k.module}.weight_scale", scales.t().contiguous()
            yield f"{k.module}.weight_shape", torch.tensor([rows, cols], dtype=torch.int64, device=qweight.device)
            continue
        qzeros = torch.full((cols // k.group, rows // pack), QZEROS[k.bits], dtype=torch.int32, device=qweight.device)
        yield f"{k.module}.qweight", qweight.contiguous()
        yield f"{k.module}.scales", scales.contiguous()
        yield f"{k.module}.qzeros", qzeros
