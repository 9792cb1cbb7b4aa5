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
# cuFile from the pinned nvidia-cufile wheel: it ships libcufile.so.0, while
# the loader (cudarc) asks for libcufile.so, so link it under the venv and
# put that directory on the library path (libcufile itself needs no CUDA to
# load; without a driver, opening it fails cleanly).
for c in "$WS_VENV"/lib/python3*/site-packages/nvidia/cu13/lib/libcufile.so.0; do
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
