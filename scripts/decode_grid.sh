#!/usr/bin/env bash
# Decoding ablations of one or more checkpoints on test_2016_flickr: beam size x length penalty, with cased
# BLEU, chrF2, the tutorials' BLEU (spaCy tokens, lowercased) and sentences/s (wall clock of
# `mtx translate`, model loading included). Prints a markdown table.
#
#   scripts/decode_grid.sh [--beams "1 2 5 10"] [--alphas "0.6 1.0 1.5"] [--threads 2] CKPT [CKPT ...]
set -euo pipefail
cd "$(dirname "$0")/.."

beams="1 2 5 10"
alphas="0.6 1.0 1.5"
threads=2
data=${MTX_DATA_DIR:-data/multi30k}
mtx=${MTX:-build/bin/mtx}
ckpts=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --beams) beams=$2; shift 2 ;;
    --alphas) alphas=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    -*) echo "decode_grid.sh: unknown option $1" >&2; exit 2 ;;
    *) ckpts+=("$1"); shift ;;
  esac
done
[[ ${#ckpts[@]} -gt 0 ]] || { echo "usage: scripts/decode_grid.sh [--beams ..] [--alphas ..] CKPT..." >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
zcat "$data/test_2016_flickr.de.gz" > "$tmp/test.de"
zcat "$data/test_2016_flickr.en.gz" > "$tmp/test.en"
lines=$(wc -l < "$tmp/test.de")

scores() {  # JSON lines on stdin -> their scores, space-separated
  python3 -c "import json,sys; print(' '.join('%.2f' % json.loads(l)['score'] for l in sys.stdin if l.strip()))"
}
score() {  # $1 = hypothesis file -> "bleu chrf tutorial"
  local bc t
  bc=$("$mtx" eval --metric bleu,chrf --json --ref "$tmp/test.en" < "$1" | scores)
  t=$("$mtx" eval --metric bleu --tokenize spacy --lowercase --smooth-method none --json --ref "$tmp/test.en" < "$1" | scores)
  echo "$bc $t"
}

echo "| checkpoint | beam | alpha | BLEU (cased, 13a) | chrF2 | tutorial BLEU | sentences/s |"
echo "|---|---|---|---|---|---|---|"
for ckpt in "${ckpts[@]}"; do
  for beam in $beams; do
    for alpha in $alphas; do
      start=$(date +%s.%N)
      "$mtx" translate --ckpt "$ckpt" --beam "$beam" --alpha "$alpha" --threads "$threads" \
        --input "$tmp/test.de" --output "$tmp/hyp.en" 2> "$tmp/log"
      end=$(date +%s.%N)
      read -r b c t < <(score "$tmp/hyp.en")
      sps=$(python3 -c "print('%.1f' % ($lines / ($end - $start)))")
      echo "| $ckpt | $beam | $alpha | $b | $c | $t | $sps |"
      [[ $beam == 1 ]] && break  # the length penalty cannot change a greedy search
    done
  done
done
