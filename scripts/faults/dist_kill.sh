#!/usr/bin/env bash
# A rank killed mid-run (mtx train --nproc 2): the launcher names it and exits non-zero, the other rank stops
# within train.dist_timeout_s, every checkpoint on disk still loads, and --resume continues to the weights of
# an uninterrupted run bit for bit. Rank 1 is killed first (a worker), then rank 0 (the one that writes).
#   scripts/faults/dist_kill.sh [--steps S] [--work DIR]
set -euo pipefail
source "$(dirname "$0")/common.sh"
steps=60 work=""
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    *) echo "usage: $0 [--steps S] [--work DIR]" >&2; exit 2 ;;
  esac
done
[ -n "$work" ] || { work=$(mktemp -d); trap 'rm -rf "$work"' EXIT; }
timeout_s=20
make_corpus "$work/corpus" 3000
write_config "$work/cfg.json" "$work/corpus" "$work/cache"
set_args=(--set train.max_steps="$steps" --set train.threads=1 --set train.log_every=1
          --set train.dist_timeout_s=$timeout_s)

say "reference: $steps updates on 2 ranks without interruption"
"$MTX" train --config "$work/cfg.json" "${set_args[@]}" --nproc 2 --out "$work/ref" > "$work/ref.log" 2>&1 ||
  fail "reference run failed: $(tail -3 "$work/ref.log")"
ref_sha=$(sha "$work/ref/last.pt")
say "reference last.pt weights $ref_sha"

progress() { grep -o 'update [0-9]*' "$1" 2>/dev/null | tail -1 | cut -d' ' -f2 || true; }

# kill_rank R LOG CMD...: starts CMD, kills rank R with SIGKILL once the run reports an update 10 past where it
# started, and checks how the launcher and the other rank end.
kill_rank() {
  local r=$1 log=$2; shift 2
  "$MTX" "$@" > "$log" 2>&1 &
  local pid=$! from
  from=$(progress "$log"); from=${from:-0}
  for _ in $(seq 600); do
    local at; at=$(progress "$log")
    [ -n "$at" ] && [ "$at" -ge $((from + 10)) ] && break
    kill -0 "$pid" 2>/dev/null || fail "the run ended before the kill: $(tail -3 "$log")"
    sleep 0.1
  done
  local pids victim
  pids=$(sed -n 's/.*started 2 ranks on [^ ]* (pids \([0-9]*\), \([0-9]*\)).*/\1 \2/p' "$log")
  victim=$(echo "$pids" | cut -d' ' -f$((r + 1)))
  [ -n "$victim" ] || fail "no rank pids in the launcher's log: $(head -3 "$log")"
  local t0; t0=$(date +%s%N)
  kill -9 "$victim"
  local rc=0
  wait "$pid" || rc=$?
  local waited_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  [ "$rc" != 0 ] || fail "the launcher exited 0 after rank $r was killed"
  grep -q "rank $r (pid $victim) was killed by signal 9" "$log" || fail "the launcher did not name rank $r: $(tail -5 "$log")"
  [ "$waited_ms" -lt $((timeout_s * 1000 + 5000)) ] || fail "the run took ${waited_ms} ms to end after the kill (timeout ${timeout_s} s)"
  say "rank $r killed at update $(progress "$log"): launcher exit $rc after ${waited_ms} ms; $(grep -c 'mtx: error' "$log") rank error line(s)"
}

run=$work/run
kill_rank 1 "$work/run-1.log" train --config "$work/cfg.json" "${set_args[@]}" --nproc 2 --out "$run"
all_load "$run"
kill_rank 0 "$work/run-2.log" train --resume "$run" --nproc 2
all_load "$run"
"$MTX" train --resume "$run" --nproc 2 > "$work/run-3.log" 2>&1 || fail "the last resume failed: $(tail -3 "$work/run-3.log")"
got=$(sha "$run/last.pt")
[ "$got" = "$ref_sha" ] || fail "resumed run's weights $got differ from the uninterrupted run's $ref_sha"
say "resumed twice after killed ranks: last.pt weights equal the uninterrupted run's ($got)"
say "dist_kill OK"
