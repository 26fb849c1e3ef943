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
# log_every=1: the kill loop below follows a run's progress in its log (logging never changes the weights).
set_args=(--set train.max_steps="$steps" --set train.log_every=1)
# The last update a run's log reports (0 before its first).
progress() { grep -o 'update [0-9]*' "$1" 2>/dev/null | tail -1 | cut -d' ' -f2 || true; }

start=$(date +%s%N)
"$MTX" train --config "$work/cfg.json" "${set_args[@]}" --out "$work/ref" > "$work/ref.log" 2>&1 &
pid=$!
while kill -0 "$pid" 2>/dev/null && [ "$(progress "$work/ref.log")" = "" ]; do sleep 0.01; done
startup_ms=$(( ($(date +%s%N) - start) / 1000000 ))
wait "$pid" || fail "reference run failed: $(tail -3 "$work/ref.log")"
ref_ms=$(( ($(date +%s%N) - start) / 1000000 ))
ref_sha=$(sha "$work/ref/last.pt")
say "reference took ${ref_ms} ms (${startup_ms} ms to its first update), last.pt weights $ref_sha"
# After its target update a kill waits a random delay of up to two updates' time (10-400 ms), landing in an
# update, a validation or a checkpoint write alike. Targets stay `room` updates per remaining kill short of the
# run's end, so however fast the machine runs, every kill lands before the run finishes.
delay_max=$((2 * (ref_ms - startup_ms) / steps))
[ "$delay_max" -ge 10 ] || delay_max=10
[ "$delay_max" -le 400 ] || delay_max=400
room=$((steps / (4 * kills)))
[ "$room" -ge 1 ] || room=1

run=$work/run
killed=0 starts=0 resumes=0 fresh=0 in_startup=0
# Kill moments follow the run's progress, not the clock, so a loaded or changing machine spreads them the same:
# one kill in four lands in start-up (a random delay shorter than the reference's start-up), the others a random
# delay (delay_max) after a run reports an update drawn at random about its share of the remaining ones on.
while true; do
  if [ -f "$run/last.pt" ]; then
    cmd=(train --resume "$run" --set train.max_steps="$steps"); resumes=$((resumes + 1))
  else
    cmd=(train --config "$work/cfg.json" "${set_args[@]}" --out "$run"); fresh=$((fresh + 1))
  fi
  starts=$((starts + 1))
  log=$work/run-$starts.log
  at=$( [ -f "$run/last.pt" ] && "$MTX" info --ckpt "$run/last.pt" | sed -n 's/.*"step": *\([0-9]*\).*/\1/p' | head -1 || echo 0)
  at=${at:-0}
  "$MTX" "${cmd[@]}" > "$log" 2>&1 &
  pid=$!
  if [ "$killed" -ge "$kills" ]; then
    wait "$pid" || fail "the last run (no kill) failed: $(tail -3 "$log")"
    break
  fi
  if [ $((RANDOM % 4)) = 0 ]; then
    delay_ms=$((RANDOM % (startup_ms > 1 ? startup_ms : 1))) what="start-up"
    sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
  else
    share=$(( (steps - at) / (kills - killed + 1) ))
    [ "$share" -ge 1 ] || share=1
    target=$((at + 1 + RANDOM % (2 * share)))   # on average one share on: kills reach the run's end
    # Leave room for this kill and every later one: a kill that lands after the run's last update ends the test.
    last=$((steps - room * (kills - killed)))
    [ "$target" -le "$last" ] || target=$last
    [ "$target" -gt "$at" ] || target=$((at + 1))
    while kill -0 "$pid" 2>/dev/null; do
      p=$(progress "$log")
      [ "${p:-0}" -lt "$target" ] || break
      sleep 0.05
    done
    delay_ms=$((RANDOM % delay_max)) what="update $target"
    sleep "$(printf '0.%03d' "$delay_ms")"
  fi
  if kill -0 "$pid" 2>/dev/null; then
    kill -9 "$pid"
    wait "$pid" 2>/dev/null || true
    killed=$((killed + 1))
    [ "$what" != start-up ] || in_startup=$((in_startup + 1))
    step=$( [ -f "$run/last.pt" ] && "$MTX" info --ckpt "$run/last.pt" | sed -n 's/.*"step": *\([0-9]*\).*/\1/p' | head -1 || echo none)
    say "kill $killed ($what + ${delay_ms} ms; the run had reported update $(progress "$log" || true)): last.pt at update ${step:-none}"
    [ -d "$run" ] && all_load "$run"
  else
    wait "$pid" || fail "a run failed on its own: $(tail -3 "$log")"
    break  # finished before the kill
  fi
done
all_load "$run"
got_sha=$(sha "$run/last.pt")
say "$killed kills ($in_startup in start-up), $starts starts ($resumes resumes, $fresh fresh), final last.pt weights $got_sha"
[ "$killed" -ge "$kills" ] || fail "only $killed kills landed before the run finished (raise --steps)"
[ "$got_sha" = "$ref_sha" ] || fail "final weights differ from the uninterrupted run's"
for f in best.pt avg.pt; do
  [ "$(sha "$run/$f")" = "$(sha "$work/ref/$f")" ] || fail "$f differs from the uninterrupted run's"
done
[ "$(cd "$run" && ls step-*.pt)" = "$(cd "$work/ref" && ls step-*.pt)" ] || fail "step checkpoints differ"
say "OK: bit-identical to the uninterrupted run (last.pt, best.pt, avg.pt, step files)"
