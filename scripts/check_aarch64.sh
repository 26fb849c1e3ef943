#!/usr/bin/env bash
# Compiles mtx's torch-free CPU kernel sources for aarch64 with Debian's cross compiler (installed when missing):
# the instruction-set dispatch (util/cpu_isa, util/cpus) and every per-ISA kernel unit (src/*/cpu/*.cpp), whose
# x86 bodies must compile to nothing there.
#   scripts/check_aarch64.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cxx=aarch64-linux-gnu-g++
# fmt's headers (logging.h includes them) come with libfmt-dev, which a fresh machine lacks before scripts/setup.sh.
if ! command -v "$cxx" >/dev/null || [ ! -f /usr/include/fmt/format.h ]; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends g++-aarch64-linux-gnu libfmt-dev
fi
mapfile -t sources < <(ls src/util/cpu_isa.cpp src/util/cpus.cpp src/*/cpu/*.cpp)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for f in "${sources[@]}"; do
  # fmt's headers (logging.h) are architecture-independent: searched after the cross compiler's own.
  "$cxx" -std=c++17 -O2 -Wall -Wextra -Werror -Iinclude -idirafter /usr/include -c "$f" -o "$out/$(basename "$f").o"
done
echo "aarch64: ${#sources[@]} kernel sources compile ($("$cxx" --version | head -1))"
