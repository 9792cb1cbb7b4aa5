"""Independent references for the numerics contract (docs/numerics.md):
gguf-py for the GGUF block formats, ml_dtypes for the float conversions, and numpy for
FP8 scaling. BF16 results are uint16 bit patterns with every NaN replaced by
the canonical 0x7FC0."""
from __future__ import annotations

import gguf
import ml_dtypes
import numpy as np

CANONICAL_NAN = 0x7FC0


CANONICAL_NAN_F16 = 0x7E00


def to_f16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> IEEE float16 bits, round to nearest even (numpy's
    astype: subnormals, past 65504 infinity), NaN canonical."""
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        bits = x.astype(np.float16).view(np.uint16).copy()
    bits[np.isnan(x)] = CANONICAL_NAN_F16
    return bits


def to_out_bits(x: np.ndarray, out: str = "BF16") -> np.ndarray:
    """float32 values rounded once to the output dtype ("BF16" or "F16")."""
    return to_bf16_bits(x) if out == "BF16" else to_f16_bits(x)


def to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> BF16 bits, round to nearest even (ml_dtypes), NaN canonical."""
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(invalid="ignore"):  # NaNs are replaced below
        bits = x.astype(ml_dtypes.bfloat16).view(np.uint16).copy()
    bits[np.isnan(x)] = CANONICAL_NAN
    return bits


def gguf_quant(raw: bytes, qtype: gguf.GGMLQuantizationType, out: str = "BF16") -> np.ndarray:
    """Block-format bytes (Q4_0 ... Q6_K) -> BF16 (or F16) bits via gguf-py's dequantize."""
    with np.errstate(invalid="ignore", over="ignore"):
        f = gguf.quants.dequantize(np.frombuffer(raw, dtype=np.uint8), qtype)
    return to_out_bits(f.astype(np.float32).ravel(), out)


FP8 = {"F8_E4M3": ml_dtypes.float8_e4m3fn, "F8_E5M2": ml_dtypes.float8_e5m2}


def fp8(raw: bytes, dtype: str, shape, scales: np.ndarray | None, block, out: str = "BF16") -> np.ndarray:
    """FP8 codes times their scale: one float32 multiply, then BF16.

    `scales` is the float32 scale grid, `block` (rows, cols) per scale value.
    """
    rows, cols = (int(np.prod(shape[:-1])), shape[-1]) if len(shape) else (1, 1)
    w = np.frombuffer(raw, dtype=FP8[dtype]).astype(np.float32).reshape(rows, cols)
    if w.size == 0:
        return np.zeros(0, dtype=np.uint16)
    if scales is None:
        s = np.float32(1.0)
    else:
        br, bc = block
        s = np.repeat(np.repeat(scales.reshape(-(-rows // br), -(-cols // bc)), br, 0), bc, 1)[:rows, :cols]
    with np.errstate(invalid="ignore", over="ignore"):
        x = (w * s).astype(np.float32)
    return to_out_bits(x.ravel(), out)


def scale_values(raw: bytes, dtype: str) -> np.ndarray:
    """A scale tensor's values as float32 (exact for every supported dtype)."""
    if dtype == "F8_E8M0":
        e = np.frombuffer(raw, dtype=np.uint8).astype(np.int32)
        v = np.ldexp(np.float32(1.0), e - 127).astype(np.float32)
        v[e == 255] = np.nan
        return v
    np_dtype = {"F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16}[dtype]
    return np.frombuffer(raw, dtype=np_dtype).astype(np.float32)


def floats(raw: bytes, dtype: str, out: str = "BF16") -> np.ndarray:
    if dtype == out:
        return np.frombuffer(raw, dtype=np.uint16).copy()  # copied bit for bit
    np_dtype = {"F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16}[dtype]
    return to_out_bits(np.frombuffer(raw, dtype=np_dtype).astype(np.float32), out)


# E2M1 (FP4) by code, -0.0 at code 8, as the safetensors 4-bit schemes'
# producers decode it (compressed-tensors, transformers, ModelOpt).
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32)


def packed_scales(raw: bytes, kind: str) -> np.ndarray:
    """Group scales as float32: E4M3 codes (NVFP4), or U8 exponents 2^(e-127)
    computed in floating point as transformers and compressed-tensors do
    (255 overflows to +inf)."""
    if kind == "e4m3":
        return np.frombuffer(raw, dtype=ml_dtypes.float8_e4m3fn).astype(np.float32)
    e = np.frombuffer(raw, dtype=np.uint8).astype(np.int32)
    with np.errstate(over="ignore"):
        return np.ldexp(np.float32(1.0), e - 127).astype(np.float32)


def e2m1(raw: bytes, rows: int, cols: int, scales: np.ndarray, group: int, global_value=None, op=None,
         out: str = "BF16") -> np.ndarray:
    """E2M1 pairs (low nibble first) times their group scale, the global
    scale folded into each group scale first (ModelOpt: s * g; compressed-
    tensors: s / g), each a float32 operation, then BF16."""
    b = np.frombuffer(raw, dtype=np.uint8).reshape(rows, cols // 2)
    codes = np.empty((rows, cols), dtype=np.uint8)
    codes[:, 0::2] = b & 0x0F
    codes[:, 1::2] = b >> 4
    s = scales.astype(np.float32).reshape(rows, -1)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        if op == "mul":
            s = (s * np.float32(global_value)).astype(np.float32)
        elif op == "div":
            s = (s / np.float32(global_value)).astype(np.float32)
        x = (E2M1[codes] * np.repeat(s, group, axis=1)[:, :cols]).astype(np.float32)
    return to_out_bits(x.ravel(), out)


def packed_int(words: bytes, bits: int, rows: int, cols: int, scales: np.ndarray, scale_dtype, zeros: bytes | None,
               out: str = "BF16") -> np.ndarray:
    """compressed-tensors pack-quantized: values with a 2^(bits-1) offset,
    the first in the low bits of little-endian int32 words; zero points
    packed along the rows the same way. (q - zero) * scale computed in the
    scale's dtype (exact in float32 for F16/BF16 scales, then rounded to it),
    then BF16. `scales` is the stored [rows, G] or [1] array."""
    per = 32 // bits
    mask = (1 << bits) - 1
    w = np.frombuffer(words, dtype=np.uint32).reshape(rows, cols // per)
    q = ((w[:, :, None] >> (np.arange(per, dtype=np.uint32) * bits)) & mask).reshape(rows, cols).astype(np.int32) - (1 << (bits - 1))
    s = np.asarray(scales)
    g = 1 if s.size == 1 else s.shape[1]
    sf = s.astype(np.float32).reshape(-1, g)
    z = np.zeros_like(sf)
    if zeros is not None:
        zw = np.frombuffer(zeros, dtype=np.uint32).reshape(-1, g)
        zz = ((zw[:, None, :] >> (np.arange(per, dtype=np.uint32)[None, :, None] * bits)) & mask).reshape(-1, g)[:rows]
        z = zz.astype(np.float32) - (1 << (bits - 1))
    group = cols // g
    with np.errstate(invalid="ignore", over="ignore"):
        x = ((q.astype(np.float32) - np.repeat(z, group, axis=1)) * np.repeat(sf, group, axis=1)).astype(np.float32)
        if s.dtype == np.float16:
            x = x.astype(np.float16).astype(np.float32)
    return to_out_bits(x.ravel(), out)


# ggml type ids of the block formats gguf-py 0.19 cannot dequantize (Q1_0
# is in its enum without a dequantizer, Q2_0 not at all): their reference is
# ggml's own C code, `ggml_get_type_traits(id)->to_float`.
GGML_C_TYPES = {41: ("Q1_0", 128, 18), 42: ("Q2_0", 64, 18)}


def _libggml_base():
    import ctypes
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    r = subprocess.run([str(root / "scripts/build_llama_cpp.sh")], capture_output=True, text=True, check=True)
    lib = ctypes.CDLL(str(Path(r.stdout.strip().splitlines()[-1]) / "lib" / "libggml-base.so"))

    class Traits(ctypes.Structure):
        _fields_ = [("type_name", ctypes.c_char_p), ("blck_size", ctypes.c_int64), ("blck_size_interleave", ctypes.c_int64),
                    ("type_size", ctypes.c_size_t), ("is_quantized", ctypes.c_bool), ("to_float", ctypes.c_void_p),
                    ("from_float_ref", ctypes.c_void_p)]

    lib.ggml_get_type_traits.restype = ctypes.POINTER(Traits)
    lib.ggml_get_type_traits.argtypes = [ctypes.c_int]
    return lib


_GGML = None


def ggml_traits(type_id: int) -> tuple[str, int, int]:
    """(name, elements, bytes) of a ggml type as the built llama.cpp has it."""
    global _GGML
    if _GGML is None:
        _GGML = _libggml_base()
    t = _GGML.ggml_get_type_traits(type_id).contents
    return t.type_name.decode().upper(), t.blck_size, t.type_size


def ggml_c(raw: bytes, type_id: int, out: str = "BF16") -> np.ndarray:
    """Block bytes of ggml type `type_id` -> BF16 bits via the built
    llama.cpp's `to_float` (libggml-base), then round to nearest even."""
    import ctypes

    global _GGML
    if _GGML is None:
        _GGML = _libggml_base()
    t = _GGML.ggml_get_type_traits(type_id).contents
    name, elems, size = GGML_C_TYPES[type_id]
    assert (t.type_name.decode().upper(), t.blck_size, t.type_size) == (name, elems, size), "ggml's geometry"
    assert len(raw) % size == 0
    n = len(raw) // size * elems
    src = (ctypes.c_uint8 * max(len(raw), 1)).from_buffer_copy(raw or b"\0")
    values = np.zeros(n, dtype=np.float32)
    to_float = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(t.to_float)
    to_float(ctypes.addressof(src), values.ctypes.data, n)
    return to_out_bits(values, out)


def ggml_gguf_tensors(path) -> dict[str, tuple[int, bytes]]:
    """{name: (ggml type id, bytes)} of a GGUF file as ggml's own reader
    (`gguf_init_from_file`, libggml-base) sees it: for files holding types
    gguf-py's reader does not know (Q2_0)."""
    import ctypes

    global _GGML
    if _GGML is None:
        _GGML = _libggml_base()
    lib = _GGML

    class Params(ctypes.Structure):
        _fields_ = [("no_alloc", ctypes.c_bool), ("ctx", ctypes.c_void_p)]

    lib.gguf_init_from_file.restype = ctypes.c_void_p
    lib.gguf_init_from_file.argtypes = [ctypes.c_char_p, Params]
    for f, res in [("gguf_get_n_tensors", ctypes.c_int64), ("gguf_get_data_offset", ctypes.c_size_t)]:
        getattr(lib, f).restype, getattr(lib, f).argtypes = res, [ctypes.c_void_p]
    for f, res in [("gguf_get_tensor_offset", ctypes.c_size_t), ("gguf_get_tensor_name", ctypes.c_char_p),
                   ("gguf_get_tensor_type", ctypes.c_int), ("gguf_get_tensor_size", ctypes.c_size_t)]:
        getattr(lib, f).restype, getattr(lib, f).argtypes = res, [ctypes.c_void_p, ctypes.c_int64]
    lib.gguf_free.argtypes = [ctypes.c_void_p]
    ctx = lib.gguf_init_from_file(str(path).encode(), Params(True, None))
    assert ctx, f"ggml cannot read {path}"
    data = open(path, "rb").read()
    base = lib.gguf_get_data_offset(ctx)
    out = {}
    for i in range(lib.gguf_get_n_tensors(ctx)):
        off, size = base + lib.gguf_get_tensor_offset(ctx, i), lib.gguf_get_tensor_size(ctx, i)
        out[lib.gguf_get_tensor_name(ctx, i).decode()] = (lib.gguf_get_tensor_type(ctx, i), data[off:off + size])
    lib.gguf_free(ctx)
    return out
