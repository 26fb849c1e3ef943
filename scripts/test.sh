#!/usr/bin/env bash
# The whole test suite on a fresh Debian bookworm machine: install, build, fetch Multi30k, ctest.
#   scripts/test.sh [--mirror DIR]     (DIR: a local copy of the Multi30k .gz files)
set -euo pipefail
cd "$(dirname "$0")/.."
mirror_args=()
if [ "${1:-}" = "--mirror" ]; then mirror_args=(--mirror "$2"); fi

scripts/setup.sh
scripts/build.sh
scripts/get_multi30k.sh data/multi30k "${mirror_args[@]}"
ctest --test-dir "${MTX_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)"
