#!/usr/bin/env bash
# Extra Debian packages for `make cross` only (cross compilers, qemu user-mode emulation, the
# 32-bit x86 multilib); `make test` does not need them. GoogleTest for the targets is built from
# /usr/src/googletest (package googletest, installed by install_deps.sh).
set -euo pipefail

# `install_cross_deps.sh x86` installs only what `make cross-x86` needs (qemu-user).
pkgs=()
need() { command -v "$1" >/dev/null 2>&1 || pkgs+=("$2"); }
need qemu-x86_64 qemu-user
if [ "${1:-all}" != x86 ]; then
  need aarch64-linux-gnu-g++ g++-aarch64-linux-gnu
  need arm-linux-gnueabihf-g++ g++-arm-linux-gnueabihf
  need qemu-aarch64 qemu-user
  need qemu-arm qemu-user
  # -m32 needs the 32-bit libc and C++ runtime. Not g++-multilib: Debian makes it conflict with
  # the ARM cross compilers (both own /usr/include/asm); cmake/toolchains/i686-include has the
  # link.
  dpkg -s g++-12-multilib >/dev/null 2>&1 || pkgs+=(g++-12-multilib)
fi
[ -d /usr/src/googletest ] || pkgs+=(googletest)

if [ ${#pkgs[@]} -eq 0 ]; then exit 0; fi
mapfile -t pkgs < <(printf '%s\n' "${pkgs[@]}" | sort -u)
echo "install_cross_deps: installing ${pkgs[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
"${sudo_cmd[@]}" apt-get update
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${pkgs[@]}"
