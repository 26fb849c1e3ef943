#!/usr/bin/env bash
# Kill -9 at random moments, resume each time: every checkpoint on disk still loads, and the final
# weights equal an uninterrupted run's bit for bit (weights_sha256).
#   scripts/faults/kill_resume.sh [--kills N] [--steps S] [--seed R] [--work DIR]
# Defaults: 20 kills over a 480-update run. CI runs a short form (scripts/faults/run.sh --short).
set -euo pipefail
source "$(dirname "$0")/common.sh"
kills=20 steps=480 seed=1 work=""
while [ $# -gt 0 ]; do
  case "$1" in
    --kills) kills=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    *) echo "usage: $0 [--kills N] [--steps S] [--seed R] [--work DIR]" >&2; exit 2 ;;
  esac
done
[ -n "$work" ] || { work=$(mktemp -d); trap 'rm -rf "$work"' EXIT; }
RANDOM=$seed
make_corpus "$work/corpus" 3000
write_config "$work/cfg.json" "$work/corpus" "$work/cache"

say "reference: $steps updates without interruption"
start=$(date +%s%N)
"$MTX" train --config "$work/cfg.json" --set train.max_steps="$steps" --out "$work/ref" > "$work/ref.log" 2>&1 ||
  fail "reference run failed: $(tail -3 "$work/ref.log")"
ref_ms=$(( ($(date +%s%N) - start) / 1000000 ))
ref_sha=$(sha "$work/ref/last.pt")
say "reference took ${ref_ms} ms, last.pt weights $ref_sha"

run=$work/run
killed=0 starts=0 resumes=0 fresh=0
# Kill times are drawn at random up to the reference run's duration over the number of kills: kills land in
# start-up, in updates, in validation and in checkpoint writes alike, and all of them land before the run ends
# (on average each run is killed after a quarter of its share, a margin for a machine whose speed changes).
max_ms=$((ref_ms / (2 * kills)))
[ "$max_ms" -ge 1500 ] || max_ms=1500
while true; do
  if [ -f "$run/last.pt" ]; then
    cmd=(train --resume "$run" --set train.max_steps="$steps"); resumes=$((resumes + 1))
  else
    cmd=(train --config "$work/cfg.json" --set train.max_steps="$steps" --out "$run"); fresh=$((fresh + 1))
  fi
  starts=$((starts + 1))
  "$MTX" "${cmd[@]}" >> "$work/run.log" 2>&1 &
  pid=$!
  if [ "$killed" -ge "$kills" ]; then
    wait "$pid" || fail "the last run (no kill) failed: $(tail -3 "$work/run.log")"
    break
  fi
  delay_ms=$((300 + (RANDOM * 32768 + RANDOM) % max_ms))
  sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
  if kill -0 "$pid" 2>/dev/null; then
    kill -9 "$pid"
    wait "$pid" 2>/dev/null || true
    killed=$((killed + 1))
    step=$( [ -f "$run/last.pt" ] && "$MTX" info --ckpt "$run/last.pt" | sed -n 's/.*"step": *\([0-9]*\).*/\1/p' | head -1 || echo none)
    say "kill $killed after ${delay_ms} ms: last.pt at update ${step:-none}"
    [ -d "$run" ] && all_load "$run"
  else
    wait "$pid" || fail "a run failed on its own: $(tail -3 "$work/run.log")"
    break  # finished before the kill
  fi
done
all_load "$run"
got_sha=$(sha "$run/last.pt")
say "$killed kills, $starts starts ($resumes resumes, $fresh fresh), final last.pt weights $got_sha"
[ "$killed" -ge "$kills" ] || fail "only $killed kills landed before the run finished (raise --steps)"
[ "$got_sha" = "$ref_sha" ] || fail "final weights differ from the uninterrupted run's"
for f in best.pt avg.pt; do
  [ "$(sha "$run/$f")" = "$(sha "$work/ref/$f")" ] || fail "$f differs from the uninterrupted run's"
done
[ "$(cd "$run" && ls step-*.pt)" = "$(cd "$work/ref" && ls step-*.pt)" ] || fail "step checkpoints differ"
say "OK: bit-identical to the uninterrupted run (last.pt, best.pt, avg.pt, step files)"
