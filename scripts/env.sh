# Sourced by the other scripts: where things live.
WS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export WS_VENV=${WEIGHTSTREAM_VENV:-$WS_ROOT/.venv}
# nvcc from the pinned PyPI wheel, unless the caller chose one.
if [ -z "${WEIGHTSTREAM_NVCC:-}" ]; then
  for n in "$WS_VENV"/lib/python3*/site-packages/nvidia/cu13/bin/nvcc; do
    [ -x "$n" ] && export WEIGHTSTREAM_NVCC="$n"
  done
fi
export WEIGHTSTREAM_BIN=${WEIGHTSTREAM_BIN:-$WS_ROOT/target/release/weightstream}
