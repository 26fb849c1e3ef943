#!/usr/bin/env bash
# The main job end to end on a fresh Debian bookworm machine: install, build, fetch Multi30k,
# then train configs/quick.json for 5 minutes on the CPU (33-36 BLEU on test_2016_flickr on 2 cores, by the
# updates the CPU makes in those minutes: README),
# translate the test set with it and score the translations (BLEU, chrF).
#   scripts/quickstart.sh [--mirror DIR]     (DIR: a local copy of the Multi30k .gz files)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh --run-only "$@"   # the binary alone: no test-only packages, no test binary

mtx=build/bin/mtx
config=configs/quick.json
run=runs/quickstart
"$mtx" --version
# Tokenizer + encoded corpus (cached: a second run reuses them).
"$mtx" prepare --config "$config"
# A fresh training run each time: 5 minutes of wall-clock time (the config's train.max_minutes), epoch lines,
# best.pt, curve.svg.
rm -rf "$run"
"$mtx" train --config "$config" --out "$run"
"$mtx" info --ckpt "$run/best.pt" > "$run/info.json"
head -n 12 "$run/info.json"
# Translate the first test sentences with the model just trained, next to the references.
data=data/multi30k   # where bootstrap.sh put Multi30k (configs/quick.json's data.dir)
zcat "$data/test_2016_flickr.de.gz" > "$run/test.de"
zcat "$data/test_2016_flickr.en.gz" > "$run/test.en"
head -n 5 "$run/test.de" > "$run/test5.de"
head -n 5 "$run/test.en" > "$run/test5.ref.en"
"$mtx" translate --ckpt "$run/best.pt" --beam 5 < "$run/test5.de" > "$run/test5.en"
paste -d '\n' "$run/test5.de" "$run/test5.en" "$run/test5.ref.en" | awk '{ printf "%s%s\n", (NR % 3 == 1 ? "de:  " : NR % 3 == 2 ? "mtx: " : "ref: "), $0; if (NR % 3 == 0) print "" }'
# The whole test set, translated and scored as sacreBLEU would (cased BLEU and chrF, with signatures).
"$mtx" translate --ckpt "$run/best.pt" --input "$run/test.de" --output "$run/test.hyp.en"
"$mtx" eval --metric bleu,chrf --ref "$run/test.en" < "$run/test.hyp.en"
echo "quickstart: trained $run/best.pt (curve: $run/curve.svg), translated test_2016_flickr into $run/test.hyp.en and scored it."
cat <<'EOF'

Going further (2 CPU threads; docs/results.md has each recipe's curve and ablations):
  build/bin/mtx train --config configs/cpu-15min.json    # 15 minutes
  build/bin/mtx train --config configs/cpu-hour.json     # one hour, one model
  build/bin/mtx translate --ckpt runs/cpu-hour/avg.pt < de.txt > en.txt
The best BLEU a CPU hour buys: two such models at once, one thread each, translated as an ensemble
(length penalty chosen on the validation set; scripts/bench/budget_ensemble.sh does all of it):
  build/bin/mtx train --config configs/cpu-hour.json --set train.threads=1 --set train.seed=1 --out runs/h1 &
  build/bin/mtx train --config configs/cpu-hour.json --set train.threads=1 --set train.seed=2 --out runs/h2; wait
  build/bin/mtx translate --ckpt runs/h1/avg.pt --ckpt runs/h2/avg.pt --alpha 1.8 < de.txt > en.txt
On a GPU, with the 2.x build (README, "Which build"): configs/base.json, the tutorial's full-size model.
EOF
