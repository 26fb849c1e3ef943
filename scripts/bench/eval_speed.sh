#!/usr/bin/env bash
# Scoring speed of mtx eval on 100k sentence pairs: the sacreBLEU fixtures' test_2016_flickr references
# and sysB repeated 100 times (the setting the sacreBLEU 2.6.0 figures in issue 5 were measured in).
#   scripts/bench/eval_speed.sh [FIXTURES_DIR]     (default ../shared/eval-fixtures)
# Prints wall-clock seconds and peak RSS per metric, and mtx's start-up cost (loading LibTorch) apart.
set -euo pipefail
cd "$(dirname "$0")/../.."
fixtures=${1:-../shared/eval-fixtures}
scripts/build.sh >/dev/null
mtx=build/bin/mtx
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for i in $(seq 100); do cat "$fixtures/ref.en"; done > "$work/ref.en"
for i in $(seq 100); do cat "$fixtures/sysB.en"; done > "$work/hyp.en"
head -n 1 "$work/ref.en" > "$work/ref1.en"
head -n 1 "$work/hyp.en" > "$work/hyp1.en"
echo "$(wc -l < "$work/hyp.en") segments; $(nproc) cores"
/usr/bin/time -f "start-up (1 segment): %e s, peak RSS %M KB" "$mtx" eval -m bleu --ref "$work/ref1.en" --hyp "$work/hyp1.en" > /dev/null
for m in bleu chrf ter; do
  /usr/bin/time -f "$m: %e s, peak RSS %M KB" "$mtx" eval -m "$m" --ref "$work/ref.en" --hyp "$work/hyp.en" > "$work/$m.txt"
  cat "$work/$m.txt"
done
