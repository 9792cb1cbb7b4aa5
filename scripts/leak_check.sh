#!/usr/bin/env bash
# Leak check: the CPU-path Rust test binaries and the CLI under valgrind
# memcheck; any definite or indirect leak, or memory error, fails the run.
# (Still-reachable memory, such as the thread pool a process keeps until it
# exits, is not a leak.)
#
#   scripts/leak_check.sh
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
source scripts/env.sh
command -v valgrind >/dev/null || { echo "leak_check: valgrind is not installed" >&2; exit 1; }
VG_OPTS="-q --leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect --error-exitcode=99"
# shellcheck disable=SC2206
VG=(valgrind $VG_OPTS)

echo "leak_check: building test binaries"
bins=$(cargo test --release --locked --no-run --message-format=json \
    -p weightstream-format -p weightstream-dequant -p weightstream -p weightstream-kernels -p weightstream-fuzz-targets 2>/dev/null |
  "$WS_VENV/bin/python" -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m.get("profile", {}).get("test"):
        # Too slow under valgrind, and nothing of theirs to find there:
        # hostile_limits installs its own allocator and parses 100 MB
        # headers; legacy_exhaustive and f16_rounding are arithmetic over
        # every f32 bit pattern (30 s and 14 s natively; legacy_exhaustive
        # ran past 8 minutes under valgrind on 2026-11-29); table_exhaustive,
        # iq_grid_exhaustive, kquant_exhaustive and scaled_exhaustive go over
        # every scale, sub-scale and code of their kernels (up to 31 s natively).
        if m["target"]["name"] not in ("hostile_limits", "legacy_exhaustive", "table_exhaustive", "iq_grid_exhaustive",
                                       "kquant_exhaustive", "scaled_exhaustive", "f16_rounding"):
            print(m["executable"])')
# valgrind runs a program on one core (it serializes the program's
# threads): the binaries run side by side, one per core, each with its
# own log; a failure prints that binary's log.
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
one() { # BINARY: one test binary under valgrind, its result on one line
  local b=$1 t0=$SECONDS log
  log=$logs/$(basename "$1").log
  # shellcheck disable=SC2086
  if valgrind $VG_OPTS "$b" -q --test-threads 2 >"$log" 2>&1; then
    printf 'leak_check: %-50s clean (%d s)\n' "$(basename "$b")" "$((SECONDS - t0))"
  else
    printf 'leak_check: %-50s FAILED\n' "$(basename "$b")"
    tail -60 "$log"
    return 1
  fi
}
export -f one
# The fuzz targets' deterministic sweeps (crates/weightstream-fuzz-targets/
# tests/sweep.rs) run a quarter of their inputs here: 65 s under valgrind
# whole on 2026-11-29, the longest binary; cargo test runs them all.
export WEIGHTSTREAM_SWEEP_SHARE=0.25
export logs VG_OPTS
# shellcheck disable=SC2016
echo "$bins" | xargs -r -n1 -P "$(nproc)" bash -c 'one "$1"' _ \
  || { echo "leak_check: a test binary leaked or failed under valgrind (its log above)"; exit 1; }

echo "leak_check: the CLI"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp" "$logs"' EXIT
"$WS_VENV/bin/python" tests/fixtures/generate.py "$tmp/fx" --seed 3 >/dev/null
"$WS_VENV/bin/python" tests/fixtures/sample_model.py --out "$tmp" --formats q4_0,fp8 2>/dev/null
printf '\x01\x02' > "$tmp/broken.safetensors"
run() {
  printf 'leak_check: weightstream %-60s ' "$*"
  local rc=0
  "${VG[@]}" "$WEIGHTSTREAM_BIN" "$@" >/dev/null 2>"$tmp/vg.log" || rc=$?
  if [ $rc -eq 99 ]; then echo "LEAK or memory error"; cat "$tmp/vg.log"; exit 1; fi
  echo "clean (exit $rc)"
}
run inspect "$tmp/fx/all_types.gguf"
run inspect --json "$tmp/fx/fp8_deepseek"
run inspect --json "$tmp/broken.safetensors"
run load "$tmp/tiny-llama-q4_0.gguf" --device cpu --verify
run load "$tmp/tiny-llama-fp8" --device cpu --verify --json
run load "$tmp/fx/all_types.gguf" --device cpu
run convert "$tmp/tiny-llama-fp8" -o "$tmp/out" --max-shard-size 1MB
run bench --shape 256x1024 --reps 2 --format q4_0 --format fp8-block
echo "leak_check: no leaks"
