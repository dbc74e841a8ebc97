#!/usr/bin/env bash
# Runs Python with llama-cpp-python's package from the pinned sdist over the shared libraries
# scripts/build_llama_cpp.sh built from the same source (no second build of llama.cpp), in
# build/venv with the package's own dependencies (scripts/requirements-llama.txt).
# Usage: scripts/llama_cpp_python.sh SCRIPT.py [ARGS...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build="$here/../build"
"$here/build_llama_cpp.sh" "$build" >/dev/null
"$here/setup_venv.sh" "$build/venv" "$here/requirements-bench.txt" "$here/requirements-llama.txt"
pin=$(grep -E '^llama-cpp-python==' "$here/requirements-reference.txt" | cut -d= -f3)
export PYTHONPATH="$build/llama.cpp/src/llama_cpp_python-$pin${PYTHONPATH:+:$PYTHONPATH}"
export LLAMA_CPP_LIB_PATH="$build/llama.cpp/cmake/bin"
exec "$build/venv/bin/python" "$@"
