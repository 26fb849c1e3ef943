#!/usr/bin/env bash
# The main job end to end on a fresh Debian bookworm machine: install, build, fetch Multi30k,
# then run mtx on the small embedded default (configs/tiny.json, CPU).
#   scripts/quickstart.sh [--mirror DIR]     (DIR: a local copy of the Multi30k .gz files)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh "$@"

mtx=build/bin/mtx
config=configs/tiny.json
"$mtx" --version
# Tokenizer + encoded corpus (cached: a second run reuses them).
"$mtx" prepare --config "$config"
echo "quickstart: done. Training, translation and scoring join this script as they land."
