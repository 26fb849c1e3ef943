#!/usr/bin/env bash
# Ablations of a budget recipe at its own budget: each variant changes one lever of CONFIG and trains for the
# config's train.max_minutes on 2 threads (scripts/bench/budget.sh, one run at a time: the budget is
# wall-clock time), then is scored on test_2016_flickr with beam 5. Levers that need no training -- averaging
# the last checkpoints, the length penalty -- are measured on the base run's checkpoints. Ends with the table
# (scripts/bench/budget_table.py) of this series.
#
#   scripts/bench/budget_ablate.sh --config configs/quick.json [--prefix q] [--only name,name] [--out runs/budget]
#                                  [--curve N]
#
# The base run keeps its checkpoints (every epoch end, and every N updates with --curve N) and scores them:
# runs/budget/PREFIX-base/curve.tsv is the recipe's time-to-BLEU curve.
# About (5 + 1) minutes per variant for quick.json, 16 for cpu-15min.json, 62 for cpu-hour.json.
set -euo pipefail
cd "$(dirname "$0")/../.."

config=""
prefix=""
only=""
curve=1000000000
out=runs/budget
mtx=${MTX:-build/bin/mtx}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --config) config=$2; shift 2 ;;
    --prefix) prefix=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --curve) curve=$2; shift 2 ;;
    *) echo "budget_ablate.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -n $config ]] || { echo "usage: scripts/bench/budget_ablate.sh --config CONFIG [--prefix P] [--only names]" >&2; exit 2; }
[[ -n $prefix ]] || prefix=$(basename "$config" .json)

# The recipe's values that the variants scale.
read -r lr warmup tokens vocab dropout d_model layers ffn <<< "$("$mtx" info --config "$config" | python3 -c '
import json, sys
c = json.load(sys.stdin)["config"]
t, m = c["train"], c["model"]
print(t["lr"], t["warmup_steps"], t["max_tokens"], c["tokenizer"]["vocab_size"], m["dropout"], m["d_model"],
      m["encoder_layers"], m["ffn_dim"])')"
half() { python3 -c "print(max(1, int($1 // 2)))"; }
twice() { python3 -c "print(int($1 * 2))"; }
scale() { python3 -c "print('%g' % ($1 * $2))"; }

# name | --set overrides (space-separated)
variants=(
  "base|"
  "lr-x0.5|train.lr=$(scale "$lr" 0.5)"
  "lr-x1.5|train.lr=$(scale "$lr" 1.5)"
  "warmup-x4|train.warmup_steps=$((warmup * 4))"
  "linear|train.schedule=linear"
  "inverse-sqrt|train.schedule=inverse_sqrt"
  "tied|model.share_embeddings=true model.tie_output=true"
  "dropout-0|model.dropout=0"
  "dropout+0.1|model.dropout=$(scale "$dropout" 1 | python3 -c 'import sys; print(round(float(sys.stdin.read()) + 0.1, 3))')"
  "no-label-smoothing|train.label_smoothing=0"
  "batch-x0.5|train.max_tokens=$(half "$tokens")"
  "batch-x2|train.max_tokens=$(twice "$tokens")"
  "vocab-x0.5|tokenizer.vocab_size=$(half "$vocab")"
  "vocab-x2|tokenizer.vocab_size=$(twice "$vocab")"
  "layers+1|model.encoder_layers=$((layers + 1)) model.decoder_layers=$((layers + 1))"
  "ffn-x2|model.ffn_dim=$(twice "$ffn")"
  "width-x1.5|model.d_model=$(( d_model * 3 / 2 ))"
)

for v in "${variants[@]}"; do
  IFS='|' read -r name sets <<< "$v"
  [[ -n $only && ",$only," != *",$name,"* ]] && continue
  run=$prefix-$name
  if grep -q "\"name\": \"$run\"" "$out/results.jsonl" 2>/dev/null; then echo "budget_ablate: $run already scored"; continue; fi
  args=()
  for s in $sets; do args+=(--set "$s"); done
  # The base run keeps checkpoints (every epoch end) for the levers measured without training.
  [[ $name == base ]] && args+=(--curve "$curve")
  echo "budget_ablate: $run ($sets)" >&2
  rm -rf "${out:?}/$run"
  scripts/bench/budget.sh --config "$config" --name "$run" --out "$out" "${args[@]}" > /dev/null
done

# Averaging the last K checkpoints of the base run (epoch ends and the deadline), and the length penalty.
base=$out/$prefix-base
if [[ -d $base ]]; then
  mapfile -t steps < <(ls "$base"/step-*.pt 2>/dev/null | sed 's/.*step-\([0-9]*\)\.pt/\1/' | sort -n)
  for k in 2 3; do
    (( ${#steps[@]} >= k )) || continue
    ckpts=()
    for s in "${steps[@]: -$k}"; do ckpts+=(--ckpt "$base/step-$s.pt"); done
    "$mtx" --log-level warn average "${ckpts[@]}" --out "$base/avg$k.pt"
    printf 'average of the last %s checkpoints (%s): ' "$k" "${steps[*]: -$k}"
    "$mtx" eval --ckpt "$base/avg$k.pt" --src "$out/test.de" --ref "$out/test.en" --metric bleu --beam 5 --alpha 1.0 \
      --threads 2 2> /dev/null
  done
  MTX="$mtx" scripts/decode_grid.sh --beams "1 5" --alphas "0.6 1.0 1.5" "$base/best.pt"
fi

names=""
for v in "${variants[@]}"; do names+="$prefix-${v%%|*},"; done
python3 scripts/bench/budget_table.py "$out/results.jsonl" --only "${names%,}"
