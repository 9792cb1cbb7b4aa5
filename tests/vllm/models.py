"""Tiny random Llama checkpoints for the vLLM tests, each with the BF16
checkpoint of its reference-dequantized weights (what vLLM's default loader
must be given to produce the same tokens):

- bf16: the transformers checkpoint itself;
- q8_0 / q4_0: GGUF written by gguf-py with llama.cpp's q/k permutation;
  reference = gguf-py dequantize, un-permuted, BF16 (round to nearest even);
- fp8: F8_E4M3 weights with 128x128 weight_scale_inv blocks and an fp8
  quantization_config; reference = numpy dequant, BF16;
- q4_k_m / q3_k_m (kquant_variant): a wider model (K-quants need 256-wide
  rows) written as an F32 GGUF and quantized by the real llama-quantize;
  reference = gguf-py dequantize of every tensor it wrote, un-permuted, BF16.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import gguf
import ml_dtypes
import numpy as np

CONFIG = dict(
    vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-5, tie_word_embeddings=False,
)


def permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's LlamaModel.permute (convert_hf_to_gguf.py)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def bf16(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).astype(ml_dtypes.bfloat16)


# K-quants need rows of whole 256-element super-blocks: hidden 512 and FFN
# 768, so every matrix can take the preset's K-quant types; at TP=2 a
# rank's half of a down_proj row (384 columns) is 1.5 super-blocks, read
# from the covering blocks and trimmed (issue 28).
KQUANT_CONFIG = {**CONFIG, "hidden_size": 512, "intermediate_size": 768, "num_attention_heads": 8, "num_key_value_heads": 4}


def hf_model(out: Path, seed: int, tied: bool = False, config: dict = CONFIG):
    """A tiny random LlamaForCausalLM saved as BF16 safetensors; its weights as float32."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    model = LlamaForCausalLM(LlamaConfig(**{**config, "tie_word_embeddings": tied}, torch_dtype="bfloat16")).to(torch.bfloat16)
    # Larger than the default init so that quantization changes the logits.
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(4.0)
    model.save_pretrained(out, safe_serialization=True)
    return {k: v.float().numpy() for k, v in model.state_dict().items()}


def save_reference(d: Path, config_dir: Path, weights: dict[str, np.ndarray]):
    from safetensors.numpy import save_file

    d.mkdir(parents=True, exist_ok=True)
    save_file({k: bf16(v) for k, v in weights.items()}, str(d / "model.safetensors"))
    config = json.loads((config_dir / "config.json").read_text())
    config.pop("quantization_config", None)
    (d / "config.json").write_text(json.dumps(config))


def gguf_variant(out: Path, ref: Path, hf_dir: Path, weights: dict[str, np.ndarray], qtype: gguf.GGMLQuantizationType,
                 config: dict = CONFIG):
    """GGUF with llama.cpp names and q/k permutation, plus config.json.
    qtype F32 writes the weights unquantized (llama-quantize's input)."""
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(hf_dir / "config.json", out / "config.json")
    arch = gguf.MODEL_ARCH.LLAMA
    name_map = gguf.get_tensor_name_map(arch, config["num_hidden_layers"])
    w = gguf.GGUFWriter(str(out / "model.gguf"), arch="llama")
    w.add_block_count(config["num_hidden_layers"])
    w.add_head_count(config["num_attention_heads"])
    w.add_head_count_kv(config["num_key_value_heads"])
    w.add_embedding_length(config["hidden_size"])
    w.add_feed_forward_length(config["intermediate_size"])
    w.add_context_length(config["max_position_embeddings"])
    w.add_layer_norm_rms_eps(config["rms_norm_eps"])
    if qtype == gguf.GGMLQuantizationType.F32:
        # What llama-quantize needs to load the model: a vocabulary size, and
        # no tokenizer (llama.cpp then makes dummy tokens).
        w.add_vocab_size(config["vocab_size"])
        w.add_tokenizer_model("none")
    reference = {}
    for hf_name, x in weights.items():
        if hf_name == "lm_head.weight" and json.loads((hf_dir / "config.json").read_text()).get("tie_word_embeddings"):
            continue  # tied: llama.cpp writes no output.weight
        base, _, suffix = hf_name.rpartition(".")
        gname = f"{name_map.get_name(base)}.{suffix}"
        x = bf16(x).astype(np.float32)  # the model's own BF16 values
        if gname.endswith("attn_q.weight"):
            x = permute(x, config["num_attention_heads"])
        elif gname.endswith("attn_k.weight"):
            x = permute(x, config["num_key_value_heads"])
        if x.ndim == 1 or qtype == gguf.GGMLQuantizationType.F32:  # norms stay F32, as llama.cpp writes them
            w.add_tensor(gname, x)
            deq = x
        else:
            q = gguf.quants.quantize(x, qtype)
            w.add_tensor(gname, q, raw_dtype=qtype)
            deq = gguf.quants.dequantize(q, qtype).reshape(x.shape)
        if gname.endswith("attn_q.weight"):
            deq = unpermute(deq, config["num_attention_heads"])
        elif gname.endswith("attn_k.weight"):
            deq = unpermute(deq, config["num_key_value_heads"])
        reference[hf_name] = deq
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    save_reference(ref, hf_dir, reference)


def kquant_variant(out: Path, ref: Path, hf_dir: Path, weights: dict[str, np.ndarray], ftype: str, quantize):
    """An F32 GGUF of `weights` quantized by llama-quantize to `ftype` (e.g.
    Q4_K_M); the reference is gguf-py's dequantization of what it wrote.
    `quantize(src, dst, ftype)` runs the tool."""
    f32 = out.parent / f"{out.name}-f32"
    gguf_variant(f32, out.parent / f"{out.name}-f32-ref", hf_dir, weights, gguf.GGMLQuantizationType.F32, KQUANT_CONFIG)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(hf_dir / "config.json", out / "config.json")
    quantize(f32 / "model.gguf", out / "model.gguf", ftype)
    name_map = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, KQUANT_CONFIG["num_hidden_layers"])
    hf_names = {}
    for hf_name in weights:
        base, _, suffix = hf_name.rpartition(".")
        hf_names[f"{name_map.get_name(base)}.{suffix}"] = hf_name
    reference, types = {}, set()
    for t in gguf.GGUFReader(out / "model.gguf").tensors:
        types.add(t.tensor_type.name)
        shape = tuple(int(d) for d in reversed(t.shape))
        deq = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape)
        if t.name.endswith("attn_q.weight"):
            deq = unpermute(deq, KQUANT_CONFIG["num_attention_heads"])
        elif t.name.endswith("attn_k.weight"):
            deq = unpermute(deq, KQUANT_CONFIG["num_key_value_heads"])
        reference[hf_names[t.name]] = deq
    save_reference(ref, hf_dir, reference)
    return types


def fp8_variant(out: Path, ref: Path, hf_dir: Path, weights: dict[str, np.ndarray]):
    """Block-FP8 (DeepSeek layout) of every 2-D weight; 1-D ones BF16."""
    from safetensors.numpy import save_file

    out.mkdir(parents=True, exist_ok=True)
    tensors, reference = {}, {}
    for name, x in weights.items():
        x = bf16(x).astype(np.float32)
        if x.ndim != 2:
            tensors[name] = bf16(x)
            reference[name] = x
            continue
        rows, cols = x.shape
        gr, gc = -(-rows // 128), -(-cols // 128)
        scales = np.zeros((gr, gc), dtype=np.float32)
        q = np.zeros_like(x)
        for i in range(gr):
            for j in range(gc):
                blk = x[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128]
                s = np.float32(max(np.abs(blk).max(), 1e-12) / 448.0)
                scales[i, j] = s
                q[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128] = blk / s
        codes = q.astype(ml_dtypes.float8_e4m3fn)
        tensors[name] = codes
        tensors[name + "_scale_inv"] = scales
        s_full = np.repeat(np.repeat(scales, 128, 0), 128, 1)[:rows, :cols]
        reference[name] = (codes.astype(np.float32) * s_full).astype(np.float32)
    save_file(tensors, str(out / "model.safetensors"))
    config = json.loads((hf_dir / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
    (out / "config.json").write_text(json.dumps(config))
    save_reference(ref, hf_dir, reference)


def build_all(root: Path, seed: int = 0) -> dict[str, tuple[Path, Path]]:
    """{kind: (checkpoint for weightstream, BF16 reference for the default loader)}."""
    hf_dir = root / "bf16"
    weights = hf_model(hf_dir, seed)
    out = {"bf16": (hf_dir, hf_dir)}
    for kind, qtype in (("q8_0", gguf.GGMLQuantizationType.Q8_0), ("q4_0", gguf.GGMLQuantizationType.Q4_0)):
        gguf_variant(root / kind, root / f"{kind}-ref", hf_dir, weights, qtype)
        out[kind] = (root / kind, root / f"{kind}-ref")
    fp8_variant(root / "fp8", root / "fp8-ref", hf_dir, weights)
    out["fp8"] = (root / "fp8", root / "fp8-ref")
    tied_dir = root / "tied-bf16"
    tied_weights = hf_model(tied_dir, seed + 1, tied=True)
    gguf_variant(root / "tied-q8_0", root / "tied-q8_0-ref", tied_dir, tied_weights, gguf.GGMLQuantizationType.Q8_0)
    out["tied-q8_0"] = (root / "tied-q8_0", root / "tied-q8_0-ref")
    return out


def build_kquants(root: Path, seed: int, quantize, ftypes=("Q4_K_M", "Q3_K_M")) -> dict[str, tuple[Path, Path, set]]:
    """{ftype: (GGUF checkpoint dir, BF16 reference dir, ggml types in the file)}."""
    hf_dir = root / "kquant-bf16"
    weights = hf_model(hf_dir, seed + 2, config=KQUANT_CONFIG)
    out = {}
    for ftype in ftypes:
        d = root / ftype.lower()
        out[ftype] = (d, root / f"{ftype.lower()}-ref", kquant_variant(d, root / f"{ftype.lower()}-ref", hf_dir, weights, ftype, quantize))
    return out


# --- Packed 4-bit safetensors (NVFP4, MXFP4) -------------------------------
#
# Codes come from quantizing the model's own BF16 weights (so that the
# models still say something), but any valid codes would do: the test is
# that vLLM serves what the checkpoint holds, compared with a BF16
# checkpoint of its reference dequantization.

E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32)
# Linear layers a 4-bit checkpoint quantizes (embeddings, lm_head and norms stay BF16, as in real ones).
LINEAR = ("q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight", "gate_proj.weight", "up_proj.weight",
          "down_proj.weight")


def e2m1_codes(y: np.ndarray) -> np.ndarray:
    """The nearest E2M1 code (sign in bit 3) of each value."""
    mag = np.minimum(np.abs(y), 6.0)
    idx = np.argmin(np.abs(mag[..., None] - E2M1[:8]), axis=-1).astype(np.uint8)
    return idx | (np.signbit(y).astype(np.uint8) << 3)


def pack_e2m1(codes: np.ndarray) -> np.ndarray:
    """Pairs of codes along the last axis, the first in the low nibble."""
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)


def nvfp4_quantize(x: np.ndarray):
    """NVFP4 of a [rows, cols] float32 matrix: (packed U8 [rows, cols/2],
    E4M3 group scales [rows, cols/16], global scale g). g is a power of two,
    so that ModelOpt's s * g and compressed-tensors' s / (1/g) are the same
    exact float32 value and both layouts dequantize to the same BF16."""
    rows, cols = x.shape
    amax = float(np.abs(x).max()) or 1.0
    g = np.float32(2.0 ** np.ceil(np.log2(amax / (6.0 * 448.0))))
    groups = x.reshape(rows, cols // 16, 16)
    s = (np.abs(groups).max(axis=-1) / 6.0 / g).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
    sf = s.astype(np.float32) * g
    codes = e2m1_codes(groups / np.where(sf > 0, sf, 1.0)[..., None]).reshape(rows, cols)
    return pack_e2m1(codes), s, g


def mxfp4_quantize(x: np.ndarray):
    """MXFP4 along the last axis (groups of 32): (packed U8 [..., cols/2],
    U8 exponents [..., cols/32], scale 2^(e - 127))."""
    groups = x.reshape(*x.shape[:-1], x.shape[-1] // 32, 32)
    amax = np.abs(groups).max(axis=-1)
    e = np.clip(np.floor(np.log2(np.where(amax > 0, amax, 1.0))) - 2 + 127, 1, 254).astype(np.uint8)
    codes = e2m1_codes(groups / np.ldexp(np.float32(1.0), e.astype(np.int32) - 127)[..., None]).reshape(x.shape)
    return pack_e2m1(codes), e


def _reference_module():
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
    import reference

    return reference


def nvfp4_variants(root: Path, hf_dir: Path, weights: dict[str, np.ndarray]) -> dict[str, tuple[Path, Path]]:
    """The Llama's linear layers in NVFP4, as ModelOpt writes it (`X.weight`
    U8, `X.weight_scale` E4M3, `X.weight_scale_2` F32, `X.input_scale`;
    hf_quant_config.json, as ModelOpt up to 0.29 writes it beside a
    config.json without quantization_config) and as compressed-tensors
    nvfp4-pack-quantized (`X.weight_packed`, `X.weight_scale`,
    `X.weight_global_scale` [1], `X.input_global_scale`).

    The references: ModelOpt's bf16(e2m1 * (f32(weight_scale) *
    weight_scale_2)) in numpy (tests/python/reference.py), and
    compressed-tensors' own NVFP4PackedCompressor.decompress. They are one
    and the same BF16 checkpoint (the global scales are powers of two):
    checked here bit for bit, so one default-loader run serves both."""
    import torch
    from compressed_tensors.compressors.nvfp4.base import NVFP4PackedCompressor
    from safetensors.numpy import save_file

    reference = _reference_module()
    modelopt, ct = {}, {}
    ref_modelopt, ref_ct = {}, {}
    for name, x in weights.items():
        x = bf16(x).astype(np.float32)
        if not name.endswith(LINEAR):
            modelopt[name] = ct[name] = bf16(x)
            ref_modelopt[name] = ref_ct[name] = x
            continue
        base = name[: -len(".weight")]
        rows, cols = x.shape
        packed, s, g = nvfp4_quantize(x)
        modelopt[name] = packed
        modelopt[base + ".weight_scale"] = s
        modelopt[base + ".weight_scale_2"] = np.array(g, dtype=np.float32)  # ModelOpt writes 0-dim
        modelopt[base + ".input_scale"] = np.array(1.0, dtype=np.float32)
        bits = reference.e2m1(packed.tobytes(), rows, cols, s.astype(np.float32), 16, g, "mul")
        ref_modelopt[name] = bits.view(ml_dtypes.bfloat16).reshape(rows, cols).astype(np.float32)
        ct[base + ".weight_packed"] = packed
        ct[base + ".weight_scale"] = s
        ct[base + ".weight_global_scale"] = np.array([np.float32(1.0) / g], dtype=np.float32)
        ct[base + ".input_global_scale"] = np.array([1.0], dtype=np.float32)
        state = {"weight_packed": torch.from_numpy(packed), "weight_scale": torch.from_numpy(s.view(np.uint8)).view(torch.float8_e4m3fn),
                 "weight_global_scale": torch.from_numpy(ct[base + ".weight_global_scale"])}
        ref_ct[name] = NVFP4PackedCompressor.decompress(state, None)["weight"].float().numpy()
    for name in ref_modelopt:
        a, b = bf16(ref_modelopt[name]).view(np.uint16), bf16(ref_ct[name]).view(np.uint16)
        assert np.array_equal(a, b), f"{name}: the ModelOpt and compressed-tensors references differ"
    config = json.loads((hf_dir / "config.json").read_text())
    out = {}
    d = root / "nvfp4-modelopt"
    d.mkdir(parents=True, exist_ok=True)
    save_file(modelopt, str(d / "model.safetensors"))
    (d / "config.json").write_text(json.dumps(config))
    (d / "hf_quant_config.json").write_text(json.dumps({
        "producer": {"name": "modelopt", "version": "0.29.0"},
        "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None, "group_size": 16, "exclude_modules": ["lm_head"]}}))
    out["nvfp4-modelopt"] = d
    d = root / "nvfp4-ct"
    d.mkdir(parents=True, exist_ok=True)
    save_file(ct, str(d / "model.safetensors"))
    fmt = "nvfp4-pack-quantized"
    group = {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "symmetric": True, "dynamic": False}
    config_ct = {**config, "quantization_config": {
        "quant_method": "compressed-tensors", "format": fmt, "quantization_status": "compressed", "ignore": ["lm_head"],
        "config_groups": {"group_0": {"targets": ["Linear"], "format": fmt, "weights": group,
                                      "input_activations": {**group, "dynamic": "local"}}}}}
    (d / "config.json").write_text(json.dumps(config_ct))
    out["nvfp4-ct"] = d
    save_reference(root / "nvfp4-ref", hf_dir, ref_modelopt)
    return {k: (v, root / "nvfp4-ref") for k, v in out.items()}


# hidden 64 != intermediate 96: an expert stack in the wrong orientation
# cannot be loaded by mistake (every MXFP4 row is whole 32-element groups).
GPT_OSS_CONFIG = dict(
    vocab_size=512, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, head_dim=32, num_local_experts=4, num_experts_per_tok=2, sliding_window=16,
    max_position_embeddings=256, rms_norm_eps=1e-5, tie_word_embeddings=False,
    # gpt-oss's YaRN, its original context scaled down with the rest (8 x 32 = 256).
    rope_parameters={"rope_type": "yarn", "rope_theta": 150000.0, "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                     "truncate": False, "original_max_position_embeddings": 8},
)


def gpt_oss_variant(root: Path, seed: int, config: dict = GPT_OSS_CONFIG) -> tuple[Path, Path]:
    """A tiny random gpt-oss (2 layers, 4 experts) with its experts in
    MXFP4 as the gpt-oss checkpoints store them (`..._blocks` U8 [E, out,
    in/32, 16], `..._scales` U8 [E, out, in/32], quantization_config
    quant_method mxfp4; everything else BF16), and the BF16 reference in
    the layout the BF16 gpt-oss checkpoints use (gate_up_proj [E, H, 2I],
    down_proj [E, I, H]): transformers' convert_moe_packed_tensors of the
    blocks and scales, which transposes them to that layout itself."""
    import torch
    from safetensors.numpy import save_file
    from transformers import GptOssConfig, GptOssForCausalLM
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors

    torch.manual_seed(seed)
    config = GptOssConfig(**config, architectures=["GptOssForCausalLM"])
    model = GptOssForCausalLM(config).to(torch.bfloat16)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.08)  # gpt-oss's default init leaves some at 0 or 1; random everywhere
        for n, p in model.named_parameters():
            if n.endswith("norm.weight"):
                p.add_(1.0)
    weights = {k: v.float().numpy() for k, v in model.state_dict().items()}
    quantized, reference = {}, {}
    for name, x in weights.items():
        x = bf16(x).astype(np.float32)
        if name.endswith(("mlp.experts.gate_up_proj", "mlp.experts.down_proj")):
            stored = np.ascontiguousarray(x.transpose(0, 2, 1))  # [E, out, in] as the MXFP4 checkpoints hold it
            packed, e = mxfp4_quantize(stored)
            E, out_dim, in_dim = stored.shape
            blocks = packed.reshape(E, out_dim, in_dim // 32, 16)
            quantized[name + "_blocks"] = blocks
            quantized[name + "_scales"] = e
            reference[name] = convert_moe_packed_tensors(torch.from_numpy(blocks), torch.from_numpy(e),
                                                         dtype=torch.bfloat16).float().numpy()
            assert reference[name].shape == x.shape, (name, reference[name].shape, x.shape)
        else:
            quantized[name] = bf16(x)
            reference[name] = x
    ref = root / "gpt-oss-ref"
    ref.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(ref)
    save_file({k: bf16(v) for k, v in reference.items()}, str(ref / "model.safetensors"))
    d = root / "gpt-oss-mxfp4"
    d.mkdir(parents=True, exist_ok=True)
    save_file(quantized, str(d / "model.safetensors"))
    cfg = json.loads((ref / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
    (d / "config.json").write_text(json.dumps(cfg))
    return d, ref


def int4_variant(root: Path, hf_dir: Path, weights: dict[str, np.ndarray]) -> tuple[Path, Path]:
    """The Llama's linear layers as compressed-tensors pack-quantized INT4
    with zero points in groups of 32 and BF16 scales (llm-compressor's
    asymmetric W4A16): `X.weight_packed` I32, `X.weight_shape`,
    `X.weight_scale`, `X.weight_zero_point` packed along the rows. The
    reference is compressed-tensors' own PackedQuantizationCompressor.decompress."""
    import sys

    import torch
    from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme
    from safetensors.numpy import save_file

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
    from packed import pack_int32

    args = QuantizationArgs(num_bits=4, type="int", symmetric=False, strategy="group", group_size=32)
    packed, reference = {}, {}
    for name, x in weights.items():
        x = bf16(x).astype(np.float32)
        if not name.endswith(LINEAR):
            packed[name] = bf16(x)
            reference[name] = x
            continue
        base = name[: -len(".weight")]
        rows, cols = x.shape
        g = x.reshape(rows, cols // 32, 32)
        lo, hi = np.minimum(g.min(axis=-1), 0), np.maximum(g.max(axis=-1), 0)
        scale = bf16(np.where(hi > lo, (hi - lo) / 15, 1.0)).astype(np.float32)
        zero = np.clip(np.round(-lo / scale) - 8, -8, 7)
        q = np.clip(np.round(g / scale[..., None]) + zero[..., None], -8, 7).reshape(rows, cols)
        packed[base + ".weight_packed"] = pack_int32((q + 8).astype(np.uint32), 4, 1)
        packed[base + ".weight_shape"] = np.array([rows, cols], dtype=np.int64)
        packed[base + ".weight_scale"] = bf16(scale)
        packed[base + ".weight_zero_point"] = pack_int32((zero + 8).astype(np.uint32), 4, 0)
        state = {k[len(base) + 1:]: torch.from_numpy(v) if v.dtype != ml_dtypes.bfloat16 else torch.from_numpy(v.view(np.int16)).view(torch.bfloat16)
                 for k, v in packed.items() if k.startswith(base + ".weight_")}
        scheme = QuantizationScheme(targets=["Linear"], weights=args)
        reference[name] = PackedQuantizationCompressor.decompress(state, scheme)["weight"].float().numpy()
    d = root / "int4-ct"
    d.mkdir(parents=True, exist_ok=True)
    save_file(packed, str(d / "model.safetensors"))
    config = json.loads((hf_dir / "config.json").read_text())
    weights_args = {"num_bits": 4, "type": "int", "symmetric": False, "strategy": "group", "group_size": 32, "dynamic": False}
    config["quantization_config"] = {
        "quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed", "ignore": ["lm_head"],
        "config_groups": {"group_0": {"targets": ["Linear"], "format": "pack-quantized", "weights": weights_args}}}
    (d / "config.json").write_text(json.dumps(config))
    save_reference(root / "int4-ref", hf_dir, reference)
    return d, root / "int4-ref"


def build_packed(root: Path, seed: int) -> dict[str, tuple[Path, Path]]:
    """{kind: (packed checkpoint, BF16 reference)}: nvfp4-modelopt,
    nvfp4-ct (one reference for both), int4-ct and gpt-oss-mxfp4."""
    hf_dir = root / "packed-bf16"
    weights = hf_model(hf_dir, seed + 3)
    out = nvfp4_variants(root, hf_dir, weights)
    out["int4-ct"] = int4_variant(root, hf_dir, weights)
    out["gpt-oss-mxfp4"] = gpt_oss_variant(root, seed + 4)
    return out
