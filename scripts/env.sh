# Sourced by the other scripts: where things live.
WS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export WS_VENV=${WEIGHTSTREAM_VENV:-$WS_ROOT/.venv}
# The venv's packages: its own, and the machine-wide cache entry it sits on
# (scripts/venv_cache.sh).
WS_SITES=("$WS_VENV")
[ -f "$WS_VENV/.ws-cache-base" ] && WS_SITES+=("$(cat "$WS_VENV/.ws-cache-base")")
# nvcc from the pinned PyPI wheel, unless the caller chose one. Looked up
# again on every source when it was this file's choice: setup.sh may have
# just replaced the venv it came from (a clone whose .venv predates the
# shared cache kept pointing at the old venv's nvcc, and the kernel build
# failed).
if [ -z "${WEIGHTSTREAM_NVCC:-}" ] || [ "${WS_NVCC_CHOSEN:-}" = 1 ]; then
  unset WEIGHTSTREAM_NVCC
  for site in "${WS_SITES[@]}"; do
    for n in "$site"/lib/python3*/site-packages/nvidia/cu13/bin/nvcc; do
      [ -x "$n" ] && export WEIGHTSTREAM_NVCC="$n" WS_NVCC_CHOSEN=1
    done
  done
fi
export WEIGHTSTREAM_BIN=${WEIGHTSTREAM_BIN:-$WS_ROOT/target/release/weightstream}
# cuFile from the pinned nvidia-cufile wheel: it ships libcufile.so.0, while
# the loader (cudarc) asks for libcufile.so, so link it under the venv and
# put that directory on the library path (libcufile itself needs no CUDA to
# load; without a driver, opening it fails cleanly).
for c in "${WS_SITES[@]}"; do
  c=$(echo "$c"/lib/python3*/site-packages/nvidia/cu13/lib/libcufile.so.0)
  if [ -f "$c" ]; then
    mkdir -p "$WS_VENV/lib/cufile-link"
    ln -sf "$c" "$WS_VENV/lib/cufile-link/libcufile.so"
    case ":${LD_LIBRARY_PATH:-}:" in
      *":$WS_VENV/lib/cufile-link:"*) ;;
      *) export LD_LIBRARY_PATH="$WS_VENV/lib/cufile-link${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;;
    esac
    export WEIGHTSTREAM_CUFILE_LINK="$WS_VENV/lib/cufile-link/libcufile.so"
  fi
done
# What a fresh clone may reuse from earlier runs on this machine, outside the
# clone: llama.cpp's build (keyed by its pinned version), cargo-fuzz, the
# venvs' pinned packages (keyed by the requirement files' hash) and cargo's
# intermediate build outputs (build-dir; each clone keeps its own target/
# with its own binaries). Deleting it only makes the next run slower.
export WS_CACHE=${WEIGHTSTREAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/weightstream}
# cargo's intermediate outputs (dependencies compiled, build scripts' output)
# there too: a fresh clone compiles only the workspace's own crates. Those
# are NOT kept apart per clone: cargo keys a path crate's artifacts by its
# place in the workspace, not the clone's path, and judges them fresh by
# modification times. A fresh clone's sources are newer than anything
# there, so it rebuilds them (CI's case); but two clones edited side by
# side can each get the other's newer build of a crate it did not touch
# (seen 2026-11-29 with three worktrees). Give each concurrent clone its
# own: CARGO_BUILD_BUILD_DIR=<clone>/target/build-private (seeded by
# copying this one, then touching the clone's sources).
export CARGO_BUILD_BUILD_DIR=${CARGO_BUILD_BUILD_DIR:-$WS_CACHE/cargo-build}
# nvcc's fatbins, the slowest part of the build, keyed by their exact
# inputs (kernels/build/nvcc.rs): made once per machine, not per clone and
# per feature set of the kernels crate.
export WEIGHTSTREAM_FATBIN_CACHE=${WEIGHTSTREAM_FATBIN_CACHE:-$WS_CACHE/fatbins}
