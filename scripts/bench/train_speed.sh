#!/usr/bin/env bash
# Training speed, mtx vs a PyTorch-Python peer (torch.nn.Transformer on Debian's python3-torch, the
# same LibTorch underneath), back to back on the same batches of the same config:
#   scripts/bench/train_speed.sh [CONFIG] [UPDATES] [THREADS] [ROUNDS]   (default: small.json 60 2 2)
# Both sides are timed over updates 11..UPDATES (the first 10 are warm-up), in ROUNDS alternating
# rounds (peer, mtx, peer, mtx, ...: a noisy machine hits both alike); the best round of each counts.
# Prints target tokens/s for both and the ratio, peak RSS, and the fraction of this machine's fp32
# GEMM rate that mtx's training reaches.
set -euo pipefail
cd "$(dirname "$0")/../.."
config=${1:-configs/small.json}
updates=${2:-60}
threads=${3:-2}
rounds=${4:-2}
skip=10
MTX_EXTRA_PACKAGES="python3-torch python3-numpy" scripts/setup.sh >/dev/null
scripts/build.sh >/dev/null
py=/usr/bin/python3   # Debian's python, where python3-torch lives
mtx=build/bin/mtx
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

common=(--config "$config" --set train.threads="$threads")
$mtx --log-level warn prepare "${common[@]}" --export-batches "$work/batches.bin" --export-limit "$updates"
$mtx info "${common[@]}" > "$work/info.json"
$py -c 'import json,sys; json.dump(json.load(open(sys.argv[1]))["config"], open(sys.argv[2], "w"))' "$work/info.json" "$work/config.json"
vocab=$($py -c 'import json,sys; print(json.load(open(sys.argv[1]))["tokenizer"]["vocab_size"])' "$work/config.json")

for r in $(seq "$rounds"); do
  echo "round $r: peer (torch.nn.Transformer), $updates updates, $threads threads ..." >&2
  /usr/bin/time -f "%M" -o "$work/peer$r.rss" $py scripts/bench/peer_train.py --batches "$work/batches.bin" \
    --config "$work/config.json" --vocab "$vocab" --threads "$threads" --skip "$skip" > "$work/peer$r.json"
  echo "round $r: mtx, $updates updates, $threads threads ..." >&2
  rm -rf "$work/run$r"
  /usr/bin/time -f "%M" -o "$work/mtx$r.rss" $mtx --log-level warn train "${common[@]}" --set train.max_steps="$updates" \
    --set train.log_every="$skip" --set train.keep_last=0 --out "$work/run$r"
done
$py scripts/bench/gemm_rate.py "$threads" > "$work/gemm.json"

$py - "$work" "$config" "$updates" "$threads" "$rounds" "$skip" <<'PY'
import json, sys, numpy as np
work, config, updates, threads, rounds, skip = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7])
peers = [json.load(open(f"{work}/peer{r}.json")) for r in range(1, rounds + 1)]
mtxs = []
for r in range(1, rounds + 1):
    rows = {x["step"]: x for x in map(json.loads, open(f"{work}/run{r}/metrics.jsonl")) if x.get("type") == "train"}
    a, b = rows[skip], rows[updates]
    mtxs.append({"tokens_per_s": (b["tgt_tokens"] - a["tgt_tokens"]) / (b["elapsed_s"] - a["elapsed_s"]),
                 "seconds": b["elapsed_s"] - a["elapsed_s"]})
peer = max(peers, key=lambda p: p["tokens_per_s"])
best = max(mtxs, key=lambda m: m["tokens_per_s"])
mtx_tps = best["tokens_per_s"]
rss = {k: max(int(open(f"{work}/{k}{r}.rss").read().split()[-1]) / 1024 for r in range(1, rounds + 1)) for k in ("peer", "mtx")}
gemm = json.load(open(f"{work}/gemm.json"))["gemm_gflops"]
# Training FLOPs of the padded batches (what is actually computed): forward matmuls x 3.
cfg = json.load(open(f"{work}/config.json")); m = cfg["model"]
d, f, V, E, D = m["d_model"], m["ffn_dim"], cfg["tokenizer"]["vocab_size"], m["encoder_layers"], m["decoder_layers"]
data = np.fromfile(f"{work}/batches.bin", dtype="<i4"); pos, fwd = 5, 0.0
for i in range(int(data[1])):
    b, s, t = (int(x) for x in data[pos:pos + 3]); pos += 3 + b * (s + 2 * t)
    if i < skip: continue
    enc = E * b * s * (2 * 4 * d * d + 2 * 2 * d * f + 2 * 2 * s * d)
    dec = D * (b * t * (2 * 4 * d * d + 2 * 2 * d * d + 2 * 2 * d * f + 2 * 2 * t * d + 2 * 2 * s * d) + b * s * 2 * 2 * d * d)
    fwd += enc + dec + b * t * 2 * d * V
flops_per_s = 3 * fwd / best["seconds"]
print(f"config {config}: updates {skip + 1}..{updates} of the same batches, {threads} threads, best of {rounds} alternating rounds")
print("  rounds, tgt tokens/s: peer " + " ".join(f"{p['tokens_per_s']:.0f}" for p in peers) +
      " | mtx " + " ".join(f"{m['tokens_per_s']:.0f}" for m in mtxs))
print(f"  peer (torch.nn.Transformer): {peer['tokens_per_s']:8.0f} tgt tokens/s   peak RSS {rss['peer']:7.0f} MiB")
print(f"  mtx                        : {mtx_tps:8.0f} tgt tokens/s   peak RSS {rss['mtx']:7.0f} MiB")
print(f"  ratio mtx/peer             : {mtx_tps / peer['tokens_per_s']:.2f}x   (RSS ratio {rss['mtx'] / rss['peer']:.2f})")
print(f"  GEMM fp32 rate             : {gemm:.1f} GFLOP/s; mtx training {flops_per_s / 1e9:.1f} GFLOP/s = {flops_per_s / 1e9 / gemm:.0%} of it")
PY
