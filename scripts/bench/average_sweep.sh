#!/usr/bin/env bash
# How wide to average: for each K, the last K checkpoints of a run (its step-N.pt in update order, then
# last.pt) averaged with `mtx average`, then scored with beam 5 on the validation set and on
# test_2016_flickr. Choose K on the validation column; the test column is for the report.
#   scripts/bench/average_sweep.sh RUN_DIR K [K ...]      e.g. runs/budget/h60-np2-choose 1 2 4 8 14
# Keep the checkpoints with train.keep_last (budget.sh --curve N keeps them all).
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ $# -ge 2 ]] || { echo "usage: scripts/bench/average_sweep.sh RUN_DIR K [K ...]" >&2; exit 2; }
run=$1; shift
mtx=${MTX:-build/bin/mtx}
data=${DATA:-data/multi30k}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
for s in val test_2016_flickr; do
  for l in de en; do zcat "$data/$s.$l.gz" > "$work/$s.$l"; done
done
mapfile -t ckpts < <(ls "$run"/step-*.pt | sed -E 's/.*step-([0-9]+)\.pt$/\1 &/' | sort -n | cut -d' ' -f2-)
ckpts+=("$run/last.pt")
n=${#ckpts[@]}
score() {  # checkpoint, split -> BLEU
  "$mtx" --log-level warn eval --ckpt "$1" --src "$work/$2.de" --ref "$work/$2.en" --metric bleu --beam 5 --json |
    python3 -c 'import json, sys; print("%.2f" % json.loads(sys.stdin.readline())["score"])'
}
printf 'k\tfirst\tval_bleu\ttest_bleu\n'
for k in "$@"; do
  (( k >= 1 && k <= n )) || { echo "average_sweep.sh: k=$k, but $run has $n checkpoints" >&2; exit 2; }
  args=(); for c in "${ckpts[@]:n-k:k}"; do args+=(--ckpt "$c"); done
  "$mtx" --log-level warn average "${args[@]}" --out "$work/avg.pt"
  printf '%s\t%s\t%s\t%s\n' "$k" "$(basename "${ckpts[n-k]}")" "$(score "$work/avg.pt" val)" "$(score "$work/avg.pt" test_2016_flickr)"
done
