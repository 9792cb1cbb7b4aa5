#!/usr/bin/env bash
# The cloud SDKs bench/s3/bench_clouds.py compares weightstream with
# (google-cloud-storage, azure-storage-blob), pinned in
# requirements/bench-clients.txt, in a venv of their own, .venv-bench-clients
# (its packages cached outside the clone, as every venv here:
# scripts/venv_cache.sh). Benchmarks only: no test needs it.
#
#   bench/s3/setup_clients.sh
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
source scripts/env.sh
# shellcheck source=scripts/venv_cache.sh
source scripts/venv_cache.sh
venv_install() {
  "$1/bin/python" -m pip install -q --disable-pip-version-check -r requirements/bench-clients.txt
}
cached_venv bench-clients "$ROOT/.venv-bench-clients" "pip -r bench-clients.txt" requirements/bench-clients.txt
echo "setup_clients: ready ($ROOT/.venv-bench-clients)"
