#!/usr/bin/env bash
# Decoding speed: mtx on both LibTorch builds (Debian's 1.13 in build/, PyPI's 2.x in build-torch2/) against a
# PyTorch-Python peer on both torches (torch.nn.Transformer with the checkpoint's weights, batched beam search
# re-decoding the whole prefix each step; scripts/bench/peer_translate.py), on the same sentences with the same
# batching rule, back to back on this machine:
#   scripts/bench/translate_speed.sh CKPT [BEAM] [BATCH_TOKENS] [THREADS] [SENTENCES]
# (defaults: beam 5, 640 batch tokens -- about 32 sentences per batch --, 2 threads, all of
# test_2016_flickr). Prints one table: generated tokens/s and sentences/s, ratios, single-sentence latency
# (p50/p95 over 100 sentences, one sentence at a time), peak RSS, and how many outputs agree.
# MTX_BENCH_TORCH2=0 leaves out the 2.x sides.
set -euo pipefail
cd "$(dirname "$0")/../.."
ckpt=${1:?usage: translate_speed.sh CKPT [BEAM] [BATCH_TOKENS] [THREADS] [SENTENCES]}
beam=${2:-5}
batch_tokens=${3:-640}
threads=${4:-2}
sentences=${5:-0}
data=${MTX_DATA_DIR:-data/multi30k}
source scripts/bench/sides.sh
py=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

src="$data/test_2016_flickr.de.gz"
[ -f "$src" ] || src="$data/test_2016_flickr.de"
if [ "$sentences" -gt 0 ]; then zcat -f "$src" | awk -v n="$sentences" 'NR <= n' > "$work/src.de"; else zcat -f "$src" > "$work/src.de"; fi
head -n 100 "$work/src.de" > "$work/latency.de"
# The checkpoint's own source tokenizer gives the peer its ids.
$py -c 'import sys,torch; b=dict(torch.jit.load(sys.argv[1]).named_buffers()); open(sys.argv[2],"wb").write(bytes(b["mtx_tokenizer_src"].tolist()))' "$ckpt" "$work/spm.model"
spm_encode --model="$work/spm.model" --output_format=id < "$work/src.de" > "$work/src.ids"

for side in "${sides[@]}"; do
  IFS='|' read -r kind torch exe <<< "$side"
  name=$kind-$torch
  echo "$name: beam $beam, $batch_tokens batch tokens, $threads threads ..." >&2
  if [ "$kind" = peer ]; then
    /usr/bin/time -f "%M" -o "$work/$name.rss" "$exe" scripts/bench/peer_translate.py --ckpt "$ckpt" --ids "$work/src.ids" \
      --beam "$beam" --batch-tokens "$batch_tokens" --threads "$threads" --latency 100 > "$work/$name.ids" 2> "$work/$name.log"
    spm_decode --model="$work/spm.model" --input_format=id < "$work/$name.ids" > "$work/$name.en"
    "$exe" -c 'import torch; print(torch.__version__)' > "$work/$name.version"
  else
    common=(--ckpt "$ckpt" --beam "$beam" --threads "$threads")
    /usr/bin/time -f "%M" -o "$work/$name.rss" "$exe" translate "${common[@]}" --batch-tokens "$batch_tokens" \
      --input "$work/src.de" --output "$work/$name.en" 2> "$work/$name.log"
    "$exe" translate "${common[@]}" --chunk-lines 1 --input "$work/latency.de" --output /dev/null 2> "$work/$name.latency.log"
    "$exe" --version | sed -n 's/^LibTorch //p' > "$work/$name.version"
  fi
done

$py - "$work" "$beam" "$batch_tokens" "$threads" "${sides[@]}" <<'PY'
import json, re, sys
work, beam, batch_tokens, threads = sys.argv[1], *sys.argv[2:5]
sides = [s.split("|")[:2] for s in sys.argv[5:]]
res = {}
for kind, torch in sides:
    name = f"{kind}-{torch}"
    r = {"version": open(f"{work}/{name}.version").read().strip(), "lines": open(f"{work}/{name}.en").read().splitlines(),
         "rss": int(open(f"{work}/{name}.rss").read().split()[-1]) / 1024}
    if kind == "peer":
        p = json.loads(open(f"{work}/{name}.log").read().strip().splitlines()[-1])
        r.update(tps=p["tokens_per_s"], sps=p["sentences_per_s"], p50=p["latency_p50_ms"], p95=p["latency_p95_ms"])
    else:
        m = re.search(r"(\d+) lines in ([\d.]+) s: ([\d.]+) sentences/s, (\d+) generated tokens/s", open(f"{work}/{name}.log").read())
        lat = re.search(r"p50 ([\d.]+) ms, p95 ([\d.]+) ms", open(f"{work}/{name}.latency.log").read())
        r.update(tps=float(m.group(4)), sps=float(m.group(3)), p50=float(lat.group(1)), p95=float(lat.group(2)))
    res[(kind, torch)] = r
base = res[("peer", "1.13")]
mtx0 = res[("mtx", "1.13")]["lines"]
print(f"beam {beam}, {batch_tokens} batch tokens, {threads} threads, {len(mtx0)} sentences of test_2016_flickr")
print("| side | LibTorch | generated tokens/s | sentences/s | vs peer 1.13 | vs peer, same torch | latency p50 / p95 ms | peak RSS MiB | same output as mtx 1.13 |")
print("|---|---|---|---|---|---|---|---|---|")
for kind, torch in sides:
    r = res[(kind, torch)]
    same_torch = res[("peer", torch)]["tps"]
    label = "mtx (incremental, cached)" if kind == "mtx" else "peer (torch.nn.Transformer, re-decode)"
    same = sum(a == b for a, b in zip(r["lines"], mtx0))
    print(f"| {label} | {r['version']} | {r['tps']:.0f} | {r['sps']:.1f} | {r['tps'] / base['tps']:.2f}x | "
          f"{r['tps'] / same_torch:.2f}x | {r['p50']:.0f} / {r['p95']:.0f} | {r['rss']:.0f} | {same}/{len(mtx0)} |")
PY
