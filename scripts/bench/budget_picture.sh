#!/usr/bin/env bash
# The time-to-BLEU picture of docs/results.md: test_2016_flickr BLEU (beam 5) against training minutes for
# each budget recipe, from the curve.tsv of its scripts/bench/budget.sh --curve run, next to the PyTorch peer's
# 60-minute figure. Drawn by mtx itself (mtx plot lines).
#
#   scripts/bench/budget_picture.sh [--out docs/time-to-bleu.svg] LABEL=RUN_DIR|LABEL=FILE.tsv ...
# (a FILE.tsv such as docs/curves/*.tsv: a curve kept in the repository, as runs/ is not)
#   e.g. scripts/bench/budget_picture.sh "quick.json (5 min)=runs/budget/quick-base" \
#          "cpu-15min.json (15 min)=runs/budget/15min" "cpu-hour.json (60 min)=runs/budget/hour"
set -euo pipefail
cd "$(dirname "$0")/../.."
out=docs/time-to-bleu.svg
mtx=${MTX:-build/bin/mtx}
series=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    *=*.tsv) series+=(--series "$1"); shift ;;
    *=*) series+=(--series "${1%%=*}=${1#*=}/curve.tsv"); shift ;;
    *) echo "budget_picture.sh: expected LABEL=RUN_DIR, got $1" >&2; exit 2 ;;
  esac
done
[[ ${#series[@]} -gt 0 ]] || { echo "usage: scripts/bench/budget_picture.sh [--out FILE] LABEL=RUN_DIR ..." >&2; exit 2; }
"$mtx" plot lines "${series[@]}" --point "PyTorch peer, 60 min=60,35.95" --x minutes --y bleu \
  --title "BLEU against training minutes (2 CPU threads; test_2016_flickr, beam 5)" \
  --x-label "minutes of training" --y-label "BLEU (cased, 13a)" --out "$out"
