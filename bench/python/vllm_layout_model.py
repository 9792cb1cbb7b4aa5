#!/usr/bin/env python3
"""The model of docs/PERFORMANCE.md's "Bytes read per rank by parallel
layout" (issue 28): a random Llama with Llama-2-like proportions, small
(hidden 1024, FFN 2816 = 11 super-blocks, 8 layers, vocab 8192), quantized
to Q4_K_M by the real llama-quantize. Run in .venv-vllm:

    python bench/python/vllm_layout_model.py OUT_DIR     # writes OUT_DIR/q4_k_m/{model.gguf,config.json}
"""
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests/fixtures"))
sys.path.insert(0, str(ROOT / "tests/fixtures"))

import gguf  # noqa: E402

import hf_models as models  # noqa: E402
import real_quants  # noqa: E402

CONFIG = {**models.CONFIG, "hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 8, "num_attention_heads": 16,
          "num_key_value_heads": 8, "vocab_size": 8192}


def main():
    root = Path(sys.argv[1])
    hf = root / "hf"
    weights = models.hf_model(hf, 0, config=CONFIG)
    models.gguf_variant(root / "f32", root / "f32-ref", hf, weights, gguf.GGMLQuantizationType.F32, CONFIG)
    out = root / "q4_k_m"
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(hf / "config.json", out / "config.json")
    real_quants.quantize(root / "f32" / "model.gguf", out / "model.gguf", "Q4_K_M")
    print(out)


if __name__ == "__main__":
    main()
