#!/usr/bin/env bash
# The GPU round, in two halves:
#
#   scripts/gpu_round.sh prepare
#       here (cargo, network): build the CLI, the GPU test binary and the
#       fatbins, download the wheels the GPU machine lacks (gguf,
#       cuda-bench), all into .gpu-carry/, and print the device call.
#
#   scripts/gpu_round.sh device quick
#       the round sized for one short device call (a lent GPU comes with 15
#       minutes of device time, machine start included): parity, python,
#       sanitizer (memcheck), sweep (256 MiB outputs) and e2e (Llama-7B's
#       shapes in 4 layers), in that order, each in its own time slice of a
#       420 s deadline (GPU_ROUND_DEADLINE), so a slow step cannot starve the
#       ones after it. Run it with the device tool's timeout_s=480.
#
#   scripts/gpu_round.sh device [--gds-optional] [parity] [sanitizer] [python] [sweep] [e2e] [storage] [devcheck]
#       on the GPU machine (nvcc 13.0, PyTorch, Python 3.12; no cargo, no
#       network), with .gpu-carry carried: no step named = all of them.
#       parity:    GPU kernel and pipeline tests, bitwise against the CPU
#                  kernels; GPU loads through every source (mmap, read,
#                  direct, gds via cuFile) against a CPU load; and
#                  weightstream load --verify on the fixtures, as BF16 and
#                  as float16 (--dtype f16). The kernel tests run both
#                  outputs too. cuFile is
#                  required unless --gds-optional (or GPU_ROUND_GDS=optional);
#                  either way the summary says whether gds used it, and why not
#       sanitizer: compute-sanitizer memcheck over the GPU tests (found on
#                  PATH, beside nvcc, in /usr/local/cuda*/bin, /opt/nvidia or
#                  pip nvidia wheels; skipped, with the reason, if absent)
#       python:    the Python package on the GPU: load_file/open(device="cuda")
#                  into torch tensors, and weightstream.transformers'
#                  load_model(device="cuda"), bitwise equal to the CPU result
#       sweep:     nvbench kernel sweep beside a device-to-device copy
#                  (GPU_ROUND_SWEEP_ARGS: more sweep.py arguments; the BF16
#                  kernels by default, "--out both" adds the float16 ones)
#       e2e:       Llama-7B-shaped Q4_0/Q4_K_M/IQ4_XS/MXFP4/Q8_0/FP8/BF16 loads against pinned H2D,
#                  safetensors.torch.load_file and gguf-py, plus a staging sweep;
#                  checkpoints (~42 GB) generated in the call, where there is room
#                  (GPU_ROUND_E2E_DIRS; GPU_ROUND_E2E_ARGS, e.g. "--formats q4_0,bf16")
#       storage:   cold (page cache dropped) and warm loads of the 7B Q4_0 and
#                  BF16 files through each source, against dd iflag=direct
#       devcheck:  bench/gpu/devcheck.cu (issue 56 item 4, about a minute):
#                  cvt.rn.bf16x2.f32 and cvt.rn.f16x2.f32 against the kernels'
#                  roundings on all 2^32 inputs; a memory-bound ceiling kernel
#                  per bytes-read mix against D2D; pinning, registration
#                  (read-only, of a mapped 1 GiB file) and pread-into-pinned
#                  costs. Not in the quick round: its own call, after it
#       Each step, and each command in it, runs on its own: a failure is
#       recorded and the rest still runs; every command stops at the call's
#       deadline (GPU_ROUND_DEADLINE, 570 s). At most 8 files land in $OUT (or
#       ./gpu-round-out): summary.txt (every failure and skip; exit 1 if any
#       failed), report.md (tables for docs/PERFORMANCE.md), logs.tar.gz,
#       sweep.csv, e2e.json, storage.json, devcheck.json from the steps that
#       ran, and record.json (bench/gpu/report.py --record: commit it as
#       bench/gpu/records/DATE-COMMIT.json, the name the summary gives).
#
#   scripts/gpu_round.sh check
#       here: run the device half's scripts on a tiny model on the CPU, so
#       the round is known to work up to the parts that need a GPU (runs
#       scripts/setup.sh first, unless WEIGHTSTREAM_BIN names a built CLI).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
CARRY=.gpu-carry
# The quick round's sweep and end-to-end arguments (also run by 'check').
QUICK_SWEEP_ARGS="--sizes 256 --timeout 0.4"
QUICK_E2E_ARGS="--preset 7b-4l --formats q4_0,q8_0,q4_k_m,iq4_xs,fp8,bf16 --sources auto,http,http-cached --reps 2 --baselines h2d,safetensors --skip-sweep"
mode=${1:-}
shift || true

# test_binary PACKAGE TEST DEST [CARGO ARGS]: build an integration test
# binary, copy it to DEST.
test_binary() {
  local bin
  bin=$(cargo test --release --locked -p "$1" --test "$2" "${@:4}" --no-run --message-format=json 2>/dev/null | "$WS_VENV/bin/python" -c '
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
  # Without object storage (HTTP, TLS): the test reads local files only,
  # and the carry (with the tree, 64 MiB at most) has no room to spare.
  test_binary weightstream gpu_sources "$CARRY/bin/gpu-sources-tests" --no-default-features
  cp target/release/weightstream "$CARRY/bin/weightstream"
  "$WS_VENV/bin/python" bench/gpu/devcheck_build.py "$CARRY/bin/devcheck"
  strip --strip-debug "$CARRY/bin/"* 2>/dev/null || true
  # xz-compressed (the CLI: 20 MB to 5 MB), symbols kept for backtraces;
  # the device half unpacks them (unpack_bins).
  xz -T2 -6 "$CARRY/bin/"*
  # The wheel stripped (its library is 65 MB with line tables, 17 MB zipped).
  (cd crates/weightstream-py && "$WS_VENV/bin/python" -m maturin build --release --locked --strip -q -o "$ROOT/$CARRY/wheels")
  local out_dir
  out_dir=$(cargo build --release --locked -p weightstream-kernels --message-format=json 2>/dev/null | "$WS_VENV/bin/python" -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "build-script-executed" and "weightstream-kernels" in m.get("package_id", ""):
        print(m["out_dir"])')
  cp "$out_dir"/*.fatbin "$CARRY/fatbin/"
  # One fatbin per kernels/cuda/*.cu.
  [ "$(ls "$CARRY/fatbin" | wc -l)" -eq "$(ls kernels/cuda/*.cu | wc -l)" ] || { echo "gpu_round: fatbins missing (nvcc?)" >&2; exit 1; }
  "$WS_VENV/bin/python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$CARRY/wheels" gguf==0.19.0 cuda-bench==0.3.0 \
    "$(grep -o 'nvidia-cufile==[0-9.]*' requirements/cuda-toolchain.txt)"
  # The python step's transformers suite and pytest, pinned as in the vLLM
  # venv, installed without dependencies ahead of the image's own (its
  # transformers 5.17 and huggingface_hub 1.33, device KINDS.md, are older
  # than the loader is tested with): everything the suite imports beyond
  # torch, numpy, safetensors and their dependencies, so it does not depend
  # on the image's other versions (checked in an interpreter that sees only
  # those: 21 MB of wheels).
  local hf n pin pins=()
  hf="transformers tokenizers huggingface_hub accelerate httpx2 httpcore2 anyio idna truststore h11 certifi sniffio
      PyYAML regex tqdm psutil packaging pytest pluggy iniconfig Pygments"
  for n in $hf; do
    pin=$(grep -iE "^$n==" requirements/vllm.txt) || { echo "gpu_round: $n is not pinned in requirements/vllm.txt" >&2; exit 1; }
    pins+=("$pin")
  done
  "$WS_VENV/bin/python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$CARRY/wheels" "${pins[@]}"
  # The device tool sends the working tree and the carry, 64 MiB together.
  local carry_b tree_b
  carry_b=$(du -sb "$CARRY" | cut -f1)
  tree_b=$(git ls-files -z | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
  echo "gpu_round: carry $((carry_b >> 20)) MiB + tracked tree $((tree_b >> 20)) MiB (the device tool's limit: 64 MiB)"
  [ $((carry_b + tree_b)) -lt $((64 << 20)) ] || { echo "gpu_round: too large to send: carry less" >&2; exit 1; }
  cat <<TXT
gpu_round: ready. On the GPU machine run, with carry [".gpu-carry"] and timeout_s 480,
the round sized for a 15-minute device budget (one call):
  scripts/gpu_round.sh device quick
or, with more device time, one call each (10 minutes a call):
  scripts/gpu_round.sh device parity sanitizer python
  scripts/gpu_round.sh device sweep
  scripts/gpu_round.sh device e2e
  scripts/gpu_round.sh device storage
  scripts/gpu_round.sh device devcheck
then bring back \$OUT: summary.txt, report.md, logs.tar.gz and the data files
TXT
}

# The device half's bookkeeping: every step runs on its own, each command of
# a step under what is left of the call's deadline; a failure is recorded in
# summary.txt and the next command and step still run. Only these come back
# in $OUT (at most 8 files, the device tool's limit): summary.txt,
# report.md, logs.tar.gz (every log), sweep.csv, e2e.json, storage.json,
# devcheck.json, record.json, and while a step runs its log (step.log, folded into the tarball after it),
# so a call killed at the tool's limit still returns what it had.
note() { echo "$*" | tee -a "$SUMMARY"; }

# part STEP LABEL CMD...: run one command of a step, its output into the
# step's log (and $LOGS/last.out); returns its status, records a failure.
part() {
  local step=$1 label=$2 left rc t0=$SECONDS limit="the call's deadline"
  shift 2
  left=$((DEADLINE - SECONDS - RESERVE))
  # In the quick round each step also ends at its own slice's end.
  if [ -n "${STEP_END:-}" ] && [ $((STEP_END - SECONDS)) -lt "$left" ]; then
    left=$((STEP_END - SECONDS))
    limit="the step's time slice"
  fi
  if [ "$left" -le 0 ]; then
    note "FAIL $step: $label: not started, the step's time (or the call's deadline, GPU_ROUND_DEADLINE=$DEADLINE s) was up"
    STEP_FAILED=1
    return 124
  fi
  echo "-- $label" >> "$CUR_LOG"
  timeout -k 10 "$left" "$@" > "$LOGS/last.out" 2>&1
  rc=$?
  cat "$LOGS/last.out" >> "$CUR_LOG"
  if [ "$rc" -eq 0 ]; then
    echo "   ok: $label ($((SECONDS - t0)) s)"
  else
    case "$rc" in
      124 | 137) note "FAIL $step: $label: timed out after $left s ($limit)" ;;
      *) note "FAIL $step: $label (exit $rc, $((SECONDS - t0)) s; last lines in logs.tar.gz:$step.log)" ;;
    esac
    tail -15 "$LOGS/last.out" | sed 's/^/   | /'
    STEP_FAILED=1
  fi
  return "$rc"
}

# find_sanitizer: compute-sanitizer on PATH, beside nvcc, in /usr/local/cuda*
# or /opt/nvidia, or in a pip nvidia wheel; prints its path or nothing.
find_sanitizer() {
  local c d sp nvcc
  c=$(command -v compute-sanitizer 2>/dev/null) && { echo "$c"; return; }
  nvcc=$(command -v nvcc 2>/dev/null) && d=$(dirname "$nvcc") || d=/nonexistent
  for c in "$d/compute-sanitizer" "$d/../compute-sanitizer/compute-sanitizer" \
           /usr/local/cuda*/bin/compute-sanitizer /usr/local/cuda*/compute-sanitizer/compute-sanitizer \
           /opt/nvidia/*/bin/compute-sanitizer /opt/nvidia/*/compute-sanitizer/compute-sanitizer; do
    [ -x "$c" ] && [ -f "$c" ] && { echo "$c"; return; }
  done
  for sp in /tmp/ws-site $(python3 -c 'import site; print(*site.getsitepackages(), site.getusersitepackages())' 2>/dev/null); do
    [ -d "$sp/nvidia" ] || continue
    c=$(find "$sp/nvidia" -maxdepth 4 -name compute-sanitizer -type f -perm -u+x 2>/dev/null | head -1)
    [ -n "$c" ] && { echo "$c"; return; }
  done
}

# finish: the report over what this call measured, every log into
# logs.tar.gz, the summary last; runs on any exit (an error, a signal).
finish() {
  trap - EXIT INT TERM
  local f args=()
  [ -f "$out/sweep.csv" ] && args+=(--sweep "$out/sweep.csv")
  [ -f "$out/e2e.json" ] && args+=(--e2e "$out/e2e.json")
  [ -f "$out/storage.json" ] && args+=(--storage "$out/storage.json")
  [ -f "$out/devcheck.json" ] && args+=(--devcheck "$out/devcheck.json")
  # The round's record (issue 56 item 4), from what the sweep and e2e measured.
  if [ -f "$out/sweep.csv" ] || [ -f "$out/e2e.json" ]; then
    args+=(--record "$out/record.json" --commit "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" --date "$(date -u +%F)")
    command -v nvidia-smi >/dev/null && args+=(--driver "$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)")
  fi
  if [ ${#args[@]} -gt 0 ]; then
    python3 bench/gpu/report.py "${args[@]}" --out "$out/report.md" > "$LOGS/report.log" 2>&1 \
      || note "FAIL report: bench/gpu/report.py (exit $?; logs.tar.gz:report.log)"
  fi
  [ -f "$CUR_LOG" ] && mv "$CUR_LOG" "$LOGS/"
  rm -f "$LOGS/last.out" "$out"/*.tmp
  tar -czf "$out/logs.tar.gz" -C "$LOGS" . || note "FAIL: could not bundle the logs ($LOGS)"
  for f in "$out"/*; do
    case "${f##*/}" in summary.txt | report.md | logs.tar.gz | sweep.csv | e2e.json | storage.json | devcheck.json | record.json) ;; *) note "note: $f left in \$OUT" ;; esac
  done
  echo "== summary ($out/summary.txt; logs in logs.tar.gz)"
  if grep -q '^FAIL' "$SUMMARY"; then
    echo "result: $(grep -c '^FAIL' "$SUMMARY") failure(s)" | tee -a "$SUMMARY" >/dev/null
    cat "$SUMMARY"
    exit 1
  fi
  echo "result: every step ran clean" >> "$SUMMARY"
  cat "$SUMMARY"
  exit 0
}

# Issue 56 item 5: where cuFile was not used for want of nvidia-fs, try
# its compatibility mode forced on (force_compat_mode: every read a POSIX
# read into cuFile's bounce buffers, which may skip the file-system check
# that refused the root volume), with the test files on disk and then on
# /dev/shm; the summary says which, if either, read with cuFile.
gds_compat_retry() {
  if [ ! -e /proc/driver/nvidia-fs ] && ! grep -q '^Gds .*read with cuFile' <<< "$1"; then
    local json=/tmp/ws-cufile-compat.json tmpdir line
    printf '{"logging": {"dir": "%s", "level": "INFO"}, "properties": {"allow_compat_mode": true, "force_compat_mode": true}}\n' "$LOGS" > "$json"
    for tmpdir in /var/tmp /dev/shm; do
      part parity "gds with force_compat_mode, files in $tmpdir" env CUFILE_ENV_PATH_JSON="$json" WEIGHTSTREAM_TEST_DIR="$tmpdir" \
        "$CARRY/bin/gpu-sources-tests" --include-ignored --nocapture
      if line=$(grep -m1 '^Gds .*read with cuFile' "$LOGS/last.out"); then
        note "gds (force_compat_mode, files in $tmpdir): read with cuFile: ${line:0:400}"
      else
        note "gds (force_compat_mode, files in $tmpdir): cuFile not used: $(grep -m1 '^Gds ' "$LOGS/last.out" | cut -c1-500)"
      fi
    done
  fi
}

step_parity() {
  part parity "GPU kernel and pipeline tests (gpu-tests)" "$CARRY/bin/gpu-tests" --include-ignored --test-threads 1
  local gds=(env WEIGHTSTREAM_REQUIRE_GDS=1) what="cuFile required" line
  # Without the nvidia-fs kernel module cuFile has no direct path here (the
  # lent H200 of 2026-11-27: no nvidia-fs, no PCI P2PDMA, and its compat
  # mode refused the root file system, whose volume udev does not
  # describe): that is the machine, not weightstream, so cuFile is then
  # optional and the summary says why.
  if [ "$GDS_REQUIRED" = 1 ] && [ ! -e /proc/driver/nvidia-fs ]; then
    note "SKIP parity: cuFile required, but this machine has no nvidia-fs kernel module: gds falls back (cuFile's own log: logs.tar.gz:cufile.log)"
    GDS_REQUIRED=0
  fi
  [ "$GDS_REQUIRED" = 1 ] || { gds=(env); what="cuFile optional"; }
  # cuFile's own log (why a handle or buffer registration failed) goes
  # into the bundle.
  part parity "GPU loads through every source ($what)" "${gds[@]}" CUFILE_LOGFILE_PATH="$LOGS/cufile.log" CUFILE_LOGGING_LEVEL=INFO \
    "$CARRY/bin/gpu-sources-tests" --include-ignored --nocapture
  # Whether gds really read with cuFile, and if not why (the test prints
  # each source's notes, and the notes again when cuFile was required).
  if line=$(grep -m1 'cuFile was required' "$LOGS/last.out"); then
    note "gds: cuFile not used, required ($what): ${line:0:600}"
  elif line=$(grep -m1 '^Gds .*read with cuFile' "$LOGS/last.out"); then
    note "gds: read with cuFile: ${line:0:400}"
  elif line=$(grep -m1 '^Gds ' "$LOGS/last.out"); then
    note "gds: cuFile not used ($what): ${line:0:600}"
  else
    note "gds: no gds result in the log (the test did not get that far)"
  fi
  local gds_out fx=/tmp/ws-fixtures f
  gds_out=$(cat "$LOGS/last.out")
  rm -rf "$fx"
  part parity "fixtures: generate.py" python3 tests/fixtures/generate.py "$fx" &&
    part parity "fixtures: edge_cases.py" python3 -c "import sys; sys.path.insert(0, 'tests/fixtures'); import edge_cases; from pathlib import Path; edge_cases.generate(Path('$fx'), 1)" &&
    part parity "fixtures: packed.py" python3 tests/fixtures/packed.py "$fx/packed" ||
    { note "FAIL parity: fixture loads not run: the fixtures were not generated"; return; }
  for f in all_types.gguf v2.gguf plain.safetensors sharded unindexed fp8_deepseek fp8_compressed_tensors fp8_single edges.gguf fp8_edges \
           packed/nvfp4_modelopt packed/nvfp4_ct packed/mxfp4_ct packed/mxfp4_gptoss packed/int_ct; do
    # Both outputs: the kernels' BF16 and float16 instantiations (issue 57).
    for dtype in bf16 f16; do
      part parity "load --verify --dtype $dtype $f" "$CARRY/bin/weightstream" load "$fx/$f" --device cuda --dtype "$dtype" --verify --skip-unsupported
    done
  done
  # Last: it only asks how cuFile could read here, and may not fit the slice.
  gds_compat_retry "$gds_out"
}

step_sanitizer() {
  local cs
  cs=$(find_sanitizer)
  if [ -z "$cs" ]; then
    note "SKIP sanitizer: compute-sanitizer not found (PATH, beside nvcc, /usr/local/cuda*/bin, /opt/nvidia, pip nvidia wheels)"
    return
  fi
  echo "compute-sanitizer: $cs" >> "$CUR_LOG"
  # The host-sized case list (WEIGHTSTREAM_PARITY_SIZE=host): memcheck
  # slows every launch; the parity step runs the device-sized one.
  part sanitizer "compute-sanitizer memcheck ($cs)" env WEIGHTSTREAM_PARITY_SIZE=host "$cs" --tool memcheck --leak-check full \
    --error-exitcode 1 "$CARRY/bin/gpu-tests" --include-ignored --test-threads 1 every_case_matches_cpu_bitwise pipeline_matches
  local tool
  if [ "$QUICK" = 1 ]; then
    note "SKIP sanitizer: racecheck and synccheck (the quick round runs memcheck only; 'device sanitizer' runs all three)"
    return
  fi
  for tool in racecheck synccheck; do
    part sanitizer "compute-sanitizer $tool" env WEIGHTSTREAM_PARITY_SIZE=host "$cs" --tool "$tool" --error-exitcode 1 \
      "$CARRY/bin/gpu-tests" --include-ignored --test-threads 1 every_case_matches_cpu_bitwise pipeline_matches
  done
}

step_python() {
  part python "the Python package with torch (crates/weightstream-py/tests/torch_api)" env WEIGHTSTREAM_BIN="$CARRY/bin/weightstream" \
    python3 -m pytest crates/weightstream-py/tests/torch_api -q -rs -p no:cacheprovider
  part python "weightstream.transformers on CUDA (crates/weightstream-py/tests/transformers/test_cuda.py)" \
    python3 -m pytest crates/weightstream-py/tests/transformers/test_cuda.py -q -rs -p no:cacheprovider
}

step_sweep() {
  local extra=()
  rm -f "$out/sweep.csv"
  read -r -a extra <<< "${GPU_ROUND_SWEEP_ARGS:-$([ "$QUICK" = 1 ] && echo "$QUICK_SWEEP_ARGS")}"
  part sweep "bench/gpu/sweep.py" python3 bench/gpu/sweep.py --fatbins "$CARRY/fatbin" --ws "$CARRY/bin/weightstream" \
    --csv "$out/sweep.csv" "${extra[@]}"
}

step_e2e() {
  local extra=()
  rm -f "$out/e2e.json"
  read -r -a extra <<< "${GPU_ROUND_E2E_ARGS:-$([ "$QUICK" = 1 ] && echo "$QUICK_E2E_ARGS")}"
  # --budget: no new measurement after what the deadline (or the step's
  # slice) leaves, less a minute in the full round, 15 s in the quick one.
  local end=$((DEADLINE - RESERVE)) margin=60
  [ -n "${STEP_END:-}" ] && [ "$STEP_END" -lt "$end" ] && end=$STEP_END
  [ "$QUICK" = 1 ] && margin=15
  part e2e "bench/gpu/e2e.py" python3 bench/gpu/e2e.py --ws "$CARRY/bin/weightstream" "${E2E_DIRS[@]}" --out "$out/e2e.json" \
    --budget $((end - SECONDS - margin)) "${extra[@]}"
}

step_storage() {
  local d
  rm -f "$out/storage.json"
  # Its own checkpoints (a call starts on a bare machine), never on tmpfs:
  # O_DIRECT and dropping the page cache need a disk.
  part storage "generate 7B Q4_0 and BF16" python3 bench/gpu/e2e.py --ws "$CARRY/bin/weightstream" "${E2E_DIRS[@]}" \
    --generate-only --no-tmpfs --formats q4_0,bf16 || return
  d=$(tail -1 "$LOGS/last.out")
  part storage "bench/io/storage.py" python3 bench/io/storage.py --ws "$CARRY/bin/weightstream" --device cuda --sources auto,read,mmap,direct,gds \
    --model "$d/7b-llama-bf16" --model "$d/7b-llama-q4_0.gguf" --reps "${GPU_ROUND_STORAGE_REPS:-3}" --out "$out/storage.json"
}

step_devcheck() {
  local f=/tmp/ws-devcheck.bin
  rm -f "$out/devcheck.json"
  # The mapped file of the registration check: 1 GiB on disk, warm.
  part devcheck "a 1 GiB file to map" sh -c "[ -s $f ] || head -c 1073741824 /dev/zero > $f"
  part devcheck "bench/gpu/devcheck.cu" sh -c "'$CARRY/bin/devcheck' --file $f > '$out/devcheck.json.tmp' && mv '$out/devcheck.json.tmp' '$out/devcheck.json'"
  # Nsight Compute on four kernels of different families, where the machine
  # has it (its tables go to devcheck.log in logs.tar.gz): SM and DRAM
  # throughput, to check the SASS model's reading of what binds them.
  local ncu k fn
  ncu=$(command -v ncu 2>/dev/null || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  if [ -n "$ncu" ]; then
    for k in q4_0:ws_q4_0 q4_k:ws_q4_k iq2_xxs:ws_iq2_xxs fp8_e4m3_block:ws_fp8_e4m3; do
      fn=${k#*:}
      part devcheck "ncu: ${k%%:*}" "$ncu" --target-processes all --section SpeedOfLight -k "regex:^${fn}\$" --launch-count 1 \
        python3 bench/gpu/sweep.py --fatbins "$CARRY/fatbin" --ws "$CARRY/bin/weightstream" --kernels "${k%%:*}" \
        --sizes 256 --timeout 0.05 --csv /tmp/ws-ncu-sweep.csv
    done
  else
    note "SKIP devcheck: ncu: not on PATH, in /usr/local/cuda*/bin or /opt/nvidia/nsight-compute"
  fi
}

device() {
  set +e
  out=${OUT:-$ROOT/gpu-round-out}
  GDS_REQUIRED=1
  case "${GPU_ROUND_GDS:-required}" in required) ;; optional) GDS_REQUIRED=0 ;; *) echo "gpu_round: GPU_ROUND_GDS is required or optional" >&2; exit 2 ;; esac
  QUICK=0
  [ "${1:-}" = quick ] && QUICK=1
  DEADLINE=${GPU_ROUND_DEADLINE:-$([ "$QUICK" = 1 ] && echo 420 || echo 570)}
  RESERVE=20  # seconds kept for the report and the bundle
  E2E_DIRS=()
  local d step steps=() all=(parity sanitizer python sweep e2e storage devcheck)
  for d in ${GPU_ROUND_E2E_DIRS:-/tmp/ws-e2e $HOME/ws-e2e /dev/shm/ws-e2e}; do E2E_DIRS+=(--dir "$d"); done
  # The quick round's steps and the end of each one's slice, in seconds from
  # the start (the sanitizer's memcheck and the python tests are short).
  declare -A SLICE_END=([parity]=150 [python]=185 [sanitizer]=245 [sweep]=300 [e2e]=$((DEADLINE - RESERVE)))
  for step in "$@"; do
    case "$step" in
      quick) [ "$#" = 1 ] || { echo "gpu_round: 'quick' runs alone" >&2; exit 2; }; steps=(parity python sanitizer sweep e2e) ;;
      --gds-optional) GDS_REQUIRED=0 ;;
      parity | sanitizer | python | sweep | e2e | storage | devcheck) steps+=("$step") ;;
      *) echo "gpu_round: unknown step '$step' (steps: ${all[*]}; option: --gds-optional)" >&2; exit 2 ;;
    esac
  done
  [ ${#steps[@]} -gt 0 ] || steps=("${all[@]}")
  unpack_bins "$CARRY/bin"
  [ -x "$CARRY/bin/weightstream" ] || { echo "gpu_round: $CARRY is missing: run 'scripts/gpu_round.sh prepare' here and carry it" >&2; exit 1; }
  mkdir -p "$out"
  rm -f "$out/summary.txt" "$out/report.md" "$out/logs.tar.gz" "$out"/*.log
  SUMMARY=$out/summary.txt
  LOGS=$(mktemp -d /tmp/ws-round-logs.XXXXXX)
  CUR_LOG=$out/setup.log
  trap finish EXIT
  trap 'note "FAIL: interrupted"; exit 1' INT TERM
  {
    echo "date: $(date -u +%FT%TZ)"
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
    echo "steps: ${steps[*]}$([ "$QUICK" = 1 ] && echo " (quick: one time slice each)"); cuFile $([ "$GDS_REQUIRED" = 1 ] && echo required || echo optional); deadline ${DEADLINE} s"
    if command -v nvidia-smi >/dev/null; then nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader 2>&1 | tail -1; else echo "nvidia-smi: not on PATH"; fi
    if command -v nvcc >/dev/null; then nvcc --version | tail -1; else echo "nvcc: not on PATH"; fi
    python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)' 2>&1 | tail -1
    df -h /tmp "$HOME" /dev/shm 2>&1
    # What GPUDirect Storage needs: the nvidia-fs kernel module (or the
    # kernel's PCI P2PDMA), a local ext4/xfs file system, a cufile.json.
    echo "kernel: $(uname -r)"
    echo "nvidia-fs: $(if [ -e /proc/driver/nvidia-fs ]; then cat /proc/driver/nvidia-fs/version 2>/dev/null | tr '\n' ' '; else echo 'absent (no /proc/driver/nvidia-fs)'; fi)"
    echo "file system of the test files: $(stat -f -c %T "$HOME" 2>&1) ($(findmnt -n -o FSTYPE,OPTIONS --target "$HOME" 2>&1 | head -1))"
    echo "cufile.json: $(ls /etc/cufile.json /usr/local/cuda/gds/cufile.json 2>/dev/null | tr '\n' ' ')${CUFILE_ENV_PATH_JSON:+ CUFILE_ENV_PATH_JSON=$CUFILE_ENV_PATH_JSON}"
  } > "$LOGS/machine.txt"
  head -6 "$LOGS/machine.txt" | tee -a "$SUMMARY"
  STEP_FAILED=0
  part setup "install the carried wheels" python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/ws-site "$CARRY"/wheels/*.whl
  export PYTHONPATH=/tmp/ws-site${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
  # cuFile: the carried libcufile.so.0 linked as the libcufile.so cudarc loads.
  mkdir -p /tmp/ws-cufile
  ln -sf /tmp/ws-site/nvidia/cu13/lib/libcufile.so.0 /tmp/ws-cufile/libcufile.so
  export LD_LIBRARY_PATH=/tmp/ws-cufile${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  mv "$CUR_LOG" "$LOGS/"
  for step in "${steps[@]}"; do
    echo "== $step"
    local t0=$SECONDS
    STEP_FAILED=0
    STEP_END=
    [ "$QUICK" = 1 ] && STEP_END=${SLICE_END[$step]}
    CUR_LOG=$out/$step.log
    "step_$step"
    mv "$CUR_LOG" "$LOGS/" 2>/dev/null
    if [ "$STEP_FAILED" = 0 ] && ! grep -q "^SKIP $step" "$SUMMARY"; then
      note "ok   $step ($((SECONDS - t0)) s)"
    else
      echo "== $step: see summary ($((SECONDS - t0)) s)"
    fi
    # Bundle as we go: a call killed at the tool's limit keeps the logs so far.
    tar -czf "$out/logs.tar.gz" -C "$LOGS" . 2>/dev/null
  done
}

# unpack_bins DIR: each DIR/NAME.xz (prepare compresses the carried
# binaries) unpacked to an executable DIR/NAME, with python3's lzma (the
# GPU machine's image need not have xz).
unpack_bins() {
  local f
  for f in "$1"/*.xz; do
    [ -e "$f" ] || continue
    python3 -c 'import lzma, shutil, sys
with lzma.open(sys.argv[1]) as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)' "$f" "${f%.xz}"
    chmod +x "${f%.xz}"
  done
}

check() {
  if [ -n "${WEIGHTSTREAM_BIN:-}" ] && [ -x "$WEIGHTSTREAM_BIN" ]; then
    source scripts/env.sh
    [ -x "$WS_VENV/bin/python" ] || { echo "gpu_round: no venv at $WS_VENV (set WEIGHTSTREAM_VENV)" >&2; exit 1; }
    echo "gpu_round: checking with $WEIGHTSTREAM_BIN and $WS_VENV (no setup)"
  else
    scripts/setup.sh
    source scripts/env.sh
  fi
  local tmp
  tmp=$(mktemp -d)
  "$WS_VENV/bin/python" -m py_compile bench/gpu/sweep.py bench/gpu/devcheck_build.py bench/gpu/launch_args.py bench/gpu/e2e.py bench/gpu/report.py bench/io/storage.py
  "$WS_VENV/bin/python" bench/gpu/e2e.py --ws "$WEIGHTSTREAM_BIN" --dir "$tmp/models" --out "$tmp/e2e.json" --dry-run --reps 2
  # e2e.py records a failed phase and goes on (a device round keeps what it
  # measured); on the tiny model every phase must pass.
  "$WS_VENV/bin/python" -c 'import json, sys; e = json.load(open(sys.argv[1])).get("errors")
sys.exit(f"gpu_round: e2e phases failed on the tiny model: {e}" if e else 0)' "$tmp/e2e.json"
  # The quick round's arguments parse and run (on the tiny model: --dry-run).
  local quick_e2e
  read -r -a quick_e2e <<< "$QUICK_E2E_ARGS"
  "$WS_VENV/bin/python" bench/gpu/e2e.py --ws "$WEIGHTSTREAM_BIN" --dir "$tmp/models" --out "$tmp/e2e-quick.json" --dry-run "${quick_e2e[@]}" >/dev/null 2>&1 \
    || { echo "gpu_round: the quick round's e2e arguments fail: $QUICK_E2E_ARGS" >&2; exit 1; }
  # --files-only: the test command runs this; other steps share the page cache.
  "$WS_VENV/bin/python" bench/io/storage.py --ws "$WEIGHTSTREAM_BIN" --device cpu --sources auto,read,mmap,direct,gds \
    --model "$tmp/models/tiny-llama-q4_0.gguf" --reps 2 --files-only --out "$tmp/storage.json" >/dev/null 2>&1
  "$WS_VENV/bin/python" bench/gpu/report.py --e2e "$tmp/e2e.json" --storage "$tmp/storage.json" --out "$tmp/report.md" >/dev/null
  "$WS_VENV/bin/python" -m pytest -q -p no:cacheprovider tests/python/test_gpu_report.py tests/python/test_sweep_args.py
  # The device check compiles (it needs a GPU to run: it stops at once here).
  "$WS_VENV/bin/python" bench/gpu/devcheck_build.py "$tmp/devcheck" >/dev/null
  if "$tmp/devcheck" convert > /dev/null 2> "$tmp/devcheck.err"; then
    echo "gpu_round: devcheck ran without a GPU?" >&2; exit 1
  fi
  grep -q "^devcheck: " "$tmp/devcheck.err" || { echo "gpu_round: devcheck failed unlike a missing GPU: $(cat "$tmp/devcheck.err")" >&2; exit 1; }
  # The carried binaries unpack and run as the device half unpacks them.
  mkdir -p "$tmp/bin" && cp "$WEIGHTSTREAM_BIN" "$tmp/bin/weightstream" && xz -T2 -1 "$tmp/bin/weightstream"
  PATH="$WS_VENV/bin:$PATH" unpack_bins "$tmp/bin"
  "$tmp/bin/weightstream" --version >/dev/null || { echo "gpu_round: an unpacked binary does not run" >&2; exit 1; }
  echo "gpu_round: the device half's scripts ran on a tiny model on the CPU ($tmp)"
}

case "$mode" in
  prepare) prepare ;;
  device) device "$@" ;;
  check) check ;;
  *) sed -n '2,/^set -euo pipefail/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
esac
