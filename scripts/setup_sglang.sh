#!/usr/bin/env bash
# The SGLang test environment, .venv-sglang: sglang 0.5.23 and its pinned
# requirements (torch 2.14.1 from PyPI, with its CUDA libraries: about 11 GB
# and a few minutes the first time on a machine; the packages are cached
# outside the clone: scripts/venv_cache.sh), then the weightstream wheel
# (built by scripts/setup.sh), the SGLang plugin and the test-only stand-in
# for sgl_kernel (plugins/sglang/tests/sgl_kernel_stub: SGLang imports the
# CUDA-only kernel package's names at load time, though its CPU path calls
# none; the stand-in raises if anything is called). Run scripts/setup.sh
# first.
#
#   scripts/setup_sglang.sh            the venv, the wheel and the plugin
#   scripts/setup_sglang.sh packages   the pinned packages only (needs no
#                                      build: scripts/test.sh starts it
#                                      beside the build)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
VENV=${WEIGHTSTREAM_SGLANG_VENV:-$ROOT/.venv-sglang}
source scripts/env.sh
# shellcheck source=scripts/venv_cache.sh
source scripts/venv_cache.sh
venv_install() {
  echo "setup_sglang: installing torch, sglang's requirements and sglang 0.5.23 (pinned; ~11 GB)"
  "$1/bin/python" -m pip install -q --disable-pip-version-check -r requirements/sglang.txt
  "$1/bin/python" -m pip install -q --disable-pip-version-check --no-deps sglang==0.5.23
}
cached_venv sglang "$VENV" "pip -r sglang.txt; pip --no-deps sglang==0.5.23" requirements/sglang.txt
[ "${1:-}" = packages ] && exit 0
ls target/python-wheel/weightstream-*.whl >/dev/null 2>&1 || { echo "setup_sglang: no weightstream wheel: run scripts/setup.sh first" >&2; exit 1; }
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps --force-reinstall \
  target/python-wheel/weightstream-*.whl ./plugins/sglang ./plugins/sglang/tests/sgl_kernel_stub
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps -r requirements/sglang-test.txt
echo "setup_sglang: ready ($VENV)"
