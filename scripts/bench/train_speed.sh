#!/usr/bin/env bash
# Training speed: mtx on both LibTorch builds against a PyTorch-Python peer (torch.nn.Transformer) on both
# torches -- mtx on Debian's LibTorch 1.13 (build/), mtx on PyPI's LibTorch 2.x (build-torch2/), the peer on
# Debian's python3-torch 1.13 and on .venv's torch 2.x -- back to back on the same batches of the same config:
#   scripts/bench/train_speed.sh [CONFIG] [UPDATES] [THREADS] [ROUNDS]   (default: small.json 60 2 2)
# Every side is timed over updates 11..UPDATES (the first 10 are warm-up), in ROUNDS alternating rounds (a noisy
# machine hits all alike); the best round of each counts. Prints one table: target tokens/s, ratios, peak RSS,
# and the fraction of each LibTorch's own fp32 GEMM rate that the side reaches.
# MTX_BENCH_TORCH2=0 leaves out the 2.x sides (no .venv, no second build).
set -euo pipefail
cd "$(dirname "$0")/../.."
config=${1:-configs/small.json}
updates=${2:-60}
threads=${3:-2}
rounds=${4:-2}
skip=10
source scripts/bench/sides.sh
py=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

common=(--config "$config" --set train.threads="$threads")
build/bin/mtx --log-level warn prepare "${common[@]}" --export-batches "$work/batches.bin" --export-limit "$updates"
build/bin/mtx info "${common[@]}" > "$work/info.json"
$py -c 'import json,sys; json.dump(json.load(open(sys.argv[1]))["config"], open(sys.argv[2], "w"))' "$work/info.json" "$work/config.json"
vocab=$($py -c 'import json,sys; print(json.load(open(sys.argv[1]))["tokenizer"]["vocab_size"])' "$work/config.json")

for r in $(seq "$rounds"); do
  for side in "${sides[@]}"; do
    IFS='|' read -r kind torch exe <<< "$side"
    name=$kind-$torch
    echo "round $r: $name, $updates updates, $threads threads ..." >&2
    if [ "$kind" = peer ]; then
      /usr/bin/time -f "%M" -o "$work/$name.$r.rss" "$exe" scripts/bench/peer_train.py --batches "$work/batches.bin" \
        --config "$work/config.json" --vocab "$vocab" --threads "$threads" --skip "$skip" > "$work/$name.$r.json"
    else
      rm -rf "$work/run-$name.$r"
      /usr/bin/time -f "%M" -o "$work/$name.$r.rss" "$exe" --log-level warn train "${common[@]}" \
        --set train.max_steps="$updates" --set train.log_every="$skip" --set train.keep_last=0 --out "$work/run-$name.$r"
    fi
  done
done
$py scripts/bench/gemm_rate.py "$threads" > "$work/gemm-1.13.json"
if [ "${MTX_BENCH_TORCH2:-1}" = 1 ]; then .venv/bin/python scripts/bench/gemm_rate.py "$threads" > "$work/gemm-2.x.json"; fi
versions=$(for side in "${sides[@]}"; do IFS='|' read -r kind torch exe <<< "$side"
  if [ "$kind" = mtx ]; then "$exe" --version | sed -n 's/^LibTorch /mtx-'"$torch"'=/p'
  else "$exe" -c 'import sys, torch; print(f"peer-{sys.argv[1]}={torch.__version__}")' "$torch"; fi; done | tr '\n' ' ')

$py - "$work" "$config" "$updates" "$threads" "$rounds" "$skip" "$versions" "${sides[@]}" <<'PY'
import json, sys, numpy as np
work, config, updates, threads, rounds, skip, versions = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7]), sys.argv[7]
sides = [s.split("|")[:2] for s in sys.argv[8:]]
version = dict(v.split("=", 1) for v in versions.split())
cfg = json.load(open(f"{work}/config.json")); m = cfg["model"]

def result(kind, torch, r):
    name = f"{kind}-{torch}"
    if kind == "peer":
        p = json.load(open(f"{work}/{name}.{r}.json"))
        out = {"tokens_per_s": p["tokens_per_s"], "seconds": p["seconds"], "tokens": p["tgt_tokens"]}
    else:
        rows = {x["step"]: x for x in map(json.loads, open(f"{work}/run-{name}.{r}/metrics.jsonl")) if x.get("type") == "train"}
        a, b = rows[skip], rows[updates]
        out = {"seconds": b["elapsed_s"] - a["elapsed_s"], "tokens": b["tgt_tokens"] - a["tgt_tokens"]}
        out["tokens_per_s"] = out["tokens"] / out["seconds"]
    out["rss"] = int(open(f"{work}/{name}.{r}.rss").read().split()[-1]) / 1024
    return out

# Training FLOPs of the padded batches (what is actually computed): forward matmuls x 3.
d, f, V, E, D = m["d_model"], m["ffn_dim"], cfg["tokenizer"]["vocab_size"], m["encoder_layers"], m["decoder_layers"]
data = np.fromfile(f"{work}/batches.bin", dtype="<i4"); pos, fwd = 5, 0.0
for i in range(int(data[1])):
    b, s, t = (int(x) for x in data[pos:pos + 3]); pos += 3 + b * (s + 2 * t)
    if i < skip: continue
    enc = E * b * s * (2 * 4 * d * d + 2 * 2 * d * f + 2 * 2 * s * d)
    dec = D * (b * t * (2 * 4 * d * d + 2 * 2 * d * d + 2 * 2 * d * f + 2 * 2 * t * d + 2 * 2 * s * d) + b * s * 2 * 2 * d * d)
    fwd += enc + dec + b * t * 2 * d * V
gemm = {t: json.load(open(f"{work}/gemm-{t}.json"))["gemm_gflops"] for k, t in sides if k == "peer"}

best, rounds_tps, rss = {}, {}, {}
for kind, torch in sides:
    rs = [result(kind, torch, r) for r in range(1, rounds + 1)]
    best[(kind, torch)] = max(rs, key=lambda x: x["tokens_per_s"])
    rounds_tps[(kind, torch)] = " ".join(f"{x['tokens_per_s']:.0f}" for x in rs)
    rss[(kind, torch)] = max(x["rss"] for x in rs)
ref = best[("peer", "1.13")]["tokens_per_s"]
print(f"config {config}: updates {skip + 1}..{updates} of the same batches, {threads} threads, best of {rounds} alternating rounds")
print(f"| side | LibTorch | tgt tokens/s (rounds) | vs peer 1.13 | vs peer, same torch | peak RSS MiB | GEMM GFLOP/s | share of GEMM |")
print(f"|---|---|---|---|---|---|---|---|")
for kind, torch in sides:
    b = best[(kind, torch)]
    same = best.get(("peer", torch), {}).get("tokens_per_s")
    flops = 3 * fwd / b["seconds"] / 1e9
    label = "mtx" if kind == "mtx" else "peer (torch.nn.Transformer)"
    print(f"| {label} | {version.get(f'{kind}-{torch}', torch)} | {b['tokens_per_s']:.0f} ({rounds_tps[(kind, torch)]}) | "
          f"{b['tokens_per_s'] / ref:.2f}x | {b['tokens_per_s'] / same:.2f}x | {rss[(kind, torch)]:.0f} | "
          f"{gemm[torch]:.1f} | {flops / gemm[torch]:.0%} |")
tokens = {k: v["tokens"] for k, v in best.items()}
if len(set(tokens.values())) != 1:
    print(f"warning: the sides trained on different target-token counts: {tokens}")
PY
