# x86-64 build with the host g++, every binary run under qemu-x86_64 as an older CPU, so the unit
# tests check that fgemma runs where AVX or AVX-512 is missing (small Atom/Celeron boxes have
# only SSE4.2): cpuid reports what the emulated CPU has, and an instruction it lacks is SIGILL.
# The CPU model comes from $QEMU_CPU when the tests run (default Nehalem: SSE4.2, no AVX;
# Haswell: AVX2, no AVX-512), so one build serves every model:
#   QEMU_CPU=Haswell ctest -L unit
# Needs qemu-user (scripts/install_cross_deps.sh). Use with -DFG_BUILD_BENCHMARKS=OFF.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(CMAKE_C_COMPILER gcc)
set(CMAKE_CXX_COMPILER g++)
# ctest, gtest_discover_tests and the CLI tests (FG_CLI_PATH) run target binaries through this.
set(CMAKE_CROSSCOMPILING_EMULATOR ${CMAKE_CURRENT_LIST_DIR}/qemu-x86_64-cpu.sh)
