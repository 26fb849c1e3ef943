#!/usr/bin/env bash
# The small trained model that the checks on a trained model share (ctest Fixture.QuickModel, the setup of
# Int8.BleuOnATrainedModel and Align.KnownWordPairsLineUpOnATrainedModel): configs/quick.json trained for a fixed
# number of updates into OUT/run/last.pt, once per ctest run.
#   scripts/checks/quick_model.sh --out DIR [--steps N]     (env MTX: the binary; DATA: Multi30k)
set -euo pipefail
cd "$(dirname "$0")/../.."
mtx=${MTX:-build/bin/mtx}
data=${DATA:-data/multi30k}
steps=700 out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "usage: $0 --out DIR [--steps N]" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || { echo "usage: $0 --out DIR [--steps N]" >&2; exit 2; }
[ -f "$data/train.de.gz" ] || { echo "quick_model: no Multi30k at $data (scripts/get_multi30k.sh data/multi30k)" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out"
echo "quick_model: training configs/quick.json for $steps updates into $out/run"
"$mtx" --log-level warn train --config configs/quick.json --set data.dir="$data" --set data.cache_dir="$out/cache" \
  --set train.max_minutes=0 --set train.max_steps="$steps" --set train.threads=2 --out "$out/run" > "$out/train.log" 2>&1 ||
  { echo "quick_model: FAIL: training: $(tail -3 "$out/train.log")" >&2; exit 1; }
echo "quick_model: $out/run/last.pt"
