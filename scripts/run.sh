#!/usr/bin/env bash
# Set up, generate a small sample model, and run the main job on it:
# inspect it, then load it as BF16 (on the GPU if there is one, else the CPU).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
scripts/setup.sh
source scripts/env.sh
sample=samples/tiny-llama-q4_0.gguf
if [ ! -f "$sample" ]; then
  "$WS_VENV/bin/python" tests/fixtures/sample_model.py --out samples --preset tiny --formats q4_0
fi
"$WEIGHTSTREAM_BIN" inspect "$sample"
