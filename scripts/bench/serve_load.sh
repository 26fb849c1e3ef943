#!/usr/bin/env bash
# mtx serve under load on loopback: 1, 8, 32 and 128 concurrent clients (wrk connections, Debian's wrk), each
# sending test_2016_flickr sentences one per request, against `mtx translate`'s offline throughput on the same
# sentences with the same model, threads and beam, run first in this command:
#   scripts/bench/serve_load.sh CKPT [SECONDS] [THREADS] [BEAM]
# (defaults: 20 s per level, 2 threads, the checkpoint's beam). Prints one table: sentences/s, its ratio to
# offline, p50/p99 latency, errors, and the server's peak RSS after each level. MTX_LOAD_CLIENTS="32" runs only
# the levels it lists; MTX_SERVE_FLAGS adds flags to `mtx serve`.
set -euo pipefail
cd "$(dirname "$0")/../.."
ckpt=${1:?usage: serve_load.sh CKPT [SECONDS] [THREADS] [BEAM]}
seconds=${2:-20}
threads=${3:-2}
beam=${4:-}
data=${MTX_DATA_DIR:-data/multi30k}
mtx=${MTX_BINARY:-build/bin/mtx}
command -v wrk > /dev/null || { echo "serve_load: wrk is missing: apt-get install wrk" >&2; exit 2; }
work=$(mktemp -d)
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
zcat -f "$data/test_2016_flickr.de.gz" > "$work/src.de"
n=$(wc -l < "$work/src.de")
beam_flag=()
[ -n "$beam" ] && beam_flag=(--beam "$beam")

# Offline: the whole file at once.
OMP_WAIT_POLICY=passive "$mtx" translate --ckpt "$ckpt" --threads "$threads" "${beam_flag[@]}" < "$work/src.de" \
  > "$work/offline.en" 2> "$work/offline.log"
offline=$(grep -o '[0-9.]* sentences/s' "$work/offline.log" | tail -1 | cut -d' ' -f1)
echo "offline: $n sentences, $offline sentences/s ($threads threads)" >&2

OMP_WAIT_POLICY=passive "$mtx" serve --ckpt "$ckpt" --port 0 --threads "$threads" --max-queue 100000 ${MTX_SERVE_FLAGS:-} \
  2> "$work/serve.log" &
server=$!
for _ in $(seq 1 200); do
  port=$(grep -o 'serving on http://127.0.0.1:[0-9]*' "$work/serve.log" | sed 's/.*://' || true)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$work/serve.log" >&2; exit 1; }

printf '| clients | sentences/s | vs offline | p50 ms | p99 ms | errors | server peak RSS MB |\n|---|---|---|---|---|---|---|\n'
for clients in ${MTX_LOAD_CLIENTS:-1 8 32 128}; do
  wthreads=$(( clients < 2 ? 1 : 2 ))
  MTX_LOAD_SENTENCES="$work/src.de" MTX_LOAD_BEAM="$beam" wrk -t "$wthreads" -c "$clients" -d "${seconds}s" --timeout 30s \
    -s scripts/bench/serve_load.lua "http://127.0.0.1:$port" > "$work/wrk.$clients" 2>&1
  line=$(grep MTXLOAD "$work/wrk.$clients")
  get() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p" <<< "$line"; }
  rate=$(awk -v r="$(get requests)" -v s="$(get seconds)" 'BEGIN { printf "%.1f", r / s }')
  ratio=$(awk -v a="$rate" -v b="$offline" 'BEGIN { printf "%.2f", a / b }')
  errors=$(( $(get errors) + $(get non2xx) ))
  rss=$(awk '/VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/$server/status")
  printf '| %d | %s | %s | %s | %s | %d | %s |\n' "$clients" "$rate" "$ratio" "$(get p50_ms)" "$(get p99_ms)" "$errors" "$rss"
done
kill -TERM "$server"
wait "$server"
server=
