#!/usr/bin/env bash
# The 32-bit check of docs/contract.md: in a -m32 build, `fgemma invoke` runs gemma_prefill_at at
# S = 1024 on the real model (about 70 MB of scratch), while the all-positions `gemma` at
# S = 1024 (about 1 GiB of S x V logits) fails with a clear out-of-memory error, exit 1, never a
# crash. An i686 process on a 64-bit kernel has a 4 GiB address space, so the check limits it to
# 1 GiB (ulimit -v) as a 32-bit device would; a plan beyond the 32-bit address space (S = 4096,
# 4.3 GB) is refused without any limit.
# The 32-bit run's token (its last result) must equal the token of the same call in a 64-bit
# build (FGEMMA64, default build/fgemma).
# Usage: FGEMMA_MODEL=model.gguf scripts/check_invoke_32bit.sh [build dir (default build-i686-invoke)]
# Needs g++-12-multilib (scripts/install_cross_deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-i686-invoke}
model=${FGEMMA_MODEL:?set FGEMMA_MODEL to the real GGUF}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFG_BUILD_BENCHMARKS=OFF \
  -DFG_BUILD_TESTS=OFF -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/i686-linux-gnu.cmake >/dev/null
cmake --build "$build" -j "${JOBS:-2}" --target fgemma
bin="$build/fgemma"
file "$bin" | grep -q "32-bit" || { echo "check_invoke_32bit: $bin is not a 32-bit binary"; exit 1; }
bin64=${FGEMMA64:-build/fgemma}
[ -x "$bin64" ] || { echo "check_invoke_32bit: no 64-bit fgemma at $bin64 (set FGEMMA64)"; exit 1; }

# The value of a one-element i32 .npy (its last 4 bytes, little-endian).
npy_i32() { od -An -t d4 -j $(( $(stat -c %s "$1") - 4 )) -N 4 "$1" | tr -d ' '; }

prompt=(2 105 2364 107 3689 563 506 5279 529 7001 236881 106 107 105 4368 107)
tokens=("${prompt[@]}"); while [ ${#tokens[@]} -lt 1024 ]; do tokens+=(0); done
select=(); for i in $(seq 0 1023); do if [ "$i" -eq 15 ]; then select+=(1); else select+=(0); fi; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
outs=(); for i in $(seq 0 36); do outs+=("--output=@$tmp/r$i.npy"); done
fail=0

echo "== gemma_prefill_at --seq 1024 (32-bit, 1 GiB address space)"
if (ulimit -v 1048576; "$bin" invoke -m "$model" --stats --function gemma_prefill_at --seq 1024 \
      "--input=1024xi32=${tokens[*]}" "--input=1x1024xf32=${select[*]}" "${outs[@]}"); then
  echo "ok"
  outs64=(); for i in $(seq 0 36); do outs64+=("--output=@$tmp/s$i.npy"); done
  "$bin64" invoke -m "$model" --function gemma_prefill_at --seq 1024 \
    "--input=1024xi32=${tokens[*]}" "--input=1x1024xf32=${select[*]}" "${outs64[@]}"
  t32=$(npy_i32 "$tmp/r36.npy"); t64=$(npy_i32 "$tmp/s36.npy")
  echo "token: 32-bit $t32, 64-bit $t64"
  if [ -z "$t32" ] || [ "$t32" != "$t64" ]; then
    echo "FAILED: the 32-bit token differs from the 64-bit build's"; fail=1
  fi
else
  echo "FAILED: gemma_prefill_at should run"; fail=1
fi

echo "== gemma --seq 1024 (32-bit, 1 GiB address space): must fail cleanly"
set +e
out=$( (ulimit -v 1048576; "$bin" invoke -m "$model" --stats --function gemma --seq 1024 \
      "--input=1x1024xi32=${tokens[*]}" --output=@"$tmp/g.npy") 2>&1 )
rc=$?
set -e
echo "$out"
if [ $rc -ne 1 ] || ! grep -q "cannot allocate" <<<"$out"; then
  echo "FAILED: expected exit 1 and 'cannot allocate', got rc=$rc"; fail=1
fi

echo "== gemma --seq 4096 (32-bit): plan beyond the address space"
set +e
out=$("$bin" invoke -m "$model" --stats --function gemma --seq 4096 --input=1x4096xi32=2 2>&1)
rc=$?
set -e
echo "$out"
if [ $rc -ne 1 ] || ! grep -q "do not fit the address space" <<<"$out"; then
  echo "FAILED: expected exit 1 and 'do not fit the address space', got rc=$rc"; fail=1
fi
exit $fail
