#!/bin/sh
# The emulator of cmake/toolchains/x86_64-qemu.cmake: runs an x86-64 binary as the CPU model
# $QEMU_CPU names (default Nehalem: SSE4.2, no AVX).
#
# Test discovery (gtest_discover_tests runs `BINARY --gtest_list_tests` at build time) runs as
# qemu's `max` model instead, so the per-ISA instances of parameterized tests (.../avx2) are
# all listed whatever the build's environment; a run on a CPU without that ISA instantiates
# none of them and runs nothing for such a name.
cpu="${QEMU_CPU:-Nehalem}"
for arg in "$@"; do
  if [ "$arg" = "--gtest_list_tests" ]; then cpu=max; fi
done
exec qemu-x86_64 -cpu "$cpu" "$@"
