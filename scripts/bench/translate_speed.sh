#!/usr/bin/env bash
# Decoding speed, mtx vs a PyTorch-Python peer (torch.nn.Transformer with the checkpoint's weights,
# batched beam search re-decoding the whole prefix each step; scripts/bench/peer_translate.py), on the
# same sentences with the same batching rule, back to back on this machine:
#   scripts/bench/translate_speed.sh CKPT [BEAM] [BATCH_TOKENS] [THREADS] [SENTENCES]
# (defaults: beam 5, 640 batch tokens -- about 32 sentences per batch --, 2 threads, all of
# test_2016_flickr). Prints generated tokens/s and sentences/s for both and the ratio, how many
# outputs agree, and single-sentence latency (p50/p95 over 100 sentences, one sentence at a time).
set -euo pipefail
cd "$(dirname "$0")/../.."
ckpt=${1:?usage: translate_speed.sh CKPT [BEAM] [BATCH_TOKENS] [THREADS] [SENTENCES]}
beam=${2:-5}
batch_tokens=${3:-640}
threads=${4:-2}
sentences=${5:-0}
data=${MTX_DATA_DIR:-data/multi30k}
MTX_EXTRA_PACKAGES="python3-torch python3-numpy" scripts/setup.sh >/dev/null
scripts/build.sh >/dev/null
py=/usr/bin/python3
mtx=build/bin/mtx
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

src="$data/test_2016_flickr.de.gz"
[ -f "$src" ] || src="$data/test_2016_flickr.de"
if [ "$sentences" -gt 0 ]; then zcat -f "$src" | head -n "$sentences" > "$work/src.de"; else zcat -f "$src" > "$work/src.de"; fi
head -n 100 "$work/src.de" > "$work/latency.de"
# The checkpoint's own source tokenizer gives the peer its ids.
$py -c 'import sys,torch; b=dict(torch.jit.load(sys.argv[1]).named_buffers()); open(sys.argv[2],"wb").write(bytes(b["mtx_tokenizer_src"].tolist()))' "$ckpt" "$work/spm.model"
spm_encode --model="$work/spm.model" --output_format=id < "$work/src.de" > "$work/src.ids"

echo "peer: beam $beam, $batch_tokens batch tokens, $threads threads ..." >&2
$py scripts/bench/peer_translate.py --ckpt "$ckpt" --ids "$work/src.ids" --beam "$beam" --batch-tokens "$batch_tokens" \
  --threads "$threads" --latency 100 > "$work/peer.ids" 2> "$work/peer.log"
spm_decode --model="$work/spm.model" --input_format=id < "$work/peer.ids" > "$work/peer.en"
echo "mtx: beam $beam, $batch_tokens batch tokens, $threads threads ..." >&2
common=(--ckpt "$ckpt" --beam "$beam" --threads "$threads")
/usr/bin/time -f "%M" -o "$work/mtx.rss" $mtx translate "${common[@]}" --batch-tokens "$batch_tokens" \
  --input "$work/src.de" --output "$work/mtx.en" 2> "$work/mtx.log"
$mtx translate "${common[@]}" --chunk-lines 1 --input "$work/latency.de" --output /dev/null 2> "$work/mtx-latency.log"

$py - "$work" "$beam" "$batch_tokens" "$threads" <<'PY'
import json, re, sys
work, beam, batch_tokens, threads = sys.argv[1], *sys.argv[2:5]
peer = json.loads(open(f"{work}/peer.log").read().strip().splitlines()[-1])
log = open(f"{work}/mtx.log").read()
m = re.search(r"(\d+) lines in ([\d.]+) s: ([\d.]+) sentences/s, (\d+) generated tokens/s", log)
lat = re.search(r"p50 ([\d.]+) ms, p95 ([\d.]+) ms", open(f"{work}/mtx-latency.log").read())
a, b = open(f"{work}/peer.en").read().splitlines(), open(f"{work}/mtx.en").read().splitlines()
same = sum(x == y for x, y in zip(a, b))
mtx_tps, mtx_sps = float(m.group(4)), float(m.group(3))
print(f"beam {beam}, {batch_tokens} batch tokens, {threads} threads, {len(b)} sentences of test_2016_flickr")
print(f"  peer (torch.nn.Transformer, re-decode): {peer['tokens_per_s']:8.0f} generated tokens/s {peer['sentences_per_s']:7.1f} sentences/s"
      f"   latency p50 {peer['latency_p50_ms']:.0f} ms p95 {peer['latency_p95_ms']:.0f} ms")
print(f"  mtx (incremental, cached)            : {mtx_tps:8.0f} generated tokens/s {mtx_sps:7.1f} sentences/s"
      f"   latency p50 {float(lat.group(1)):.0f} ms p95 {float(lat.group(2)):.0f} ms")
print(f"  ratio mtx/peer: {mtx_tps / peer['tokens_per_s']:.2f}x tokens/s, {mtx_sps / peer['sentences_per_s']:.2f}x sentences/s;"
      f" identical outputs {same}/{len(b)}; mtx peak RSS {int(open(f'{work}/mtx.rss').read().split()[-1]) / 1024:.0f} MiB")
PY
