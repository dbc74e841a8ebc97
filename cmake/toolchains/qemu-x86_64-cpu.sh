#!/bin/sh
# The emulator of cmake/toolchains/x86_64-qemu.cmake: runs an x86-64 binary as the CPU model
# $QEMU_CPU names (default Nehalem: SSE4.2, no AVX).
exec qemu-x86_64 -cpu "${QEMU_CPU:-Nehalem}" "$@"
