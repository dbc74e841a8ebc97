#!/usr/bin/env bash
# Builds llama.cpp's own tools (llama-bench, llama-cli, llama-completion, llama-server,
# llama-export-lora) from the source the pinned llama-cpp-python sdist vendors
# (scripts/requirements-reference.txt), with llama.cpp's defaults (GGML_NATIVE: -march=native),
# into BUILD_DIR/llama.cpp/cmake/bin. The peers for bench/compare.sh and the adapter interop tests.
# Cached: a second run with the same pin does nothing. Not run by `make test` (~15 min on 2
# cores); `make llama-cpp` runs it.
# Usage: scripts/build_llama_cpp.sh [BUILD_DIR]   (default: build)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(realpath -m "${1:-$here/../build}")
pin=$(grep -E '^llama-cpp-python==' "$here/requirements-reference.txt" | cut -d= -f3)
dest="$build/llama.cpp"
stamp="$dest/.fgemma-stamp"
targets=(llama-bench llama-cli llama-completion llama-server llama-export-lora)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$pin" ]; then
  echo "llama.cpp $pin tools: $dest/cmake/bin (cached)"
  exit 0
fi
mkdir -p "$dest"
src="$dest/src"
if [ ! -d "$src/llama_cpp_python-$pin" ]; then
  rm -rf "$src" && mkdir -p "$src"
  echo "build_llama_cpp: fetching the llama-cpp-python $pin sdist from PyPI"
  python3 -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
    "llama-cpp-python==$pin" -d "$src"
  tar -xzf "$src/llama_cpp_python-$pin.tar.gz" -C "$src"
fi
vendored="$src/llama_cpp_python-$pin/vendor/llama.cpp"
[ -f "$vendored/CMakeLists.txt" ] || { echo "build_llama_cpp: no llama.cpp in the sdist" >&2; exit 1; }
cmake -S "$vendored" -B "$dest/cmake" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  >/dev/null
cmake --build "$dest/cmake" -j "$(nproc)" --target "${targets[@]}"
echo "$pin" > "$stamp"
echo "llama.cpp $pin tools: $dest/cmake/bin"
