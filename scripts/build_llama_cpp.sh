#!/usr/bin/env bash
# Build llama.cpp (CPU, shared libraries) from the copy vendored in the
# llama-cpp-python sdist pinned in requirements/llama-cpp.txt, into
# .cache/llama.cpp/<version>/ (built once, then reused). Prints the install
# prefix (include/, lib/) on its last line.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
source scripts/env.sh
spec=$(grep -E '^llama-cpp-python==' requirements/llama-cpp.txt)
version=$(echo "$spec" | sed -E 's/^llama-cpp-python==([^ ]+).*/\1/')
base=$ROOT/.cache/llama.cpp/$version
prefix=$base/install
if [ ! -f "$prefix/.built" ]; then
  mkdir -p "$base"
  if [ ! -d "$base/src" ]; then
    echo "build_llama_cpp: downloading llama-cpp-python $version (sdist, hash-checked)" >&2
    "$WS_VENV/bin/python" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
      --require-hashes -r requirements/llama-cpp.txt -d "$base/dl"
    tar -xzf "$base"/dl/llama_cpp_python-*.tar.gz -C "$base"
    mv "$base"/llama_cpp_python-*/vendor/llama.cpp "$base/src"
    rm -rf "$base"/llama_cpp_python-* "$base/dl"
  fi
  echo "build_llama_cpp: building llama.cpp $version (CPU, shared) in $base/build" >&2
  cmake -S "$base/src" -B "$base/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=OFF \
    -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=ON -DGGML_OPENMP=OFF \
    -DCMAKE_INSTALL_PREFIX="$prefix" >&2
  cmake --build "$base/build" -j "$(nproc)" >&2
  cmake --install "$base/build" >&2
  touch "$prefix/.built"
fi
echo "$prefix"
