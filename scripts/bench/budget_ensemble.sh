#!/usr/bin/env bash
# An ensemble for a wall-clock budget: N members of one recipe trained at the same time, each its own process
# on 2/N threads with its own seed (1..N), for the recipe's minutes (train.max_minutes, or --minutes); then
# each member's pick (avg.pt when the recipe averages, otherwise best.pt) and the ensemble of the picks
# (`mtx eval --ckpt A --ckpt B`: their log-probabilities averaged at each step) are scored on the validation
# set and test_2016_flickr with beam 5 and the recipe's length penalty; then the ensemble's length penalty is
# chosen on the validation set from --alphas and the ensemble scored on test with it: that is the pick.
# Appends one JSON row to OUT/results.jsonl ("pick": "ensemble"); the members' runs are OUT/NAME/m1, m2, ...
#
#   scripts/bench/budget_ensemble.sh --config CONFIG --name NAME [--members 2] [--minutes M] [--out runs/budget]
#                                    [--alphas "1.0 1.4 1.8 2.4 3.0"] [--repeat] [--score-only] [--curve] [--set k=v ...]
# --score-only scores the members already trained in OUT/NAME again (e.g. with a newer mtx).
# --curve keeps every step checkpoint of the members (train.keep_last=1000; the recipe's validations and its
# averaging are unchanged: keep_last only deletes older files) and scores the ensemble of the members'
# checkpoints of each validation step on test_2016_flickr (beam 5, the chosen length penalty):
# OUT/NAME/curve.tsv (minutes, update, val_loss, bleu; minutes = the later member's), the ensemble's
# time-to-BLEU curve, ending at the pick's point (the run's wall-clock minutes).
# Run nothing else on the machine meanwhile: the budget is wall-clock time. MTX=... picks the binary.
set -euo pipefail
cd "$(dirname "$0")/../.."

config=""
name=""
minutes=""
members=2
out=runs/budget
repeat=0
score_only=0
curve=0
alphas="1.0 1.4 1.8 2.4 3.0"
sets=()
mtx=${MTX:-build/bin/mtx}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --config) config=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --members) members=$2; shift 2 ;;
    --minutes) minutes=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --repeat) repeat=1; shift ;;
    --score-only) score_only=1; shift ;;
    --curve) curve=1; shift ;;
    --alphas) alphas=$2; shift 2 ;;
    --set) sets+=(--set "$2"); shift 2 ;;
    *) echo "budget_ensemble.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -n $config && -n $name ]] || { echo "usage: scripts/bench/budget_ensemble.sh --config CONFIG --name NAME [--members N] [--set k=v ...]" >&2; exit 2; }
[[ -x $mtx ]] || { echo "budget_ensemble.sh: $mtx not built (scripts/build.sh)" >&2; exit 1; }
(( members == 1 || members == 2 )) || { echo "budget_ensemble.sh: --members is 1 or 2 on this 2-core machine kind" >&2; exit 2; }
[[ -n $minutes ]] && sets+=(--set "train.max_minutes=$minutes")
sets+=(--set train.threads=$((2 / members)))
(( curve )) && sets+=(--set train.keep_last=1000)

dir=$out/$name
if (( score_only == 0 )); then
  if [[ -d $dir && $repeat == 0 ]]; then echo "budget_ensemble.sh: $dir exists (--repeat to train again)" >&2; exit 2; fi
  rm -rf "$dir"
  mkdir -p "$dir"
  "$mtx" info --config "$config" "${sets[@]}" > "$dir/info.json"
  "$mtx" --log-level warn prepare --config "$config" "${sets[@]}"  # once, before the clock and the members
  start=$(date +%s.%N)
  pids=()
  for ((m = 1; m <= members; m++)); do
    "$mtx" train --config "$config" "${sets[@]}" --set train.seed=$m --out "$dir/m$m" > "$dir/m$m.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  end=$(date +%s.%N)
  echo "$start $end" > "$dir/clock"
fi
[[ -f $dir/clock ]] || { echo "budget_ensemble.sh: $dir has no trained members" >&2; exit 1; }
read -r start end < "$dir/clock"

data_dir=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['config']['data']['dir'])" "$dir/info.json")
alpha=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['config']['decode']['alpha'])" "$dir/info.json")
for s in val test_2016_flickr; do
  for l in de en; do [[ -f $dir/$s.$l ]] || zcat "$data_dir/$s.$l.gz" > "$dir/$s.$l"; done
done
picks=()
for ((m = 1; m <= members; m++)); do
  if [[ -f $dir/m$m/avg.pt ]]; then picks+=("$dir/m$m/avg.pt"); else picks+=("$dir/m$m/best.pt"); fi
done
score() {  # label split alpha checkpoint...
  local label=$1 split=$2 a=$3; shift 3
  local args=(); for c in "$@"; do args+=(--ckpt "$c"); done
  "$mtx" eval "${args[@]}" --src "$dir/$split.de" --ref "$dir/$split.en" --metric bleu,chrf --beam 5 --alpha "$a" \
    --threads 2 --json --output "$dir/$split.$label.en" > "$dir/$split.$label.json" 2> "$dir/eval.$split.$label.log"
}
for split in val test_2016_flickr; do
  for ((m = 1; m <= members; m++)); do score "m$m" "$split" "$alpha" "${picks[m - 1]}"; done
  if (( members > 1 )); then score ensemble "$split" "$alpha" "${picks[@]}"; fi
done
label=ensemble; (( members > 1 )) || label=m1
for a in $alphas; do score "$label.alpha$a" val "$a" "${picks[@]}"; done
best_alpha=$(python3 -c '
import json, sys
d, label, grid = sys.argv[1], sys.argv[2], sys.argv[3:]
bleu = lambda a: next(json.loads(l)["score"] for l in open(f"{d}/val.{label}.alpha{a}.json") if l.strip())
print(max(grid, key=bleu))' "$dir" "$label" $alphas)
score "$label.alpha$best_alpha" test_2016_flickr "$best_alpha" "${picks[@]}"

if (( curve )); then
  for f in "$dir"/m1/step-*.pt; do
    step=${f##*/step-}; step=${step%.pt}
    ckpts=(); for ((m = 1; m <= members; m++)); do [[ -f $dir/m$m/step-$step.pt ]] && ckpts+=("$dir/m$m/step-$step.pt"); done
    (( ${#ckpts[@]} == members )) || continue  # a step that not every member reached
    score "curve.$step" test_2016_flickr "$best_alpha" "${ckpts[@]}"
  done
  python3 - "$dir" "$members" "$start" "$end" "$label.alpha$best_alpha" <<'PY'
import glob, json, sys
d, members, start, end, pick = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
valid, last = [], 0
for m in range(1, members + 1):
    rows = [json.loads(l) for l in open(f"{d}/m{m}/metrics.jsonl") if l.strip()]
    valid.append({r["step"]: r for r in rows if r.get("type") == "valid"})
    last = max([last] + [r["step"] for r in rows if "step" in r])
bleu = lambda p: next(json.loads(l)["score"] for l in open(p) if l.strip())
points = []
for p in glob.glob(f"{d}/test_2016_flickr.curve.*.json"):
    step = int(p.split(".")[-2])
    rows = [v[step] for v in valid]
    points.append((max(r["elapsed_s"] for r in rows) / 60, step, sum(r["val_loss"] for r in rows) / members, bleu(p)))
points.sort()
final = bleu(f"{d}/test_2016_flickr.{pick}.json")
with open(f"{d}/curve.tsv", "w") as f:
    f.write("minutes\tupdate\tval_loss\tbleu\n")
    for m, step, loss, b in points:
        f.write(f"{m:.3f}\t{step}\t{loss:.4f}\t{b:.2f}\n")
    f.write(f"{(end - start) / 60:.3f}\t{last}\tnan\t{final:.2f}\n")
print(open(f"{d}/curve.tsv").read(), end="")
PY
fi

python3 - "$name" "$config" "$dir" "$start" "$end" "${sets[*]}" "$members" "$mtx" "$alpha" "$best_alpha" "$alphas" "${picks[@]}" >> "$out/results.jsonl" <<'EOF'
import json, os, sys
name, config, d, start, end, sets = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
members, mtx, recipe_alpha, best_alpha = int(sys.argv[7]), sys.argv[8], sys.argv[9], sys.argv[10]
grid, picks = sys.argv[11].split(), sys.argv[12:]
cfg = json.load(open(f"{d}/info.json"))["config"]

def scores(split, label):
    p = f"{d}/{split}.{label}.json"
    if not os.path.exists(p):
        return None
    s = [json.loads(l) for l in open(p) if l.strip()]
    out = {x["name"].split("|")[0]: x["score"] for x in s}
    out["signature"] = next(x["signature"] for x in s if x["name"] == "BLEU")
    return out

runs = []
for m in range(1, members + 1):
    rows = [json.loads(l) for l in open(f"{d}/m{m}/metrics.jsonl") if l.strip()]
    train = [r for r in rows if r.get("type") == "train"]
    runs.append({
        "seed": m, "pick": os.path.basename(picks[m - 1]),
        "average_k": next((r["k"] for r in rows if r.get("type") == "average_pick"), None),
        "updates": max((r["step"] for r in rows if "step" in r), default=0),
        "epochs": max((r.get("epoch", 0) for r in rows), default=0),
        "tok_per_s": train[-1].get("tokens_per_s") if train else None,
        "val": scores("val", f"m{m}"), "test": scores("test_2016_flickr", f"m{m}"),
    })
label = "ensemble" if members > 1 else "m1"
at_recipe = {"alpha": float(recipe_alpha), "val_bleu": scores("val", label)["BLEU"],
             "test_bleu": scores("test_2016_flickr", label)["BLEU"]}
test = scores("test_2016_flickr", f"{label}.alpha{best_alpha}")
print(json.dumps({
    "name": name, "config": config, "sets": sets, "members": members, "mtx": mtx,
    "minutes": cfg["train"]["max_minutes"], "wall_s": round(end - start, 1),
    "pick": label, "alpha": float(best_alpha), "bleu": test["BLEU"], "chrF2": test.get("chrF2"),
    "val_bleu_by_alpha": {a: scores("val", f"{label}.alpha{a}")["BLEU"] for a in grid},
    "at_recipe_alpha": at_recipe, "signature": test["signature"], "runs": runs,
}))
EOF
tail -1 "$out/results.jsonl"
