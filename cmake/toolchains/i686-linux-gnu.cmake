# 32-bit x86 build with the host g++ and -m32; the binaries run natively.
# Use with -DFG_BUILD_BENCHMARKS=OFF (Debian's libbenchmark is 64-bit only).
#
# Needs g++-12-multilib (lib32stdc++, libc6-dev-i386). Debian's g++-multilib, which only adds the
# /usr/include/asm link, conflicts with the ARM cross compilers, so i686-include/asm supplies
# that link here instead (linux-libc-dev's asm headers serve i386 and x86_64 alike).
#
# SSE2 scalar math (-mfpmath=sse) as on x86_64: with the i386 default (x87, 80-bit excess
# precision) f32 quantizers round differently from ggml's bytes (kquants_test fails there).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR i686)
set(CMAKE_C_COMPILER gcc)
set(CMAKE_CXX_COMPILER g++)
set(FG_I686_FLAGS "-m32 -msse2 -mfpmath=sse -isystem ${CMAKE_CURRENT_LIST_DIR}/i686-include")
set(CMAKE_C_FLAGS_INIT "${FG_I686_FLAGS}")
set(CMAKE_CXX_FLAGS_INIT "${FG_I686_FLAGS}")
set(CMAKE_EXE_LINKER_FLAGS_INIT "-m32")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-m32")
set(CMAKE_LIBRARY_ARCHITECTURE i386-linux-gnu)
