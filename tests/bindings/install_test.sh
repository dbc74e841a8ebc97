#!/usr/bin/env bash
# `make install` as a user runs it: cmake --install the build into a temporary prefix, then
# build programs against that tree alone -- the C example with pkg-config and with CMake's
# find_package(fgemma), the C++ example with find_package (fgemma::fgemma_cpp) -- run them and
# the installed CLI, and compare their call bytes. With $FGEMMA_VENV holding flit_core (the
# pinned test venv), also build the Python package's wheel offline, install it into a fresh
# venv, and run the Python example there, finding the installed libfgemma.so by the library
# path alone.
# Usage: install_test.sh SOURCE_DIR, with FGEMMA_BUILD_DIR and FGEMMA_SYNTHETIC_MODEL.
set -euo pipefail
src=$1
build=$FGEMMA_BUILD_DIR
model=$FGEMMA_SYNTHETIC_MODEL
catalog=$src/tests/bindings/catalog.json
req="turn the light on in the kitchen"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
passed=0
failed=0
ok() { echo "ok   $1"; passed=$((passed + 1)); }
bad() { echo "FAILED: $1"; failed=$((failed + 1)); }

cmake --install "$build" --prefix "$prefix" > "$tmp/install.log"
libdir=$(dirname "$(find "$prefix" -name 'libfgemma.so' | head -1)")
for f in bin/fgemma share/fgemma/fgemma-call-lora.gguf share/fgemma/fgemma-tune-lora.gguf \
         include/fgemma/fgemma.h include/fgemma/function_caller.h \
         include/fgemma/status.h; do
  [ -e "$prefix/$f" ] && ok "installed $f" || bad "missing $f"
done
for f in libfgemma.so libfgemma.so.1 libfgemma_cpp.a cmake/fgemma/fgemmaConfig.cmake \
         cmake/fgemma/fgemmaConfigVersion.cmake cmake/fgemma/fgemmaTargets.cmake \
         pkgconfig/fgemma.pc pkgconfig/fgemma-cpp.pc; do
  [ -e "$libdir/$f" ] && ok "installed lib/$f" || bad "missing lib/$f"
done
if [ -e "$build/java/fgemma.jar" ]; then
  [ -e "$libdir/libfgemma_jni.so" ] && ok "installed libfgemma_jni.so" || bad "no libfgemma_jni.so"
  [ -e "$prefix/share/java/fgemma.jar" ] && ok "installed fgemma.jar" || bad "no fgemma.jar"
fi

want=$("$prefix/bin/fgemma" call -m "$model" --tools "$catalog" "$req")
echo "cli: $want"
same() {  # same NAME OUTPUT
  if [ "$2" == "$want" ]; then ok "$1 gives the CLI's bytes"; else bad "$1 printed: $2"; fi
}

# C with pkg-config.
export PKG_CONFIG_PATH=$libdir/pkgconfig
# shellcheck disable=SC2046
cc -std=c99 -Wall -Werror "$src/examples/c/call.c" $(pkg-config --cflags --libs fgemma) \
  -Wl,-rpath,"$libdir" -o "$tmp/c_pc" && ok "C program built with pkg-config" || bad "pkg-config C build"
[ -x "$tmp/c_pc" ] && same "C (pkg-config)" "$("$tmp/c_pc" "$model" "$catalog" "$req" 2>&1)"

# C and C++ with CMake's find_package.
if cmake -S "$src/tests/bindings/consumer" -B "$tmp/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
     -DCMAKE_PREFIX_PATH="$prefix" -DFGEMMA_EXAMPLES="$src/examples" > "$tmp/consumer.log" 2>&1 &&
   cmake --build "$tmp/consumer" >> "$tmp/consumer.log" 2>&1; then
  ok "C and C++ programs built with find_package(fgemma)"
  same "C (find_package)" "$("$tmp/consumer/c_call" "$model" "$catalog" "$req" 2>&1)"
  same "C++ (fgemma::fgemma_cpp)" "$("$tmp/consumer/cpp_call" "$model" "$catalog" "$req" 2>&1)"
else
  cat "$tmp/consumer.log"; bad "find_package(fgemma) build"
fi

# Python: the wheel (no compiler), installed into a fresh venv.
py=${FGEMMA_VENV:-}/bin/python
if [ -n "${FGEMMA_VENV:-}" ] && "$py" -c "import flit_core" 2>/dev/null; then
  "$py" -m pip wheel -q --no-deps --no-build-isolation --no-index -w "$tmp/wheels" "$src/python"
  python3 -m venv "$tmp/venv"
  "$tmp/venv/bin/pip" install -q --no-index "$tmp/wheels"/fgemma-*.whl && ok "pip install of the wheel"
  same "Python (fresh venv, installed libfgemma)" "$(cd "$tmp" && LD_LIBRARY_PATH="$libdir" \
    "$tmp/venv/bin/python" "$src/examples/python/call.py" "$model" "$catalog" "$req" 2>&1)"
else
  echo "SKIPPED: Python wheel (no flit_core in \$FGEMMA_VENV; scripts/setup_venv.sh installs it)"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
