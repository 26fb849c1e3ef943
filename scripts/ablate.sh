#!/usr/bin/env bash
# Training ablations of a recipe: each variant changes one or two settings with --set, trains for a fixed
# number of epochs (the same data for every variant, so results do not depend on machine load), and is
# scored on test_2016_flickr with the recipe's beam search. Writes <out>/table.md and <out>/results.jsonl.
#
#   scripts/ablate.sh [--config configs/cpu-hour.json] [--epochs 4] [--threads 1] [--parallel 2]
#                     [--out runs/ablate] [--only name,name]
#
# --parallel 2 --threads 1 runs two variants at a time on one thread each (on 2 cores this finishes the
# table sooner than one variant at a time on two threads; the numbers are the same either way).
set -euo pipefail
cd "$(dirname "$0")/.."

config=configs/cpu-hour.json
epochs=4
threads=1
parallel=2
out=runs/ablate
only=""
mtx=${MTX:-build/bin/mtx}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --config) config=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --parallel) parallel=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    *) echo "ablate.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

# name | what changes | --set overrides (space-separated)
variants=(
  "baseline|the recipe as it is|"
  "no-label-smoothing|label smoothing 0.1 -> 0|train.label_smoothing=0"
  "dropout-0.1|dropout 0.2 -> 0.1|model.dropout=0.1"
  "lr-factor-1|Noam factor 1.5 -> 1.0 (the peer's)|train.lr_factor=1.0"
  "warmup-4000|warm-up 1000 -> 4000 updates (the paper's)|train.warmup_steps=4000"
  "untied|separate source, target and output embeddings|model.share_embeddings=false model.tie_output=false"
  "vocab-16k|joint vocabulary 8000 -> 16000 pieces|tokenizer.vocab_size=16000"
  "vocab-4k|joint vocabulary 8000 -> 4000 pieces|tokenizer.vocab_size=4000"
  "batch-8k|token budget 4096 -> 8192 per batch|train.max_tokens=8192"
  "post-norm|pre-norm -> post-norm|model.norm=post"
)

[[ -x $mtx ]] || { echo "ablate.sh: $mtx not built (scripts/build.sh)" >&2; exit 1; }
data_dir=$("$mtx" info --config "$config" | python3 -c "import json,sys; print(json.load(sys.stdin)['config']['data']['dir'])")
mkdir -p "$out"
[[ -f $out/test.de ]] || zcat "$data_dir/test_2016_flickr.de.gz" > "$out/test.de"
[[ -f $out/test.en ]] || zcat "$data_dir/test_2016_flickr.en.gz" > "$out/test.en"

run_variant() {
  local name=$1 what=$2 sets=$3 dir=$out/$1
  local args=()
  for s in $sets; do args+=(--set "$s"); done
  local start=$SECONDS
  if [[ ! -f $dir/last.pt ]]; then
    "$mtx" train --config "$config" --out "$dir" --set train.max_epochs="$epochs" --set train.max_minutes=0 --set train.cooldown=0 \
      --set train.threads="$threads" --set train.average_last=0 --set train.keep_last=0 "${args[@]}" \
      > "$out/$name.train.log" 2>&1
  fi
  local train_s=$((SECONDS - start))
  "$mtx" eval --ckpt "$dir/last.pt" --src "$out/test.de" --ref "$out/test.en" --metric bleu,chrf \
    --threads "$threads" --json --output "$dir/test.en.hyp" > "$dir/test.json" 2> "$out/$name.eval.log"
  python3 - "$name" "$what" "$dir" "$train_s" >> "$out/results.jsonl" <<'EOF'
import json, sys
name, what, d, secs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
scores = [json.loads(l) for l in open(f"{d}/test.json") if l.strip()]
rows = [json.loads(l) for l in open(f"{d}/metrics.jsonl")]
valid = [r for r in rows if r.get("type") == "valid"]
train = [r for r in rows if r.get("type") == "train"]
print(json.dumps({
    "name": name,
    "change": what,
    "bleu": next(s["score"] for s in scores if s["name"] == "BLEU"),
    "chrf": next(s["score"] for s in scores if s["name"].startswith("chrF")),
    "val_bleu": valid[-1].get("val_bleu") if valid else None,
    "val_loss": valid[-1].get("val_loss") if valid else None,
    "updates": max(r["step"] for r in rows if "step" in r),
    "train_s": secs,
    "tok_per_s": train[-1].get("tokens_per_s") if train else None,
}))
EOF
  echo "ablate.sh: $name done ($(tail -1 "$out/results.jsonl"))"
}

pids=()
for v in "${variants[@]}"; do
  IFS='|' read -r name what sets <<< "$v"
  if [[ -n $only && ",$only," != *",$name,"* ]]; then continue; fi
  grep -q "\"name\": \"$name\"" "$out/results.jsonl" 2>/dev/null && { echo "ablate.sh: $name already scored"; continue; }
  run_variant "$name" "$what" "$sets" &
  pids+=($!)
  if (( ${#pids[@]} >= parallel )); then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
done
wait

python3 - "$out" "$epochs" "$threads" <<'EOF'
import json, sys
out, epochs, threads = sys.argv[1], sys.argv[2], sys.argv[3]
rows = {}
for l in open(f"{out}/results.jsonl"):
    r = json.loads(l)
    rows[r["name"]] = r
base = rows.get("baseline")
lines = [f"Fixed budget: {epochs} epochs per variant, {threads} thread(s) each; test_2016_flickr, beam/alpha of the recipe, last.pt.",
         "", "| variant | change | updates | val BLEU (greedy) | test BLEU | vs baseline | chrF2 | tgt tok/s |", "|---|---|---|---|---|---|---|---|"]
for name, r in rows.items():
    delta = f"{r['bleu'] - base['bleu']:+.2f}" if base and name != "baseline" else ""
    vb = f"{r['val_bleu']:.2f}" if r.get("val_bleu") is not None else "-"
    tps = f"{r['tok_per_s']:.0f}" if r.get("tok_per_s") else "-"
    lines.append(f"| {name} | {r.get('change', '')} | {r['updates']} | {vb} | {r['bleu']:.2f} | {delta} | {r['chrf']:.2f} | {tps} |")
open(f"{out}/table.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
