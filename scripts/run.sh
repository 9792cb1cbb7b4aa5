#!/usr/bin/env bash
# The main job on a sample model: set up, generate a small Llama-shaped Q4_0
# GGUF (once, into samples/), show what is in it, then load it as BF16 on the
# GPU if there is one (else the CPU) and check every bit against the CPU
# reference kernels. Extra arguments go to `weightstream load`.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
scripts/setup.sh >/dev/null
source scripts/env.sh
sample=samples/tiny-llama-q4_0.gguf
if [ ! -f "$sample" ]; then
  "$WS_VENV/bin/python" tests/fixtures/sample_model.py --out samples --preset tiny --formats q4_0
fi
echo "== weightstream inspect $sample"
"$WEIGHTSTREAM_BIN" inspect "$sample" | head -22
echo "   ..."
echo
echo "== weightstream load $sample --device auto --verify"
"$WEIGHTSTREAM_BIN" load "$sample" --device auto --verify "$@"
