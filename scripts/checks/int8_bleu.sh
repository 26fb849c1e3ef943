#!/usr/bin/env bash
# int8 against float on a small trained model (ctest Int8.BleuOnATrainedModel): trains configs/quick.json for
# a fixed number of updates, then scores test_2016_flickr (beam 5) in float, with --quantize int8 and with int8
# layers and a float output projection, and translates its first 300 lines with a stored int8 bundle (mtx
# quantize), batched and one sentence at a time. Fails unless int8's BLEU is within 0.3 of float's, the stored
# bundle translates exactly as --quantize int8 does, and int8 translations do not depend on the batch.
#   scripts/checks/int8_bleu.sh [--steps N] [--ckpt FILE] [--work DIR]     (env MTX: the binary; DATA: Multi30k)
#     --ckpt FILE: that trained model instead of training one (ctest passes Fixture.QuickModel's)
set -euo pipefail
cd "$(dirname "$0")/../.."
mtx=${MTX:-build/bin/mtx}
data=${DATA:-data/multi30k}
steps=700 work="" given=""
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --ckpt) given=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    *) echo "usage: $0 [--steps N] [--ckpt FILE] [--work DIR]" >&2; exit 2 ;;
  esac
done
[ -n "$work" ] || { work=$(mktemp -d); trap 'rm -rf "$work"' EXIT; }
say() { echo "int8_bleu: $*"; }
fail() { echo "int8_bleu: FAIL: $*" >&2; exit 1; }
[ -f "$data/test_2016_flickr.de.gz" ] || fail "no Multi30k at $data (scripts/get_multi30k.sh data/multi30k)"
zcat "$data/test_2016_flickr.de.gz" > "$work/test.de"
zcat "$data/test_2016_flickr.en.gz" > "$work/test.en"

if [ -n "$given" ]; then
  [ -f "$given" ] || fail "no trained model at $given"
  ckpt=$given
else
  scripts/checks/quick_model.sh --steps "$steps" --out "$work/model" || fail "training failed"
  ckpt=$work/model/run/last.pt
fi

bleu() {  # NAME CKPT [FLAGS...]: BLEU of the checkpoint's test translations (also kept in $work/NAME.en)
  local name=$1 ck=$2; shift 2
  "$mtx" --log-level warn eval --ckpt "$ck" --src "$work/test.de" --ref "$work/test.en" --metric bleu --beam 5 \
    --threads 2 --json --output "$work/$name.en" "$@" > "$work/$name.json" 2> "$work/$name.log" ||
    fail "$name: $(tail -3 "$work/$name.log")"
  python3 -c 'import json,sys; print(round(json.loads(open(sys.argv[1]).readline())["score"], 2))' "$work/$name.json"
}
fp32=$(bleu fp32 "$ckpt")
int8=$(bleu int8 "$ckpt" --quantize int8)
int8_float_out=$(bleu int8-float-output "$ckpt" --quantize int8 --float-output)
"$mtx" --log-level warn quantize --ckpt "$ckpt" --out "$work/int8.pt" || fail "mtx quantize failed"
size_f=$(stat -c %s "$ckpt") size_q=$(stat -c %s "$work/int8.pt")
say "BLEU fp32 $fp32 | int8 $int8 | int8 layers + float output $int8_float_out"
say "bundle size: float $size_f bytes (with training state), int8 $size_q bytes"
differ=$(paste -d '\t' "$work/fp32.en" "$work/int8.en" | awk -F'\t' '$1 != $2' | wc -l)
say "$differ of $(wc -l < "$work/test.en") lines differ between fp32 and int8"

python3 - "$fp32" "$int8" "$int8_float_out" <<'PY' || exit 1
import sys
fp32, int8, float_out = map(float, sys.argv[1:])
for name, b in (("int8", int8), ("int8 with a float output projection", float_out)):
    if abs(b - fp32) > 0.3:
        sys.exit(f"int8_bleu: FAIL: {name} BLEU {b} is more than 0.3 from fp32's {fp32}")
PY
head -300 "$work/test.de" > "$work/head.de"
"$mtx" --log-level warn translate --ckpt "$work/int8.pt" --beam 5 --threads 2 --batch-tokens 1 < "$work/head.de" > "$work/alone.en" ||
  fail "translate (batch of one) failed"
"$mtx" --log-level warn translate --ckpt "$work/int8.pt" --beam 5 --threads 2 < "$work/head.de" > "$work/batched.en" ||
  fail "translate (batched) failed"
cmp -s "$work/alone.en" "$work/batched.en" ||
  fail "int8 translations depend on the batch: $(diff "$work/alone.en" "$work/batched.en" | head -4)"
say "int8 translations of 300 lines are the same one at a time and batched"
# --quantize int8 translated the whole test set in eval's batches; the stored bundle must give its first 300 lines.
head -300 "$work/int8.en" > "$work/int8-head.en"
cmp -s "$work/int8-head.en" "$work/batched.en" ||
  fail "the stored int8 bundle translates differently from --quantize int8: $(diff "$work/int8-head.en" "$work/batched.en" | head -4)"
say "the stored int8 bundle translates the 300 lines as --quantize int8 does"
say "ok"
