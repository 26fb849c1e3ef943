#!/usr/bin/env bash
# The main job end to end on a fresh Debian bookworm machine: install, build, fetch Multi30k,
# then train the small embedded default (configs/tiny.json, CPU, two short epochs).
#   scripts/quickstart.sh [--mirror DIR]     (DIR: a local copy of the Multi30k .gz files)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh "$@"

mtx=build/bin/mtx
config=configs/tiny.json
run=runs/quickstart
"$mtx" --version
# Tokenizer + encoded corpus (cached: a second run reuses them).
"$mtx" prepare --config "$config"
# A fresh short training run each time (about a minute on 2 cores): epoch lines, best.pt, curve.svg.
rm -rf "$run"
"$mtx" train --config "$config" --out "$run"
"$mtx" info --ckpt "$run/best.pt" | head -n 12
echo "quickstart: trained $run/best.pt (curve: $run/curve.svg). Translation and scoring join this script as they land."
