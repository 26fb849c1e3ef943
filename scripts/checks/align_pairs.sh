#!/usr/bin/env bash
# Word alignments on a small trained model (ctest Align.KnownWordPairsLineUpOnATrainedModel): trains
# configs/quick.json for a fixed number of updates, translates the hand-made sentences of tests/fixtures/align with
# `mtx translate --align`, and fails unless at least --min percent of the gold word pairs whose English word the
# translation uses line up (scripts/checks/align_score.py). The server's "alignment": true reads the same code.
#   scripts/checks/align_pairs.sh [--steps N] [--min PERCENT] [--work DIR]   (env MTX: the binary; DATA: Multi30k)
set -euo pipefail
cd "$(dirname "$0")/../.."
mtx=${MTX:-build/bin/mtx}
data=${DATA:-data/multi30k}
steps=500 min=60 work=""
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --min) min=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    *) echo "usage: $0 [--steps N] [--min PERCENT] [--work DIR]" >&2; exit 2 ;;
  esac
done
[ -n "$work" ] || { work=$(mktemp -d); trap 'rm -rf "$work"' EXIT; }
mkdir -p "$work"
fixtures=tests/fixtures/align
"$mtx" --log-level warn train --config configs/quick.json --set data.dir="$data" --set data.cache_dir="$work/cache" \
  --set train.max_minutes=0 --set train.max_steps="$steps" --set train.threads=2 --out "$work/run" > "$work/train.log" 2>&1 ||
  { echo "align_pairs: FAIL: training: $(tail -3 "$work/train.log")" >&2; exit 1; }
"$mtx" --log-level warn translate --ckpt "$work/run/last.pt" --align < "$fixtures/sentences.de" > "$work/aligned.txt"
cat "$work/aligned.txt"
python3 scripts/checks/align_score.py "$fixtures/sentences.de" "$fixtures/pairs.tsv" "$work/aligned.txt" --min "$min"
