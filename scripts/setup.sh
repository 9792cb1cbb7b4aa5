#!/usr/bin/env bash
# Set up weightstream on a fresh machine, idempotently:
#   - .venv: a Python virtual environment with every pinned test dependency
#     (requirements/test.txt) and nvcc 13.0 from PyPI (requirements/cuda-toolchain.txt),
#     installed once per machine outside the clone (scripts/venv_cache.sh);
#   - Azurite, the Azure Storage emulator the tests start, pinned by
#     requirements/azurite/package-lock.json (scripts/azurite.sh; needs
#     Node.js and npm), cached the same way;
#   - a release build of the workspace, the CUDA kernels compiled to a fatbin
#     with that nvcc.
# Re-running it only redoes what changed. Needs: python3 (3.10+), cargo
# (rustup), Node.js 20+ with npm.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/env.sh
source scripts/env.sh

need() { command -v "$1" >/dev/null 2>&1 || { echo "setup: '$1' is not installed: $2" >&2; exit 1; }; }
need python3 "install Python 3.9 or newer"
need cargo "install Rust with rustup: https://rustup.rs"
# The test command checks formatting and lints: rustfmt and clippy, which
# rustup's minimal profile leaves out.
if ! { cargo fmt --version && cargo clippy --version; } >/dev/null 2>&1; then
  need rustup "install rustfmt and clippy for your Rust toolchain"
  echo "setup: adding the rustfmt and clippy components"
  rustup component add rustfmt clippy
fi

# shellcheck source=scripts/venv_cache.sh
source scripts/venv_cache.sh
venv_install() {
  "$1/bin/python" -m pip install -q --disable-pip-version-check \
    -r requirements/test.txt -r requirements/cuda-toolchain.txt
}
cached_venv test "$WS_VENV" "pip -r test.txt -r cuda-toolchain.txt" requirements/test.txt requirements/cuda-toolchain.txt
scripts/azurite.sh

# Now that the venv holds nvcc, point the kernel build at it.
source scripts/env.sh
echo "setup: building (cargo build --release), kernels with ${WEIGHTSTREAM_NVCC:-no nvcc}"
cargo build --release --locked --workspace --bins
# The C library (libweightstream_c.so/.a) for C and llama.cpp-style loaders.
cargo build --release --locked -p weightstream-capi --lib
echo "setup: building the Python package (maturin) into target/python-wheel"
rm -rf target/python-wheel
(cd crates/weightstream-py && "$WS_VENV/bin/python" -m maturin build --release --locked -q -o ../../target/python-wheel)
"$WS_VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps --force-reinstall --no-warn-script-location \
  target/python-wheel/weightstream-*.whl
echo "setup: done; the CLI is target/release/weightstream, the C library target/release/libweightstream_c.so,"
echo "       the Python package is installed in $WS_VENV"
