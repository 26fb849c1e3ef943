#!/usr/bin/env bash
# What an SSRU decoder buys at batch 1: two random models of a student's real shape (Bergamot's "tiny": 6
# encoder layers, 2 decoder layers, 256 wide, FFN 1536, 8 heads, tied embeddings; an 8000-piece joint vocabulary,
# as Multi30k allows), one with self-attention in its decoder and one with Marian's SSRU (model.decoder_autoreg),
# each trained for 2 updates so that its weights are random but its tokenizer real. Both translate the same
# sentences one at a time (--batch-tokens 1) at beam 1 and 4, interleaved rounds, median seconds.
#   scripts/bench/ssru_speed.sh [SENTENCES] [ROUNDS]      (defaults 300, 3; env MTX, MTX_DATA_DIR)
# Every hypothesis runs to the length limit (--max-length-factor 2 --min-len 1000: twice the source's tokens), so
# both models take the same steps on the same sentences (their tokenizers are the same); the table gives the
# generated tokens/s and the SSRU / self-attention ratio. Run nothing else meanwhile.
set -euo pipefail
cd "$(dirname "$0")/../.."
mtx=${MTX:-build/bin/mtx}
data=${MTX_DATA_DIR:-data/multi30k}
sentences=${1:-300}
rounds=${2:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
zcat -f "$data/test_2016_flickr.de.gz" | awk -v n="$sentences" 'NR <= n' > "$work/src.de"
for kind in self_attention ssru; do
  "$mtx" --log-level warn train --config configs/tiny.json --out "$work/$kind" --set data.dir="$data" \
    --set data.cache_dir="$work/cache" --set tokenizer.vocab_size=8000 --set tokenizer.joint=true \
    --set model.d_model=256 --set model.heads=8 --set model.encoder_layers=6 --set model.decoder_layers=2 \
    --set model.ffn_dim=1536 --set model.share_embeddings=true --set model.tie_output=true \
    --set model.decoder_autoreg=$kind --set train.max_steps=2 --set train.validate_every=2 \
    --set train.max_minutes=0 --set train.threads=2 > "$work/$kind.log" 2>&1 ||
    { echo "ssru_speed: training $kind failed: $(tail -3 "$work/$kind.log")" >&2; exit 1; }
done
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //') ($(grep -q avx512f /proc/cpuinfo && echo AVX-512 || echo AVX2)), 2 threads, $sentences sentences one at a time"
echo
echo "| beam | decoder | generated tokens | seconds (median of $rounds) | tokens/s | SSRU / self-attention |"
echo "|---|---|---|---|---|---|"
for beam in 1 4; do
  declare -A secs=()
  for r in $(seq "$rounds"); do
    for kind in self_attention ssru; do
      t=$("$mtx" translate --ckpt "$work/$kind/last.pt" --beam "$beam" --threads 2 --batch-tokens 1 \
            --max-length-factor 2 --min-len 1000 --input "$work/src.de" --output "$work/$kind.$beam.en" 2>&1 | grep -o 'lines in [0-9.]* s' | grep -o '[0-9.]*')
      secs[$kind]="${secs[$kind]:-} $t"
    done
  done
  rate=()
  for kind in self_attention ssru; do
    med=$(echo ${secs[$kind]} | tr ' ' '\n' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    # Generated tokens: the output pieces plus EOS, counted with the model's own tokenizer (mtx score's count).
    toks=$("$mtx" --log-level warn score --ckpt "$work/$kind/last.pt" --src "$work/src.de" --tgt "$work/$kind.$beam.en" \
             --json 2>/dev/null | python3 -c 'import json, sys; print(sum(len(json.loads(l)["tokens"]) for l in sys.stdin))')
    r=$(awk -v n="$toks" -v s="$med" 'BEGIN {printf "%.0f", n / s}')
    rate+=("$r")
    ratio=""
    [ "$kind" = ssru ] && ratio=$(awk -v a="${rate[1]}" -v b="${rate[0]}" 'BEGIN {printf "**%.2fx**", a / b}')
    echo "| $beam | $kind | $toks | $med | $r | $ratio |"
  done
  unset secs
done
