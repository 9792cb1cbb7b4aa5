"""Tiny GGUF models for the transformers tests, written by llama.cpp's own
tools, each with its BF16 reference:

- an F32 GGUF of random weights (gguf-py: the tiny Llama of
  tests/fixtures/sample_model.py, a Qwen3 and a Qwen3-MoE written here),
  quantized by the real `llama-quantize` to Q4_K_M, Q8_0 and IQ4_XS
  (K-quant and IQ types, with llama.cpp's fallback types where a row is not
  whole 256-blocks), a Llama without output.weight (tied embeddings), and a
  `llama-gguf-split` set of the Q4_K_M Llama;
- the reference, made without transformers' loading code: gguf-py's
  dequantization of every tensor the tool wrote, rounded to BF16 by
  ml_dtypes (round to nearest even), renamed by the table below and with
  llama.cpp's q/k row permutation undone for Llama; saved as a BF16
  safetensors directory with the config transformers derives from the GGUF.

llama.cpp's tools: $WEIGHTSTREAM_LLAMA_CPP (an install prefix with bin/),
else scripts/build_llama_cpp.sh's cached build (built on first use).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import gguf
import ml_dtypes
import numpy as np

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "tests/fixtures"))
import real_quants  # noqa: E402

# Qwen3 and Qwen3-MoE: transformers maps no GGUF key to Qwen3's head_dim or
# to Qwen3-MoE's moe_intermediate_size, so the model uses their defaults
# (128, 768), as real files of those architectures do.
QWEN = dict(hidden=256, layers=2, ff=512, vocab=512, heads=2, kv_heads=1, head_dim=128, experts=4, used=2, moe_ff=768)

# GGUF name -> transformers name (per block: blk.N. -> model.layers.N.).
NAMES = {
    "token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight", "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight", "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight", "attn_output.weight": "self_attn.o_proj.weight",
    "attn_q_norm.weight": "self_attn.q_norm.weight", "attn_k_norm.weight": "self_attn.k_norm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight", "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight", "ffn_down.weight": "mlp.down_proj.weight",
    "ffn_gate_inp.weight": "mlp.gate.weight", "ffn_down_exps.weight": "mlp.experts.down_proj",
}


def llama_cpp() -> Path:
    """The install prefix of llama.cpp's tools."""
    if os.environ.get("WEIGHTSTREAM_LLAMA_CPP"):
        return Path(os.environ["WEIGHTSTREAM_LLAMA_CPP"])
    return real_quants.llama_tool("llama-quantize").parent.parent


def write_qwen(path: Path, arch: str, rng) -> Path:
    """An F32 GGUF of a tiny random Qwen3 ('qwen3') or Qwen3-MoE ('qwen3moe')."""
    s = QWEN
    w = gguf.GGUFWriter(str(path), arch=arch)
    w.add_context_length(256)
    w.add_embedding_length(s["hidden"])
    w.add_block_count(s["layers"])
    w.add_feed_forward_length(s["ff"])
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv_heads"])
    w.add_key_length(s["head_dim"])
    w.add_value_length(s["head_dim"])
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(1e6)
    w.add_vocab_size(s["vocab"])
    w.add_tokenizer_model("none")
    if arch == "qwen3moe":
        w.add_expert_count(s["experts"])
        w.add_expert_used_count(s["used"])
        w.add_expert_feed_forward_length(s["moe_ff"])
    h, q, kv = s["hidden"], s["heads"] * s["head_dim"], s["kv_heads"] * s["head_dim"]

    def mat(*shape):
        return (rng.standard_normal(shape, dtype=np.float32) * 0.05).astype(np.float32)

    def norm(n):
        return rng.uniform(0.5, 1.5, n).astype(np.float32)

    w.add_tensor("token_embd.weight", mat(s["vocab"], h))
    for i in range(s["layers"]):
        b = f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", norm(h))
        w.add_tensor(b + "attn_q.weight", mat(q, h))
        w.add_tensor(b + "attn_k.weight", mat(kv, h))
        w.add_tensor(b + "attn_v.weight", mat(kv, h))
        w.add_tensor(b + "attn_output.weight", mat(h, q))
        w.add_tensor(b + "attn_q_norm.weight", norm(s["head_dim"]))
        w.add_tensor(b + "attn_k_norm.weight", norm(s["head_dim"]))
        w.add_tensor(b + "ffn_norm.weight", norm(h))
        if arch == "qwen3moe":
            e, f = s["experts"], s["moe_ff"]
            w.add_tensor(b + "ffn_gate_inp.weight", mat(e, h))
            w.add_tensor(b + "ffn_gate_exps.weight", mat(e, f, h))
            w.add_tensor(b + "ffn_up_exps.weight", mat(e, f, h))
            w.add_tensor(b + "ffn_down_exps.weight", mat(e, h, f))
        else:
            w.add_tensor(b + "ffn_gate.weight", mat(s["ff"], h))
            w.add_tensor(b + "ffn_up.weight", mat(s["ff"], h))
            w.add_tensor(b + "ffn_down.weight", mat(h, s["ff"]))
    w.add_tensor("output_norm.weight", norm(h))
    w.add_tensor("output.weight", mat(s["vocab"], h))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def unpermute(x: np.ndarray, n_head: int) -> np.ndarray:
    """Undo llama.cpp's LlamaModel.permute of q/k rows."""
    return x.reshape(n_head, x.shape[0] // n_head // 2, 2, *x.shape[1:]).swapaxes(1, 2).reshape(x.shape)


def reference(files: list[Path], dtype=ml_dtypes.bfloat16) -> dict[str, np.ndarray]:
    """{transformers name: BF16 array} of every tensor in `files` (a GGUF
    or the files of a split set): gguf-py's dequantization, ml_dtypes' BF16
    (or numpy's rounding to `dtype`, np.float16: one rounding each)."""
    tensors, fields = {}, None
    for f in files:
        r = gguf.GGUFReader(f)
        fields = fields or r.fields
        for t in r.tensors:
            shape = tuple(int(d) for d in reversed(t.shape))
            tensors[t.name] = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape)
    arch = fields["general.architecture"].contents()
    heads, kv_heads = fields[f"{arch}.attention.head_count"].contents(), fields[f"{arch}.attention.head_count_kv"].contents()
    out = {}
    for name, x in tensors.items():
        m = re.match(r"blk\.(\d+)\.(.*)", name)
        prefix, leaf = (f"model.layers.{m[1]}.", m[2]) if m else ("", name)
        if arch == "llama" and leaf == "attn_q.weight":
            x = unpermute(x, heads)
        elif arch == "llama" and leaf == "attn_k.weight":
            x = unpermute(x, kv_heads)
        if leaf == "ffn_up_exps.weight":
            continue  # joined with the gate below
        if leaf == "ffn_gate_exps.weight":  # transformers' gate_up_proj: gate rows, then up rows
            x = np.concatenate([x, tensors[f"blk.{m[1]}.ffn_up_exps.weight"]], axis=1)
            out[prefix + "mlp.experts.gate_up_proj"] = x.astype(dtype)
            continue
        out[prefix + NAMES[leaf]] = x.astype(dtype)
    return out


def save_reference(gguf_path: Path, ref: Path, files: list[Path]) -> None:
    """The reference as a BF16 safetensors directory with the config
    transformers derives from the GGUF."""
    from safetensors.numpy import save_file
    from transformers import AutoConfig

    ref.mkdir(parents=True, exist_ok=True)
    AutoConfig.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name).save_pretrained(ref)
    save_file(reference(files), str(ref / "model.safetensors"))


def rewrite(src: Path, dst: Path, drop=("output.weight",), extra: dict | None = None) -> Path:
    """`src` without the tensors in `drop` (by default output.weight: a
    model with tied embeddings), plus the F32 tensors in `extra`."""
    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(str(dst), arch=r.fields["general.architecture"].contents())
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if f.types[0] == gguf.GGUFValueType.ARRAY:
            w.add_key_value(name, f.contents(), f.types[0], sub_type=f.types[-1])
        else:
            w.add_key_value(name, f.contents(), f.types[0])
    for t in r.tensors:
        if t.name in drop:
            continue
        if t.tensor_type == gguf.GGMLQuantizationType.F32:
            w.add_tensor(t.name, np.array(t.data, dtype=np.float32))
        else:
            w.add_tensor(t.name, np.array(t.data), raw_dtype=t.tensor_type)
    for name, x in (extra or {}).items():
        w.add_tensor(name, x)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst


def build(root: Path, seed: int = 0) -> dict[str, tuple[Path, Path, list[Path]]]:
    """{variant: (GGUF file, BF16 reference dir, every file of the model)}.
    Each GGUF lies alone in its own directory (from_pretrained(dir, gguf_file=...))."""
    prefix = llama_cpp()
    quantize = prefix / "bin/llama-quantize"
    rng = np.random.default_rng(seed)
    f32 = {"llama": real_quants.f32_model(root / "f32", seed),
           "qwen3": write_qwen(root / "f32/qwen3-f32.gguf", "qwen3", rng),
           "qwen3moe": write_qwen(root / "f32/qwen3moe-f32.gguf", "qwen3moe", rng)}
    plan = [("llama", "Q4_K_M"), ("llama", "Q8_0"), ("llama", "IQ4_XS"), ("qwen3", "Q4_K_M"), ("qwen3moe", "Q4_K_M"),
            ("qwen3moe", "IQ4_XS")]
    out = {}
    for arch, ftype in plan:
        name = f"{arch}-{ftype.lower()}"
        d = root / name
        d.mkdir(parents=True, exist_ok=True)
        real_quants.quantize(f32[arch], d / f"{name}.gguf", ftype, quantize)
        out[name] = (d / f"{name}.gguf", root / f"{name}-ref", [d / f"{name}.gguf"])
    d = root / "llama-q8_0-tied"
    d.mkdir()
    rewrite(out["llama-q8_0"][0], d / "llama-q8_0-tied.gguf")
    out["llama-q8_0-tied"] = (d / "llama-q8_0-tied.gguf", root / "llama-q8_0-tied-ref", [d / "llama-q8_0-tied.gguf"])
    d = root / "llama-q4_k_m-split"
    d.mkdir()
    real_quants.run([prefix / "bin/llama-gguf-split", "--split", "--split-max-tensors", 8, out["llama-q4_k_m"][0],
                     d / "llama-q4_k_m"], "llama-gguf-split")
    parts = sorted(d.glob("llama-q4_k_m-*-of-*.gguf"))
    assert len(parts) > 2, parts
    out["llama-q4_k_m-split"] = (parts[0], root / "llama-q4_k_m-split-ref", parts)
    for g, ref, files in out.values():
        save_reference(g, ref, files)
    return out


if __name__ == "__main__":
    for k, v in build(Path(sys.argv[1])).items():
        print(k, *v[:2])
