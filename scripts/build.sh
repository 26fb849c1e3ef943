#!/usr/bin/env bash
# Configure (once) and build mtx, its sentencepiece shim and the tests into build/.
#   MTX_BUILD_DIR=... to build elsewhere; extra arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${MTX_BUILD_DIR:-build}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "$@"
fi
cmake --build "$build" -j "$(nproc)"
