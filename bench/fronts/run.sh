#!/usr/bin/env bash
# Every front against the core and against its own native path, on models
# with real vocabularies (docs/PERFORMANCE.md, "Every front against the
# core"): the vLLM plugin (TP=1 and TP=2) against weightstream.load_file
# and vLLM's default loader on BF16; weightstream.transformers against
# load_file and transformers' own GGUF loader; the llama.cpp adapter
# against the C API and llama.cpp's own load of the BF16 GGUF.
#
#   scripts/setup.sh && scripts/setup_vllm.sh     # once
#   bench/fronts/run.sh [OUT_DIR] [REPS]          # default: $WS_CACHE/bench-fronts, 3
#
# Writes the models once (about 6 GB: bench/fronts/models.py), then prints
# each benchmark's table; results as JSON beside the models. About 15
# minutes on a 2-core machine. Run it on a quiet machine: every figure is
# a wall time.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
source scripts/env.sh
OUT=${1:-$WS_CACHE/bench-fronts}
REPS=${2:-3}
PY=${WEIGHTSTREAM_VLLM_VENV:-$ROOT/.venv-vllm}/bin/python
"$PY" bench/fronts/models.py "$OUT"
for preset in 32k-0.3gb 128k-1.8gb; do
  echo "== $preset"
  "$PY" bench/fronts/vllm_load.py "$OUT/$preset" --reps "$REPS" --tp 1,2 --json "$OUT/$preset/vllm.json" 2>/dev/null
  "$PY" bench/fronts/transformers_load.py "$OUT/$preset" --reps "$REPS" --json "$OUT/$preset/transformers.json" 2>/dev/null
  "$PY" bench/fronts/llama_load.py "$OUT/$preset" --reps "$REPS" 2>/dev/null
done
