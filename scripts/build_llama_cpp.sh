#!/usr/bin/env bash
# Build llama.cpp (CPU, shared libraries, and the llama-quantize,
# llama-gguf-split and llama-imatrix tools in <prefix>/bin) from the copy vendored in the
# llama-cpp-python sdist pinned in requirements/llama-cpp.txt, into
# $WS_CACHE/llama.cpp/<version>/ (scripts/env.sh: outside the clone, built
# once per machine, then reused by every clone; a lock keeps two runs from
# building it at once). Prints the install prefix (include/, lib/) on its
# last line.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
source scripts/env.sh
spec=$(grep -E '^llama-cpp-python==' requirements/llama-cpp.txt)
version=$(echo "$spec" | sed -E 's/^llama-cpp-python==([^ ]+).*/\1/')
base=$WS_CACHE/llama.cpp/$version
prefix=$base/install
mkdir -p "$base"
exec 9>"$base/.lock"
flock 9
# The stamp names what the build holds: a cache from before the tools were
# built is rebuilt.
stamp=$prefix/.built-with-tools-imatrix
if [ ! -f "$stamp" ]; then
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
  common=(-S "$base/src" -B "$base/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_COMMON=ON
    -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=ON -DGGML_OPENMP=OFF
    -DLLAMA_TOOLS_INSTALL=OFF -DCMAKE_INSTALL_PREFIX="$prefix")
  # Three tools the tests make realistic files with: llama-quantize (Q4_K_M
  # and the other presets people download), llama-gguf-split (split sets)
  # and llama-imatrix (the importance matrix the IQ1/IQ2/IQ3 types need). Only those targets: the other tools (multimodal, bench, ...)
  # would triple the build. Then the tools are switched off again so that
  # `cmake --install` installs just the libraries and headers (the mtmd
  # tool installs unconditionally and was not built).
  cmake "${common[@]}" -DLLAMA_BUILD_TOOLS=ON >&2
  cmake --build "$base/build" -j "$(nproc)" --target llama llama-quantize llama-gguf-split llama-imatrix >&2
  cmake "${common[@]}" -DLLAMA_BUILD_TOOLS=OFF >&2
  cmake --build "$base/build" -j "$(nproc)" >&2
  cmake --install "$base/build" >&2
  mkdir -p "$prefix/bin"
  cp "$base/build/bin/llama-quantize" "$base/build/bin/llama-gguf-split" "$base/build/bin/llama-imatrix" "$prefix/bin/"
  touch "$stamp"
fi
# `build_llama_cpp.sh valgrind`: also a CPU backend valgrind can run (the
# native one uses AVX-512, which valgrind does not decode): libggml-cpu
# alone, built for AVX2/FMA/F16C, into <prefix>/lib-valgrind. A program
# linked with that directory first in its rpath runs the same llama.cpp
# with it (the other libraries are the same build). Built once, on demand.
if [ "${1:-}" = valgrind ]; then
  vstamp=$prefix/lib-valgrind/.built
  if [ ! -f "$vstamp" ]; then
    echo "build_llama_cpp: building libggml-cpu for valgrind (AVX2, no AVX-512) in $base/build-valgrind" >&2
    cmake -S "$base/src" -B "$base/build-valgrind" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=OFF \
      -DLLAMA_BUILD_COMMON=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DGGML_OPENMP=OFF -DGGML_NATIVE=OFF \
      -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON >&2
    cmake --build "$base/build-valgrind" -j "$(nproc)" --target ggml-cpu >&2
    mkdir -p "$prefix/lib-valgrind"
    cp -a "$base"/build-valgrind/bin/libggml-cpu.so* "$prefix/lib-valgrind/"
    touch "$vstamp"
  fi
  echo "$prefix/lib-valgrind"
fi
echo "$prefix"
