#!/usr/bin/env bash
# Data preparation and training start-up against corpus size: synthetic corpora of distinct pairs recombined from
# Multi30k (scripts/bench/synth_corpus.py), prepared and trained on with configs/quick.json's model.
#   scripts/bench/data_scale.sh [--sizes "0.1 1 10 40"] [--work DIR] [--keep]
# Sizes are millions of pairs; xN is Multi30k's training split repeated N times (x100: 2.9M pairs). Per size it prints, each stage a process of its own timed by /usr/bin/time:
#   prepare    `mtx prepare` on a fresh cache: hashing, the tokenizer's sample and training (its log gives that
#              stage's seconds and peak RSS), the encoding
#   encode     `mtx prepare` again with the encoded corpus deleted: the tokenizer and the file digests are reused
#   recheck    `mtx prepare` with everything cached: what re-checking an unchanged corpus costs
#   train      `mtx train` for 100 updates: seconds to the first update, wall, peak RSS
# and the bytes on disk of the text and the shards (MB = 10^6 bytes throughout). Nothing else may run meanwhile. WORK (default
# a temporary directory, removed unless --keep) needs about 300 bytes per pair: 12 GB at 40M.
set -euo pipefail
cd "$(dirname "$0")/../.."
sizes="0.1 1 10 40" work="" keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --sizes) sizes=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    *) echo "usage: $0 [--sizes \"0.1 1 10 40\"] [--work DIR] [--keep]" >&2; exit 2 ;;
  esac
done
mtx=${MTX:-build/bin/mtx}
[ -x "$mtx" ] || { echo "data_scale: $mtx not found: build first" >&2; exit 2; }
[ -f data/multi30k/train.de.gz ] || { echo "data_scale: fetch Multi30k first (scripts/get_multi30k.sh data/multi30k)" >&2; exit 2; }
[ -n "$work" ] || { work=$(mktemp -d); [ "$keep" = 1 ] || trap 'rm -rf "$work"' EXIT; }
mkdir -p "$work"

cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
isa=$(grep -o -w -m1 -E 'avx512f|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')
echo "# data_scale $(date -u +%F) on $cpu ($(nproc) cores; ${isa:-no avx2}), $(git rev-parse --short HEAD)"
printf '| pairs | text MB | prepare: s, peak RSS MB | of it tokenizer sample + training: s, peak RSS MB | encode alone: s, peak RSS MB | shards MB | re-check s | train: first update s, 100 updates s, peak RSS MB |\n'
printf '|---|---|---|---|---|---|---|---|\n'

# Seconds and peak RSS (MB) of a command, its log kept in $1.
timed() {
  local log=$1; shift
  /usr/bin/time -f "%e %M" -o "$log.time" "$@" > "$log" 2>&1 || { echo "data_scale: failed: $*" >&2; tail -5 "$log" >&2; exit 1; }
  read -r secs kb < "$log.time"
  echo "$secs $((kb * 1024 / 1000000))"
}

for m in $sizes; do
  dir=$work/m$m
  rm -rf "$dir"
  if [ "${m#x}" != "$m" ]; then  # xN: Multi30k's training pairs N times over
    python3 scripts/bench/synth_corpus.py --multi30k data/multi30k --repeat "${m#x}" --out "$dir/data"
    pairs="$(wc -l < "$dir/data/train.de") (Multi30k x${m#x})"
  else
    pairs=$(python3 -c "print(int(float('$m') * 1e6))")
    python3 scripts/bench/synth_corpus.py --multi30k data/multi30k --pairs "$pairs" --out "$dir/data"
  fi
  text_mb=$(du -cm "$dir/data"/train.* | tail -1 | cut -f1)
  common=(--config configs/quick.json --set data.dir="$dir/data" --set data.cache_dir="$dir/cache"
          --set train.threads=2)
  read -r t_all t_rss < <(timed "$dir/prepare1.log" "$mtx" prepare "${common[@]}")
  tok_s=$(sed -n 's/.*sampled and trained in \([0-9.]*\) s.*/\1/p' "$dir/prepare1.log")
  tok_rss=$(sed -n 's/.*sampled and trained in .* peak RSS \([0-9]*\) MB.*/\1/p' "$dir/prepare1.log")
  rm -rf "$dir"/cache/corpus-*
  read -r e_s e_rss < <(timed "$dir/prepare2.log" "$mtx" prepare "${common[@]}")
  shards_mb=$(du -cm "$dir"/cache/corpus-*/*.bin | tail -1 | cut -f1)
  read -r r_s _ < <(timed "$dir/prepare3.log" "$mtx" prepare "${common[@]}")
  grep -q "reusing the cached encoded corpus" "$dir/prepare3.log" || { echo "data_scale: the cache was not reused" >&2; exit 1; }
  # The first update's moment: the log's lines stamped as they arrive.
  start=$(date +%s.%N)
  /usr/bin/time -f "%e %M" -o "$dir/train.time" "$mtx" train "${common[@]}" --set train.max_steps=100 \
    --set train.log_every=1 --set train.max_minutes=0 --set train.keep_last=0 --out "$dir/run" 2>&1 |
    while IFS= read -r line; do echo "$(date +%s.%N) $line"; done > "$dir/train.log"
  first=$(awk '/update 1 \|/ {print $1; exit}' "$dir/train.log")
  read -r tr_s tr_kb < "$dir/train.time"
  first_s=$(python3 -c "print(f'{$first - $start:.1f}')")
  printf '| %s | %s | %s, %s | %s, %s | %s, %s | %s | %s | %s, %s, %s |\n' "$pairs" "$text_mb" "$t_all" "$t_rss" \
    "${tok_s:-?}" "${tok_rss:-?}" "$e_s" "$e_rss" "$shards_mb" "$r_s" "$first_s" "$tr_s" "$((tr_kb * 1024 / 1000000))"
  [ "$keep" = 1 ] || rm -rf "$dir"
done
