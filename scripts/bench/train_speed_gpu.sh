#!/usr/bin/env bash
# Training speed on one GPU: mtx against the PyTorch-Python peer (torch.nn.Transformer, peer_train.py) on the
# same card, on exactly the same batches of the same config, in fp32 and with bf16 autocast, back to back:
#   scripts/bench/train_speed_gpu.sh MTX PYTHON [CONFIG] [UPDATES] [ROUNDS]   (default: base.json 110 2)
# MTX is an mtx built with CUDA (scripts/gpu_check.sh builds one against the card's PyTorch), PYTHON a python
# whose torch sees the GPU. Every side is timed over updates 11..UPDATES (the first 10 are warm-up), in ROUNDS
# alternating rounds; the best round of each counts. Peak GPU memory is the largest memory.used that nvidia-smi
# reads every 100 ms while the side runs (the CUDA context included, alike for both sides); the peer also
# reports what its caching allocator held at most.
# Settings: MTX_DATA_DIR (Multi30k; default the config's), MTX_CACHE_DIR (prepared data, shared between runs),
# MTX_BENCH_DEVICE=cpu (a dry run of the plumbing without a GPU: fp32 only, 2 threads), MTX_BENCH_SETS (more
# config settings for both sides, e.g. "train.max_tokens=25000").
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 2 ] || { echo "usage: $0 MTX PYTHON [CONFIG] [UPDATES] [ROUNDS]" >&2; exit 2; }
mtx=$1
py=$2
config=${3:-configs/base.json}
updates=${4:-110}
rounds=${5:-2}
device=${MTX_BENCH_DEVICE:-cuda}
skip=10
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

common=(--config "$config" --set train.device="$device" --set train.threads=2)
[ -n "${MTX_DATA_DIR:-}" ] && common+=(--set data.dir="$MTX_DATA_DIR")
[ -n "${MTX_CACHE_DIR:-}" ] && common+=(--set data.cache_dir="$MTX_CACHE_DIR")
for s in ${MTX_BENCH_SETS:-}; do common+=(--set "$s"); done
"$mtx" --log-level warn prepare "${common[@]}" --export-batches "$work/batches.bin" --export-limit "$updates"
"$mtx" info "${common[@]}" > "$work/info.json"
"$py" -c 'import json,sys; json.dump(json.load(open(sys.argv[1]))["config"], open(sys.argv[2], "w"))' "$work/info.json" "$work/config.json"
vocab=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["tokenizer"]["vocab_size"])' "$work/config.json")

precisions=(fp32)
[ "$device" = cuda ] && precisions+=(bf16)

# Runs "$@", polling the GPU's memory.used meanwhile; writes the largest reading (MiB) to $1.
with_gpu_peak() {
  local out=$1
  shift
  if ! command -v nvidia-smi >/dev/null; then
    echo 0 > "$out"
    "$@"
    return
  fi
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > "$out.poll" &
  local poll=$!
  local rc=0
  "$@" || rc=$?
  kill "$poll" 2>/dev/null || true
  wait "$poll" 2>/dev/null || true
  sort -n "$out.poll" | tail -n 1 > "$out"
  return "$rc"
}

for r in $(seq "$rounds"); do
  for p in "${precisions[@]}"; do
    bf16=$([ "$p" = bf16 ] && echo true || echo false)
    echo "round $r: mtx $p, $updates updates on $device ..." >&2
    rm -rf "$work/run-$p.$r"
    with_gpu_peak "$work/mtx-$p.$r.gpu" "$mtx" --log-level warn train "${common[@]}" --set train.bf16="$bf16" \
      --set train.max_steps="$updates" --set train.log_every="$skip" --set train.keep_last=0 --set train.max_epochs=0 \
      --out "$work/run-$p.$r"
    echo "round $r: peer $p, $updates updates on $device ..." >&2
    flags=(--device "$device")
    [ "$p" = bf16 ] && flags+=(--bf16)
    with_gpu_peak "$work/peer-$p.$r.gpu" "$py" scripts/bench/peer_train.py --batches "$work/batches.bin" \
      --config "$work/config.json" --vocab "$vocab" --threads 2 --skip "$skip" "${flags[@]}" > "$work/peer-$p.$r.json"
  done
done
version=$("$mtx" --version | tr '\n' ' ')
card=$(command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1 || echo "no GPU")

"$py" - "$work" "$config" "$updates" "$rounds" "$skip" "$device" "$card" "$version" "${precisions[@]}" <<'PY'
import json, sys
work, config, updates, rounds, skip, device, card, version = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6]), *sys.argv[6:9]
precisions = sys.argv[9:]

def gpu(name, r):
    return float(open(f"{work}/{name}.{r}.gpu").read().strip() or 0)

def mtx(p, r):
    rows = {x["step"]: x for x in map(json.loads, open(f"{work}/run-{p}.{r}/metrics.jsonl")) if x.get("type") == "train"}
    a, b = rows[skip], rows[updates]
    return {"tokens": b["tgt_tokens"] - a["tgt_tokens"], "seconds": b["elapsed_s"] - a["elapsed_s"],
            "gpu": gpu(f"mtx-{p}", r), "alloc": None}

def peer(p, r):
    x = json.load(open(f"{work}/peer-{p}.{r}.json"))
    return {"tokens": x["tgt_tokens"], "seconds": x["seconds"], "gpu": gpu(f"peer-{p}", r),
            "alloc": x.get("peak_gpu_allocated_mb"), "torch": x.get("torch")}

best, listed, torch_version = {}, {}, ""
for p in precisions:
    for kind, read in (("mtx", mtx), ("peer", peer)):
        rs = [read(p, r) for r in range(1, rounds + 1)]
        for x in rs:
            x["tps"] = x["tokens"] / x["seconds"]
        torch_version = rs[0].get("torch") or torch_version
        best[(kind, p)] = max(rs, key=lambda x: x["tps"])
        listed[(kind, p)] = " ".join(f"{x['tps']:.0f}" for x in rs)
print(f"{card}; config {config}: updates {skip + 1}..{updates} of the same batches, best of {rounds} alternating rounds")
print(f"mtx: {version.strip()}; peer: torch {torch_version} (torch.nn.Transformer)")
print("| side | precision | tgt tokens/s (rounds) | mtx / peer | peak GPU memory MiB (nvidia-smi) | peer allocator peak MiB |")
print("|---|---|---|---|---|---|")
for p in precisions:
    for kind in ("mtx", "peer"):
        b = best[(kind, p)]
        ratio = f"{b['tps'] / best[('peer', p)]['tps']:.2f}x" if kind == "mtx" else ""
        alloc = f"{b['alloc']:.0f}" if b["alloc"] else ""
        label = "mtx" if kind == "mtx" else "peer (torch.nn.Transformer)"
        print(f"| {label} | {p} | {b['tps']:.0f} ({listed[(kind, p)]}) | {ratio} | {b['gpu']:.0f} | {alloc} |")
tokens = {f"{k}-{p}": v["tokens"] for (k, p), v in best.items()}
if len(set(tokens.values())) != 1:
    print(f"warning: the sides trained on different target-token counts: {tokens}")
PY
