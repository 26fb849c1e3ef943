#!/usr/bin/env bash
# Word alignments on a small trained model (ctest Align.KnownWordPairsLineUpOnATrainedModel): trains
# configs/quick.json for a fixed number of updates, translates the hand-made sentences of tests/fixtures/align with
# `mtx translate --align`, and fails unless at least --min percent of the gold word pairs whose English word the
# translation uses line up (scripts/checks/align_score.py). The server's "alignment": true reads the same code.
#   scripts/checks/align_pairs.sh [--steps N] [--min PERCENT] [--ckpt FILE] [--work DIR]   (env MTX: the binary;
#   DATA: Multi30k)
#     --ckpt FILE: that trained model instead of training one (ctest passes Fixture.QuickModel's, 700 updates)
set -euo pipefail
cd "$(dirname "$0")/../.."
mtx=${MTX:-build/bin/mtx}
data=${DATA:-data/multi30k}
steps=700 min=60 work="" given=""
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --min) min=$2; shift 2 ;;
    --ckpt) given=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    *) echo "usage: $0 [--steps N] [--min PERCENT] [--ckpt FILE] [--work DIR]" >&2; exit 2 ;;
  esac
done
[ -n "$work" ] || { work=$(mktemp -d); trap 'rm -rf "$work"' EXIT; }
mkdir -p "$work"
fixtures=tests/fixtures/align
ckpt=$given
if [ -z "$ckpt" ]; then
  scripts/checks/quick_model.sh --steps "$steps" --out "$work/model" ||
    { echo "align_pairs: FAIL: training" >&2; exit 1; }
  ckpt=$work/model/run/last.pt
fi
"$mtx" --log-level warn translate --ckpt "$ckpt" --align < "$fixtures/sentences.de" > "$work/aligned.txt"
cat "$work/aligned.txt"
python3 scripts/checks/align_score.py "$fixtures/sentences.de" "$fixtures/pairs.tsv" "$work/aligned.txt" --min "$min"
