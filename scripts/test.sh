#!/usr/bin/env bash
# The whole test suite on a fresh Debian bookworm machine: install, build, fetch Multi30k, ctest.
#   scripts/test.sh [--mirror DIR]     (DIR: a local copy of the Multi30k .gz files)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh "$@"
ctest --test-dir "${MTX_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)"
