#!/usr/bin/env bash
# Bounded fuzzing (cargo-fuzz / libFuzzer, AddressSanitizer) of the GGUF and
# safetensors readers, FP8 scale pairing and the CPU kernels.
#
#   scripts/fuzz.sh                      60 s per target, every target
#   scripts/fuzz.sh 3600 gguf_header     a long run of one target
#   WEIGHTSTREAM_FUZZ_RUNS=N             stop each target after N executions
#                                        (scripts/fuzz_campaign.sh: 10 million)
#   WEIGHTSTREAM_FUZZ_SANITIZER=none     build without AddressSanitizer (about
#                                        2x the executions a second; for
#                                        targets whose code has no `unsafe`);
#                                        its own build directory, so both
#                                        kinds can run side by side
#
# Seeds come from tests/fixtures/fuzz_corpus.py (the fixtures and the
# malformed corpus); the corpus grows in fuzz/corpus/. A crash leaves its
# input in fuzz/artifacts/TARGET/ and fails the run: copy it into
# tests/fuzz_regressions/TARGET/ so the regression test replays it forever.
# Needs the nightly toolchain (rustup); installs cargo-fuzz 0.13.2 into
# $WS_CACHE/tools (scripts/env.sh: reused by every clone on this machine).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
source scripts/env.sh
# The targets never launch a GPU kernel (slices and packed_checkpoint load
# through the CPU executor): building the fatbins with nvcc under the
# fuzzers' toolchain would only cost CI minutes.
unset WEIGHTSTREAM_NVCC
# Nightly builds of the workspace crates in a build directory of their own:
# sharing the stable builds' one (scripts/env.sh) once left a release build
# linking a fuzz build's weightstream-format of the same hash and failing
# to find a module added since.
export CARGO_BUILD_BUILD_DIR=$WS_CACHE/cargo-build-fuzz
SECONDS_PER_TARGET=${1:-60}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(gguf_header safetensors_header checkpoint dequant fp8_scale_rule checkpoint_dir packed_checkpoint slices http_responses hf_metadata)

if ! cargo +nightly --version >/dev/null 2>&1; then
  rustup toolchain install nightly --profile minimal >/dev/null 2>&1 || {
    echo "fuzz: the nightly Rust toolchain is missing and cannot be installed (rustup toolchain install nightly)" >&2
    exit 1
  }
fi
TOOLS=$WS_CACHE/tools
if [ ! -x "$TOOLS/bin/cargo-fuzz" ]; then
  echo "fuzz: installing cargo-fuzz 0.13.2 into $TOOLS"
  cargo install -q --locked --root "$TOOLS" cargo-fuzz --version 0.13.2
fi
export PATH=$TOOLS/bin:$PATH
"$WS_VENV/bin/python" tests/fixtures/fuzz_corpus.py fuzz/corpus

SANITIZER=${WEIGHTSTREAM_FUZZ_SANITIZER:-address}
case $SANITIZER in
  address) BUILD=(-O) ;;
  none) BUILD=(-O -s none --target-dir fuzz/target-nosan) ;;
  *) echo "fuzz: WEIGHTSTREAM_FUZZ_SANITIZER is address or none, not $SANITIZER" >&2; exit 2 ;;
esac
echo "fuzz: building the targets (nightly, sanitizer: $SANITIZER)"
cargo +nightly fuzz build --fuzz-dir fuzz "${BUILD[@]}" 2>&1 | grep -vE "^\s+(Compiling|Finished|Building)" || true

# libFuzzer runs one target on one core: run as many targets at once as
# there are cores (WEIGHTSTREAM_FUZZ_JOBS), each for the full time.
jobs_max=${WEIGHTSTREAM_FUZZ_JOBS:-$(nproc)}
out=$(mktemp -d)
run_target() {
  local t=$1 log=$out/$1.log result execs corpus
  # Targets without seeds from fuzz_corpus.py start from an empty corpus.
  mkdir -p "fuzz/corpus/$t"
  local rc=0
  cargo +nightly fuzz run --fuzz-dir fuzz "${BUILD[@]}" "$t" "fuzz/corpus/$t" -- \
      -max_total_time="$SECONDS_PER_TARGET" ${WEIGHTSTREAM_FUZZ_RUNS:+-runs=$WEIGHTSTREAM_FUZZ_RUNS} \
      -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 >"$log" 2>&1 || rc=$?
  if [ $rc -eq 0 ]; then
    result="no crash"
  elif grep -q "libFuzzer: run interrupted" "$log"; then
    # Ctrl-C or a kill by hand: no finding, but not a finished run either.
    result="interrupted"
    touch "$out/$t.failed"
  else
    result="CRASH: $(ls -t "fuzz/artifacts/$t" 2>/dev/null | head -1)"
    touch "$out/$t.failed"
  fi
  execs=$(grep -oE "stat::number_of_executed_units: *[0-9]+" "$log" | grep -oE "[0-9]+$" || echo "?")
  corpus=$(ls "fuzz/corpus/$t" | wc -l)
  printf '%-20s %12s execs  %6s corpus files  %s\n' "$t" "$execs" "$corpus" "$result" >"$out/$t.summary"
}
for t in "${TARGETS[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
  echo "fuzz: $t for ${SECONDS_PER_TARGET}s"
  run_target "$t" &
done
wait
summary=()
status=0
for t in "${TARGETS[@]}"; do
  if [ -f "$out/$t.failed" ]; then
    status=1
    # The temporary directory goes below: keep the whole log for reading.
    mkdir -p fuzz/logs
    cp "$out/$t.log" "fuzz/logs/$t.log"
    tail -40 "$out/$t.log"
    echo "fuzz: $t's whole log: fuzz/logs/$t.log"
  fi
  summary+=("$(cat "$out/$t.summary")")
done
rm -rf "$out"
echo "fuzz: ${SECONDS_PER_TARGET}s per target, $jobs_max at a time"
printf '  %s\n' "${summary[@]}"
exit $status
