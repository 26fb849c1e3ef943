#!/usr/bin/env bash
# BLEU for a wall-clock budget: trains a recipe for MINUTES (its own train.max_minutes, or --minutes), on
# 2 threads, then scores its checkpoints on test_2016_flickr with beam 5 and the recipe's length penalty:
# best.pt (best validation BLEU), last.pt and avg.pt when the recipe averages. Appends one JSON row per run
# to OUT/results.jsonl. The recipe's pick -- what its config says to ship -- is chosen on the validation
# set: avg.pt when train.average_last is set, otherwise best.pt (lowest validation loss, or highest validation
# BLEU, as the config says; a cosine or linear run's final model is among the candidates).
# --curve N also validates every N updates and keeps those checkpoints, then scores each with beam 5 on
# test_2016_flickr: OUT/NAME/curve.tsv (minutes, update, val_loss, bleu) is the time-to-BLEU curve of the run,
# ending at the pick's score (the validations cost the run a few seconds each).
#
#   scripts/bench/budget.sh --config CONFIG --name NAME [--minutes M] [--curve N] [--out runs/budget]
#                           [--repeat] [--nproc N] [--set section.key=value ...]
# --nproc N trains in N processes of 2/N threads each (mtx train --nproc; docs/distributed.md), with
# train.max_tokens per process: set it to the recipe's budget / N to keep the tokens per update.
#
# Run nothing else on the machine meanwhile: the budget is wall-clock time. Preparing the tokenizer and the
# encoded corpus (mtx prepare, cached in the data directory) happens before the clock starts, as in the
# quickstart. MTX=build-torch2/bin/mtx measures the 2.x build.
set -euo pipefail
cd "$(dirname "$0")/../.."

config=""
name=""
minutes=""
out=runs/budget
repeat=0
curve=0
sets=()
nproc=1
mtx=${MTX:-build/bin/mtx}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --config) config=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --minutes) minutes=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --repeat) repeat=1; shift ;;
    --curve) curve=$2; shift 2 ;;
    --nproc) nproc=$2; shift 2 ;;
    --set) sets+=(--set "$2"); shift 2 ;;
    *) echo "budget.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -n $config && -n $name ]] || { echo "usage: scripts/bench/budget.sh --config CONFIG --name NAME [--minutes M] [--set k=v ...]" >&2; exit 2; }
[[ -x $mtx ]] || { echo "budget.sh: $mtx not built (scripts/build.sh)" >&2; exit 1; }
[[ -n $minutes ]] && sets+=(--set "train.max_minutes=$minutes")
(( nproc >= 1 && nproc <= 2 )) || { echo "budget.sh: --nproc is 1 or 2 on this 2-core machine kind" >&2; exit 2; }
sets+=(--set train.threads=$((2 / nproc)))
train_args=()
(( nproc > 1 )) && train_args=(--nproc "$nproc")
(( curve > 0 )) && sets+=(--set train.validate_every="$curve" --set train.keep_last=1000)

dir=$out/$name
if [[ -d $dir && $repeat == 0 ]]; then echo "budget.sh: $dir exists (--repeat to train again)" >&2; exit 2; fi
rm -rf "$dir"
mkdir -p "$dir"
"$mtx" info --config "$config" "${sets[@]}" > "$dir/info.json"
data_dir=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['config']['data']['dir'])" "$dir/info.json")
[[ -f $out/test.de ]] || zcat "$data_dir/test_2016_flickr.de.gz" > "$out/test.de"
[[ -f $out/test.en ]] || zcat "$data_dir/test_2016_flickr.en.gz" > "$out/test.en"

"$mtx" --log-level warn prepare --config "$config" "${sets[@]}"
start=$(date +%s.%N)
"$mtx" train --config "$config" "${sets[@]}" "${train_args[@]}" --out "$dir" > "$dir/train.log" 2>&1
end=$(date +%s.%N)

alpha=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['config']['decode']['alpha'])" "$dir/info.json")
for ckpt in best last avg; do
  [[ -f $dir/$ckpt.pt ]] || continue
  "$mtx" eval --ckpt "$dir/$ckpt.pt" --src "$out/test.de" --ref "$out/test.en" --metric bleu,chrf --beam 5 --alpha "$alpha" \
    --threads 2 --json --output "$dir/test.$ckpt.en" > "$dir/test.$ckpt.json" 2> "$dir/eval.$ckpt.log"
done

if (( curve > 0 )); then
  for f in "$dir"/step-*.pt; do
    step=${f##*/step-}; step=${step%.pt}
    "$mtx" eval --ckpt "$f" --src "$out/test.de" --ref "$out/test.en" --metric bleu --beam 5 --alpha "$alpha" \
      --threads 2 --json > "$dir/curve.$step.json" 2> /dev/null
  done
fi

python3 - "$name" "$config" "$dir" "$start" "$end" "${sets[*]}" "$nproc" "$mtx" >> "$out/results.jsonl" <<'EOF'
import glob, json, os, sys
name, config, d, start, end, sets = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
nproc, mtx = int(sys.argv[7]), sys.argv[8]
cfg = json.load(open(f"{d}/info.json"))["config"]
rows = [json.loads(l) for l in open(f"{d}/metrics.jsonl") if l.strip()]
valid = [r for r in rows if r.get("type") == "valid"]
train = [r for r in rows if r.get("type") == "train"]
points = []
for p in glob.glob(f"{d}/curve.*.json"):
    step = int(p.split(".")[-2])
    bleu = next(json.loads(l)["score"] for l in open(p) if l.strip())
    row = next(r for r in valid if r["step"] == step)
    points.append((row["elapsed_s"] / 60, step, row["val_loss"], bleu))
if points:
    with open(f"{d}/curve.tsv", "w") as f:
        f.write("minutes\tupdate\tval_loss\tbleu\n")
        for m, step, loss, bleu in sorted(points):
            f.write(f"{m:.3f}\t{step}\t{loss:.4f}\t{bleu:.2f}\n")
scores = {}
for ckpt in ("best", "last", "avg"):
    p = f"{d}/test.{ckpt}.json"
    if os.path.exists(p):
        s = [json.loads(l) for l in open(p) if l.strip()]
        scores[ckpt] = {x["name"].split("|")[0]: x["score"] for x in s}
        scores[ckpt]["signature"] = next(x["signature"] for x in s if x["name"] == "BLEU")
pick = "avg" if cfg["train"].get("average_last", 0) > 0 and "avg" in scores else "best"
print(json.dumps({
    "name": name, "config": config, "sets": sets, "nproc": nproc, "mtx": mtx,
    "average_k": next((r["k"] for r in rows if r.get("type") == "average_pick"), None),
    "minutes": cfg["train"]["max_minutes"], "wall_s": round(end - start, 1),
    "updates": max((r["step"] for r in rows if "step" in r), default=0),
    "epochs": max((r.get("epoch", 0) for r in rows), default=0),
    "best_val_bleu": max((r.get("val_bleu", 0) for r in valid), default=None),
    "last_val_bleu": valid[-1].get("val_bleu") if valid else None,
    "tok_per_s": train[-1].get("tokens_per_s") if train else None,
    "pick": pick, "bleu": scores.get(pick, {}).get("BLEU"),
    "curve": [[round(m, 2), step, round(b, 2)] for m, step, _, b in sorted(points)],
    "scores": {k: {"BLEU": v.get("BLEU"), "chrF2": v.get("chrF2")} for k, v in scores.items()},
    "signature": scores.get(pick, {}).get("signature"),
}))
EOF
tail -1 "$out/results.jsonl"
