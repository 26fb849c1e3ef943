#!/usr/bin/env bash
# mtx serve under load on loopback: 1, 8, 32 and 128 concurrent clients (wrk connections, Debian's wrk), each
# sending test_2016_flickr sentences one per request, against `mtx translate`'s offline throughput on the same
# sentences with the same model, threads and beam, run first in this command:
#   scripts/bench/serve_load.sh CKPT [SECONDS] [THREADS] [BEAM]
# (defaults: 20 s per level, 2 threads, the checkpoint's beam). MTX_LOAD_ROUNDS rounds (default 3), each an offline
# run (the file 5 times over: a 1000-line run is too short to time) and then every level, so that each ratio is
# against an offline run minutes, not a quarter of an hour, away. Prints one table: per level the round with the
# median ratio (sentences/s, offline's, the ratio, every round's ratio, p50/p99 latency, errors over all rounds,
# the server's and offline's CPU milliseconds per sentence, and the server's peak RSS). MTX_LOAD_CLIENTS="32" runs only
# the levels it lists; MTX_SERVE_FLAGS adds flags to `mtx serve`.
# Then a soak: MTX_SOAK_REQUESTS requests (default 100000; 0 skips it) from 16 keep-alive clients and 16
# one-shot clients (a new connection per request) at once, half of them each (each wrk stops at its half);
# the server's open descriptors and RSS are sampled every second, and a second table gives the errors and both,
# first 10% of the samples against the last 10%, then the mean RSS of each tenth of the soak. Installs wrk (Debian's) when it is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
ckpt=${1:?usage: serve_load.sh CKPT [SECONDS] [THREADS] [BEAM]}
seconds=${2:-20}
threads=${3:-2}
beam=${4:-}
data=${MTX_DATA_DIR:-data/multi30k}
mtx=${MTX_BINARY:-build/bin/mtx}
command -v wrk > /dev/null || MTX_EXTRA_PACKAGES=wrk scripts/setup.sh --packages-only --run-only > /dev/null
command -v wrk > /dev/null || { echo "serve_load: wrk is missing and could not be installed (apt-get install wrk)" >&2; exit 2; }
work=$(mktemp -d)
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
zcat -f "$data/test_2016_flickr.de.gz" > "$work/src.de"
n=$(wc -l < "$work/src.de")
beam_flag=()
[ -n "$beam" ] && beam_flag=(--beam "$beam")

# CPU time (user + system) of a process so far, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
rounds=${MTX_LOAD_ROUNDS:-3}
# Offline: the whole file, 5 times over, at once; sets offline (sentences/s) and offline_ms (CPU ms per sentence).
for _ in 1 2 3 4 5; do cat "$work/src.de"; done > "$work/offline.de"
run_offline() {
  TIMEFORMAT='%U %S'
  { time OMP_WAIT_POLICY=passive "$mtx" translate --ckpt "$ckpt" --threads "$threads" "${beam_flag[@]}" \
      < "$work/offline.de" > "$work/offline.en" 2> "$work/offline.log"; } 2> "$work/offline.time"
  offline=$(grep -o '[0-9.]* sentences/s' "$work/offline.log" | tail -1 | cut -d' ' -f1)
  offline_ms=$(awk -v n="$((5 * n))" '{ printf "%.2f", 1000 * ($1 + $2) / n }' "$work/offline.time")
  echo "offline: $((5 * n)) sentences, $offline sentences/s ($threads threads), $offline_ms CPU ms per sentence (load included)" >&2
}

OMP_WAIT_POLICY=passive "$mtx" serve --ckpt "$ckpt" --port 0 --threads "$threads" --max-queue 100000 ${MTX_SERVE_FLAGS:-} \
  2> "$work/serve.log" &
server=$!
for _ in $(seq 1 200); do
  port=$(grep -o 'serving on http://127.0.0.1:[0-9]*' "$work/serve.log" | sed 's/.*://' || true)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$work/serve.log" >&2; exit 1; }

# Rounds: offline (the server idle), then each level; each level's ratio is against its own round's offline run,
# so that the machine's drift between minutes moves both sides.
levels=${MTX_LOAD_CLIENTS:-1 8 32 128}
for round in $(seq 1 "$rounds"); do
  run_offline
  for clients in $levels; do
    wthreads=$(( clients < 2 ? 1 : 2 ))
    before=$(cpu_ticks "$server")
    MTX_LOAD_SENTENCES="$work/src.de" MTX_LOAD_BEAM="$beam" wrk -t "$wthreads" -c "$clients" -d "${seconds}s" \
      --timeout 30s -s scripts/bench/serve_load.lua "http://127.0.0.1:$port" > "$work/wrk.$clients" 2>&1
    after=$(cpu_ticks "$server")
    line=$(grep MTXLOAD "$work/wrk.$clients")
    get() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p" <<< "$line"; }
    rate=$(awk -v r="$(get requests)" -v s="$(get seconds)" 'BEGIN { printf "%.1f", r / s }')
    ratio=$(awk -v a="$rate" -v b="$offline" 'BEGIN { printf "%.2f", a / b }')
    errors=$(( $(get errors) + $(get non2xx) ))
    rss=$(awk '/VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/$server/status")
    cpu_ms=$(awk -v t="$((after - before))" -v hz="$hz" -v n="$(get requests)" \
      'BEGIN { printf "%.2f", (n > 0 ? 1000 * t / hz / n : 0) }')
    echo "$ratio $rate $offline $(get p50_ms) $(get p99_ms) $errors $cpu_ms $offline_ms $rss" >> "$work/rounds.$clients"
    echo "round $round, $clients clients: $rate sentences/s, $ratio of offline" >&2
  done
done

# Per level, the round with the median ratio, and every round's ratio.
printf '| clients | sentences/s | offline | vs offline (median of %d rounds) | every round | p50 ms | p99 ms | errors | server CPU ms per sentence | offline CPU ms per sentence | server peak RSS MB |\n|---|---|---|---|---|---|---|---|---|---|---|\n' "$rounds"
for clients in $levels; do
  all=$(cut -d' ' -f1 "$work/rounds.$clients" | tr '\n' ' ' | sed 's/ $//; s/ /, /g')
  errors=$(awk '{ e += $6 } END { print e }' "$work/rounds.$clients")
  read -r ratio rate off p50 p99 _ cpu_ms off_ms rss < <(sort -n "$work/rounds.$clients" | sed -n "$(( (rounds + 1) / 2 ))p")
  [ "$clients" = 32 ] && rate32=$rate
  printf '| %d | %s | %s | %s | %s | %s | %s | %d | %s | %s | %s |\n' "$clients" "$rate" "$off" "$ratio" "$all" "$p50" "$p99" \
    "$errors" "$cpu_ms" "$off_ms" "$rss"
done

soak=${MTX_SOAK_REQUESTS:-100000}
if [ "$soak" -gt 0 ]; then
  rate32=${rate32:-${rate:-0}}
  [ "${rate32%.*}" -gt 0 ] || rate32=10
  # wrk's duration is only a ceiling: each of the two stops at its half of the requests.
  soak_seconds=$(awk -v n="$soak" -v r="$rate32" 'BEGIN { s = 3 * n / r + 30; printf "%d", s }')
  echo "soak: $soak requests at about $rate32/s (at most ${soak_seconds} s), 16 keep-alive and 16 one-shot clients" >&2
  : > "$work/samples"
  (
    while kill -0 "$server" 2>/dev/null; do
      fds=$(ls "/proc/$server/fd" 2>/dev/null | wc -l)
      rss=$(awk '/VmRSS/ { printf "%.1f", $2 / 1024 }' "/proc/$server/status" 2>/dev/null)
      echo "$fds $rss" >> "$work/samples"
      sleep 1
    done
  ) &
  sampler=$!
  half=$(( (soak + 1) / 2 ))
  MTX_LOAD_DONE="$work/done.keep" MTX_LOAD_LIMIT=$half MTX_LOAD_SENTENCES="$work/src.de" MTX_LOAD_BEAM="$beam" wrk -t 1 -c 16 -d "${soak_seconds}s" \
    --timeout 30s -s scripts/bench/serve_load.lua "http://127.0.0.1:$port" > "$work/wrk.soak.keep" 2>&1 &
  keep=$!
  MTX_LOAD_DONE="$work/done.close" MTX_LOAD_LIMIT=$(( soak - half )) MTX_LOAD_CLOSE=1 MTX_LOAD_SENTENCES="$work/src.de" \
    MTX_LOAD_BEAM="$beam" wrk -t 1 -c 16 -d "${soak_seconds}s" --timeout 30s -s scripts/bench/serve_load.lua \
    "http://127.0.0.1:$port" > "$work/wrk.soak.close" 2>&1 &
  close=$!
  # Each wrk stops sending at its half; SIGINT then ends it (it prints its summary) instead of its -d.
  while kill -0 "$keep" 2>/dev/null || kill -0 "$close" 2>/dev/null; do
    if [ -e "$work/done.keep" ]; then kill -INT "$keep" 2>/dev/null || true; fi
    if [ -e "$work/done.close" ]; then kill -INT "$close" 2>/dev/null || true; fi
    sleep 0.2
  done
  wait "$keep" || true
  wait "$close" || true
  kill "$sampler" 2>/dev/null || true
  wait "$sampler" 2>/dev/null || true
  total=0 errors=0
  for f in "$work/wrk.soak.keep" "$work/wrk.soak.close"; do
    line=$(grep MTXLOAD "$f")
    get() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p" <<< "$line"; }
    total=$(( total + $(get requests) ))
    errors=$(( errors + $(get errors) + $(get non2xx) ))
  done
  printf '\n| soak requests | errors | fds, first 10%% | fds, last 10%% | RSS MB, first 10%% | RSS MB, last 10%% |\n|---|---|---|---|---|---|\n'
  awk -v total="$total" -v errors="$errors" '
    { fd[NR] = $1; rss[NR] = $2 }
    END {
      k = int(NR / 10); if (k < 1) k = 1
      for (i = 1; i <= k; i++) { f1 += fd[i]; r1 += rss[i]; f2 += fd[NR - k + i]; r2 += rss[NR - k + i] }
      printf "| %d | %d | %.1f | %.1f | %.1f | %.1f |\n", total, errors, f1 / k, f2 / k, r1 / k, r2 / k
      printf "\nRSS MB by tenth of the soak:"
      for (t = 0; t < 10; t++) {
        s = 0; m = 0
        for (i = int(t * NR / 10) + 1; i <= int((t + 1) * NR / 10); i++) { s += rss[i]; m++ }
        printf " %.1f", (m > 0 ? s / m : 0)
      }
      printf "\n"
    }' "$work/samples"
fi
kill -TERM "$server"
wait "$server"
server=
