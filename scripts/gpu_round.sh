#!/usr/bin/env bash
# The GPU round, in two halves:
#
#   scripts/gpu_round.sh prepare
#       here (cargo, network): build the CLI, the GPU test binary and the
#       fatbins, download the wheels the GPU machine lacks (gguf,
#       cuda-bench), all into .gpu-carry/, and print the device call.
#
#   scripts/gpu_round.sh device [parity] [sanitizer] [python] [sweep] [e2e] [report]
#       on the GPU machine (nvcc 13.0, PyTorch, Python 3.12; no cargo, no
#       network), with .gpu-carry carried: no step named = all of them.
#       parity:    GPU kernel and pipeline tests, bitwise against the CPU
#                  kernels, and weightstream load --verify on the fixtures
#       sanitizer: compute-sanitizer memcheck over the GPU tests
#       python:    the Python package on the GPU: load_file/open(device="cuda")
#                  into torch tensors, bitwise equal to the CPU result
#       sweep:     nvbench kernel sweep beside a device-to-device copy
#       e2e:       Llama-7B-shaped Q4_0/Q8_0/FP8/BF16 loads against pinned H2D,
#                  safetensors.torch.load_file and gguf-py, plus a staging sweep
#       report:    tables for docs/PERFORMANCE.md, a short summary last
#       Everything lands in $OUT (or ./gpu-round-out).
#
#   scripts/gpu_round.sh check
#       here: run the device half's scripts on a tiny model on the CPU, so
#       the round is known to work up to the parts that need a GPU.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
CARRY=.gpu-carry
mode=${1:-}
shift || true

prepare() {
  scripts/setup.sh
  source scripts/env.sh
  rm -rf "$CARRY"
  mkdir -p "$CARRY/bin" "$CARRY/fatbin" "$CARRY/wheels"
  echo "gpu_round: building the GPU test binary"
  local json
  json=$(cargo test --release --locked -p weightstream-cuda --test gpu --no-run --message-format=json 2>/dev/null)
  local test_bin
  test_bin=$(echo "$json" | "$WS_VENV/bin/python" -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("target", {}).get("name") == "gpu" and m.get("executable"):
        print(m["executable"])')
  [ -x "$test_bin" ] || { echo "gpu_round: the GPU test binary was not built" >&2; exit 1; }
  cp "$test_bin" "$CARRY/bin/gpu-tests"
  cp target/release/weightstream "$CARRY/bin/weightstream"
  cp target/python-wheel/weightstream-*.whl "$CARRY/wheels/"
  strip --strip-debug "$CARRY/bin/"* 2>/dev/null || true
  local out_dir
  out_dir=$(cargo build --release --locked -p weightstream-kernels --message-format=json 2>/dev/null | "$WS_VENV/bin/python" -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "build-script-executed" and "weightstream-kernels" in m.get("package_id", ""):
        print(m["out_dir"])')
  cp "$out_dir"/*.fatbin "$CARRY/fatbin/"
  [ "$(ls "$CARRY/fatbin" | wc -l)" -ge 4 ] || { echo "gpu_round: fatbins missing (nvcc?)" >&2; exit 1; }
  "$WS_VENV/bin/python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$CARRY/wheels" gguf==0.19.0 cuda-bench==0.3.0
  du -sh "$CARRY"
  cat <<TXT
gpu_round: ready. On the GPU machine run, with carry [".gpu-carry"]:
  scripts/gpu_round.sh device            (or name steps: parity sanitizer sweep e2e report)
TXT
}

device() {
  local out=${OUT:-$ROOT/gpu-round-out}
  mkdir -p "$out"
  [ -x "$CARRY/bin/weightstream" ] || { echo "gpu_round: $CARRY is missing: run 'scripts/gpu_round.sh prepare' here and carry it" >&2; exit 1; }
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/ws-site "$CARRY"/wheels/*.whl
  export PYTHONPATH=/tmp/ws-site${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
  local steps=("$@")
  [ ${#steps[@]} -gt 0 ] || steps=(parity sanitizer python sweep e2e report)
  {
    echo "date: $(date -u +%FT%TZ)"
    nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader || true
    nvcc --version | tail -2 || true
    python3 -c 'import torch; print("torch", torch.__version__)' || true
  } | tee "$out/machine.txt"
  for step in "${steps[@]}"; do
    echo "== $step"
    local t0=$SECONDS
    case "$step" in
      parity)
        "$CARRY/bin/gpu-tests" --include-ignored --test-threads 1 2>&1 | tee "$out/parity.log"
        local fx=/tmp/ws-fixtures
        python3 tests/fixtures/generate.py "$fx" >/dev/null
        python3 -c "import sys; sys.path.insert(0, 'tests/fixtures'); import edge_cases; from pathlib import Path; edge_cases.generate(Path('$fx'), 1)"
        for f in all_types.gguf v2.gguf plain.safetensors sharded unindexed fp8_deepseek fp8_compressed_tensors fp8_single edges.gguf fp8_edges; do
          "$CARRY/bin/weightstream" load "$fx/$f" --device cuda --verify --skip-unsupported | tail -1 | sed "s|^|$f: |"
        done 2>&1 | tee -a "$out/parity.log"
        ;;
      sanitizer)
        compute-sanitizer --tool memcheck --leak-check full --error-exitcode 1 \
          "$CARRY/bin/gpu-tests" --include-ignored --test-threads 1 kernels_match_cpu_bitwise pipeline_matches 2>&1 | tail -40 | tee "$out/sanitizer.log"
        ;;
      python)
        WEIGHTSTREAM_BIN="$CARRY/bin/weightstream" python3 -m pytest tests/vllm/test_torch_api.py -q -rs -p no:cacheprovider 2>&1 | tee "$out/python.log"
        ;;
      sweep)
        python3 bench/gpu/sweep.py --fatbins "$CARRY/fatbin" --csv "$out/sweep.csv" 2>&1 | tail -70
        ;;
      e2e)
        python3 bench/gpu/e2e.py --ws "$CARRY/bin/weightstream" --dir /tmp/ws-e2e --out "$out/e2e.json"
        ;;
      report)
        python3 bench/gpu/report.py --sweep "$out/sweep.csv" --e2e "$out/e2e.json" --out "$out/report.md"
        ;;
      *) echo "gpu_round: unknown step '$step'" >&2; exit 2 ;;
    esac
    echo "== $step took $((SECONDS - t0)) s"
  done
}

check() {
  scripts/setup.sh
  source scripts/env.sh
  local tmp
  tmp=$(mktemp -d)
  "$WS_VENV/bin/python" -m py_compile bench/gpu/sweep.py bench/gpu/e2e.py bench/gpu/report.py
  "$WS_VENV/bin/python" bench/gpu/e2e.py --ws "$WEIGHTSTREAM_BIN" --dir "$tmp/models" --out "$tmp/e2e.json" --dry-run --reps 2
  "$WS_VENV/bin/python" bench/gpu/report.py --e2e "$tmp/e2e.json" --out "$tmp/report.md" >/dev/null
  echo "gpu_round: the device half's scripts ran on a tiny model on the CPU ($tmp)"
}

case "$mode" in
  prepare) prepare ;;
  device) device "$@" ;;
  check) check ;;
  *) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
