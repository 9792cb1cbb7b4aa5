#!/usr/bin/env bash
# The GPU round, in two halves:
#
#   scripts/gpu_round.sh prepare
#       here (cargo, network): build the CLI, the GPU test binary and the
#       fatbins, download the wheels the GPU machine lacks (gguf,
#       cuda-bench), all into .gpu-carry/, and print the device call.
#
#   scripts/gpu_round.sh device [parity] [sanitizer] [python] [sweep] [e2e] [storage] [report]
#       on the GPU machine (nvcc 13.0, PyTorch, Python 3.12; no cargo, no
#       network), with .gpu-carry carried: no step named = all of them.
#       parity:    GPU kernel and pipeline tests, bitwise against the CPU
#                  kernels; GPU loads through every source (mmap, read,
#                  direct, gds via cuFile) against a CPU load; and
#                  weightstream load --verify on the fixtures
#       sanitizer: compute-sanitizer memcheck over the GPU tests
#       python:    the Python package on the GPU: load_file/open(device="cuda")
#                  into torch tensors, bitwise equal to the CPU result
#       sweep:     nvbench kernel sweep beside a device-to-device copy
#       e2e:       Llama-7B-shaped Q4_0/Q4_K_M/IQ4_XS/MXFP4/Q8_0/FP8/BF16 loads against pinned H2D,
#                  safetensors.torch.load_file and gguf-py, plus a staging sweep
#       storage:   cold (page cache dropped) and warm loads of the 7B Q4_0 and
#                  BF16 files through each source, against dd iflag=direct
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

# test_binary PACKAGE TEST DEST: build an integration test binary, copy it to DEST.
test_binary() {
  local bin
  bin=$(cargo test --release --locked -p "$1" --test "$2" --no-run --message-format=json 2>/dev/null | "$WS_VENV/bin/python" -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("target", {}).get("name") == sys.argv[1] and m.get("executable"):
        print(m["executable"])' "$2")
  [ -x "$bin" ] || { echo "gpu_round: the $2 test binary was not built" >&2; exit 1; }
  cp "$bin" "$3"
}

prepare() {
  scripts/setup.sh
  source scripts/env.sh
  rm -rf "$CARRY"
  mkdir -p "$CARRY/bin" "$CARRY/fatbin" "$CARRY/wheels"
  echo "gpu_round: building the GPU test binaries"
  test_binary weightstream-cuda gpu "$CARRY/bin/gpu-tests"
  test_binary weightstream gpu_sources "$CARRY/bin/gpu-sources-tests"
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
  # One fatbin per crates/weightstream-kernels/cuda/*.cu.
  [ "$(ls "$CARRY/fatbin" | wc -l)" -eq "$(ls crates/weightstream-kernels/cuda/*.cu | wc -l)" ] || { echo "gpu_round: fatbins missing (nvcc?)" >&2; exit 1; }
  "$WS_VENV/bin/python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$CARRY/wheels" gguf==0.19.0 cuda-bench==0.3.0 \
    "$(grep -o 'nvidia-cufile==[0-9.]*' requirements/cuda-toolchain.txt)"
  du -sh "$CARRY"
  cat <<TXT
gpu_round: ready. On the GPU machine run, with carry [".gpu-carry"]:
  scripts/gpu_round.sh device            (or name steps: parity sanitizer python sweep e2e storage report)
TXT
}

device() {
  local out=${OUT:-$ROOT/gpu-round-out}
  mkdir -p "$out"
  [ -x "$CARRY/bin/weightstream" ] || { echo "gpu_round: $CARRY is missing: run 'scripts/gpu_round.sh prepare' here and carry it" >&2; exit 1; }
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/ws-site "$CARRY"/wheels/*.whl
  export PYTHONPATH=/tmp/ws-site${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
  # cuFile: the carried libcufile.so.0 linked as the libcufile.so cudarc loads.
  mkdir -p /tmp/ws-cufile
  ln -sf /tmp/ws-site/nvidia/cu13/lib/libcufile.so.0 /tmp/ws-cufile/libcufile.so
  export LD_LIBRARY_PATH=/tmp/ws-cufile${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  local steps=("$@")
  [ ${#steps[@]} -gt 0 ] || steps=(parity sanitizer python sweep e2e storage report)
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
        WEIGHTSTREAM_REQUIRE_GDS=1 "$CARRY/bin/gpu-sources-tests" --include-ignored --nocapture 2>&1 | tee -a "$out/parity.log"
        local fx=/tmp/ws-fixtures
        python3 tests/fixtures/generate.py "$fx" >/dev/null
        python3 -c "import sys; sys.path.insert(0, 'tests/fixtures'); import edge_cases; from pathlib import Path; edge_cases.generate(Path('$fx'), 1)"
        python3 tests/fixtures/packed.py "$fx/packed"
        for f in all_types.gguf v2.gguf plain.safetensors sharded unindexed fp8_deepseek fp8_compressed_tensors fp8_single edges.gguf fp8_edges \
                 packed/nvfp4_modelopt packed/nvfp4_ct packed/mxfp4_ct packed/mxfp4_gptoss packed/int_ct; do
          "$CARRY/bin/weightstream" load "$fx/$f" --device cuda --verify --skip-unsupported | tail -1 | sed "s|^|$f: |"
        done 2>&1 | tee -a "$out/parity.log"
        ;;
      sanitizer)
        compute-sanitizer --tool memcheck --leak-check full --error-exitcode 1 \
          "$CARRY/bin/gpu-tests" --include-ignored --test-threads 1 kernels_match_cpu_bitwise e2m1_matches_cpu int_matches_cpu pipeline_matches 2>&1 | tail -40 | tee "$out/sanitizer.log"
        ;;
      python)
        WEIGHTSTREAM_BIN="$CARRY/bin/weightstream" python3 -m pytest tests/vllm/test_torch_api.py -q -rs -p no:cacheprovider 2>&1 | tee "$out/python.log"
        ;;
      sweep)
        python3 bench/gpu/sweep.py --fatbins "$CARRY/fatbin" --ws "$CARRY/bin/weightstream" --csv "$out/sweep.csv" 2>&1 | tail -90
        ;;
      e2e)
        python3 bench/gpu/e2e.py --ws "$CARRY/bin/weightstream" --dir /tmp/ws-e2e --out "$out/e2e.json"
        ;;
      storage)
        python3 bench/gpu/e2e.py --ws "$CARRY/bin/weightstream" --dir /tmp/ws-e2e --generate-only
        python3 bench/io/storage.py --ws "$CARRY/bin/weightstream" --device cuda --sources auto,read,mmap,direct,gds \
          --model /tmp/ws-e2e/7b-llama-bf16 --model /tmp/ws-e2e/7b-llama-q4_0.gguf --reps 3 --out "$out/storage.json" 2>&1 | tee "$out/storage.md"
        ;;
      report)
        python3 bench/gpu/report.py --sweep "$out/sweep.csv" --e2e "$out/e2e.json" --storage "$out/storage.json" --out "$out/report.md"
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
  "$WS_VENV/bin/python" -m py_compile bench/gpu/sweep.py bench/gpu/e2e.py bench/gpu/report.py bench/io/storage.py
  "$WS_VENV/bin/python" bench/gpu/e2e.py --ws "$WEIGHTSTREAM_BIN" --dir "$tmp/models" --out "$tmp/e2e.json" --dry-run --reps 2
  "$WS_VENV/bin/python" bench/io/storage.py --ws "$WEIGHTSTREAM_BIN" --device cpu --sources auto,read,mmap,direct,gds \
    --model "$tmp/models/tiny-llama-q4_0.gguf" --reps 2 --out "$tmp/storage.json" >/dev/null 2>&1
  "$WS_VENV/bin/python" bench/gpu/report.py --e2e "$tmp/e2e.json" --storage "$tmp/storage.json" --out "$tmp/report.md" >/dev/null
  echo "gpu_round: the device half's scripts ran on a tiny model on the CPU ($tmp)"
}

case "$mode" in
  prepare) prepare ;;
  device) device "$@" ;;
  check) check ;;
  *) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
