#!/usr/bin/env bash
# Installs the Debian packages fgemma builds and tests with, if any is missing.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config python3 python3-venv
      libgtest-dev libgmock-dev googletest libbenchmark-dev nlohmann-json3-dev
      clang libclang-rt-14-dev openjdk-17-jdk-headless  # the JDK: the JVM binding (java/)
      libcpp-httplib-dev)  # fgemma serve's HTTP (cpp-httplib 0.11)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install_deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
