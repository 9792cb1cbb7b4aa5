#!/usr/bin/env python3
"""Models for the llama.cpp adapter test, each with its reference:

    python plugins/llamacpp/tests/make_models.py OUT_DIR [LLAMA_QUANTIZE]

- tiny-llama-q4_0.gguf, tiny-llama-q8_0.gguf (gguf-py quantized), and
  tiny-llama-q8_0-tied.gguf (no output.weight: tied embeddings);
- tiny-llama-q4_k_m.gguf and tiny-llama-iq4_xs.gguf: the real
  llama-quantize's Q4_K_M and IQ4_XS of an F32 tiny Llama (Q4_K and Q6_K,
  or IQ4_XS, and for the 704-wide FFN the preset's fallback type: IQ4_NL
  for IQ4_XS), when LLAMA_QUANTIZE is given;
- for each, NAME.ref-bf16.gguf: the same file with every quantized tensor
  replaced by gguf-py's dequantization rounded to BF16 (ml_dtypes, round to
  nearest even) and F32 tensors kept; what llama.cpp loads normally;
- tiny-llama-unsupported.gguf: one tensor (blk.0.ffn_down.weight) as Q8_K
  (ggml's dot-product intermediate: no reference dequantizes it), which the
  adapter must refuse with a message naming it.
"""
from __future__ import annotations

import sys
from pathlib import Path

import gguf
import ml_dtypes
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests" / "fixtures"))
import sample_model  # noqa: E402

VT = gguf.GGUFValueType


def copy(src: Path, dst: Path, to_bf16: bool, drop=(), as_unsupported=()) -> None:
    r = gguf.GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(str(dst), arch=arch)
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if f.types[0] == VT.ARRAY:
            w.add_key_value(name, f.contents(), VT.ARRAY, sub_type=f.types[-1])
        else:
            w.add_key_value(name, f.contents(), f.types[0])
    for t in r.tensors:
        if t.name in drop:
            continue
        kind = t.tensor_type
        if t.name in as_unsupported:
            rows, cols = int(t.shape[1]), int(t.shape[0])
            w.add_tensor(t.name, np.zeros((rows, cols // 256 * 292), dtype=np.uint8), raw_dtype=gguf.GGMLQuantizationType.Q8_K)
            continue
        if kind == gguf.GGMLQuantizationType.F32:
            w.add_tensor(t.name, np.array(t.data, dtype=np.float32))
        elif to_bf16:
            x = gguf.quants.dequantize(t.data, kind).astype(np.float32)
            w.add_tensor(t.name, x.astype(ml_dtypes.bfloat16).view(np.uint8), raw_dtype=gguf.GGMLQuantizationType.BF16)
        else:
            w.add_tensor(t.name, np.array(t.data), raw_dtype=kind)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main(out: Path, llama_quantize: Path | None = None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    models = []
    for fmt in ("q4_0", "q8_0"):
        p = out / f"tiny-llama-{fmt}.gguf"
        sample_model.write_gguf(p, sample_model.PRESETS["tiny"], fmt, rng, real=True)
        models.append(p)
    if llama_quantize is not None:
        import real_quants

        f32 = real_quants.f32_model(out / "f32")
        for ftype in ("Q4_K_M", "IQ4_XS"):
            models.append(real_quants.quantize(f32, out / f"tiny-llama-{ftype.lower()}.gguf", ftype, llama_quantize))
    tied = out / "tiny-llama-q8_0-tied.gguf"
    copy(out / "tiny-llama-q8_0.gguf", tied, to_bf16=False, drop=("output.weight",))
    models.append(tied)
    for m in models:
        copy(m, m.with_suffix(".ref-bf16.gguf"), to_bf16=True)
    copy(out / "tiny-llama-q8_0.gguf", out / "tiny-llama-unsupported.gguf", to_bf16=False, as_unsupported=("blk.0.ffn_down.weight",))
    print("\n".join(str(m) for m in models))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else None)
