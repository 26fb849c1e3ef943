#!/usr/bin/env bash
# Everything a run of mtx needs on a fresh Debian bookworm machine, each step skipped when done:
# install the packages, configure and build, fetch Multi30k into data/multi30k.
#   scripts/bootstrap.sh [--mirror DIR]     (DIR: a local copy of the Multi30k .gz files)
set -euo pipefail
cd "$(dirname "$0")/.."
mirror_args=()
if [ "${1:-}" = "--mirror" ]; then
  [ $# -ge 2 ] || { echo "usage: $0 [--mirror DIR]" >&2; exit 2; }
  mirror_args=(--mirror "$2")
fi
scripts/setup.sh
scripts/build.sh
scripts/get_multi30k.sh data/multi30k "${mirror_args[@]}"
