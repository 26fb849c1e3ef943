#!/usr/bin/env bash
# Damaged checkpoints: truncated, empty, not a checkpoint, and single bytes flipped at random offsets.
# Each use (info, translate, train --resume) either loads the very same weights (a flip in zip padding)
# or fails with exit 2 and one line naming the file: never a crash, never silently different weights.
#   scripts/faults/corrupt.sh [--flips N] [--work DIR]
set -euo pipefail
source "$(dirname "$0")/common.sh"
flips=12 work=""
while [ $# -gt 0 ]; do
  case "$1" in
    --flips) flips=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    *) echo "usage: $0 [--flips N] [--work DIR]" >&2; exit 2 ;;
  esac
done
[ -n "$work" ] || { work=$(mktemp -d); trap 'rm -rf "$work"' EXIT; }
make_corpus "$work/corpus" 500
write_config "$work/cfg.json" "$work/corpus" "$work/cache"
"$MTX" train --config "$work/cfg.json" --set train.max_steps=6 --out "$work/run" > "$work/train.log" 2>&1 ||
  fail "training failed: $(tail -3 "$work/train.log")"
good=$work/run/last.pt
good_sha=$(sha "$good")
size=$(stat -c %s "$good")

# check NAME FILE: every command that reads FILE fails in one line naming it, or loads the same weights.
rejected=0 harmless=0
check() {
  local name=$1 f=$2 cmd out rc lines dir
  dir=$work/resume-$name; rm -rf "$dir"; mkdir -p "$dir"; cp "$f" "$dir/last.pt"
  for cmd in "info --ckpt $f" "translate --ckpt $f" "train --resume $dir"; do
    set +e
    out=$(echo "ein Hund" | "$MTX" $cmd 2>&1 >/dev/null)
    rc=$?
    set -e
    if [ "$rc" = 0 ]; then
      [ "$cmd" != "info --ckpt $f" ] || [ "$(sha "$f")" = "$good_sha" ] || fail "$name: $cmd loaded different weights"
      continue
    fi
    lines=$(printf '%s\n' "$out" | grep -c .)
    [ "$rc" = 2 ] || fail "$name: mtx $cmd exited $rc: $out"
    [ "$lines" = 1 ] || fail "$name: mtx $cmd printed $lines lines: $out"
    case "$out" in *"$f"*|*"$dir/last.pt"*) ;; *) fail "$name: the error does not name the file: $out" ;; esac
  done
  if [ "$rc" = 0 ]; then
    harmless=$((harmless + 1)); say "$name: loads, same weights"
  else
    rejected=$((rejected + 1)); say "$name: $out"
  fi
}

head -c $((size / 2)) "$good" > "$work/truncated.pt"; check truncated "$work/truncated.pt"
: > "$work/empty.pt"; check empty "$work/empty.pt"
echo "not a checkpoint" > "$work/text.pt"; check text "$work/text.pt"
RANDOM=7
for i in $(seq "$flips"); do
  off=$(( (RANDOM * 32768 + RANDOM) % size ))
  cp "$good" "$work/flip.pt"
  byte=$(od -An -tu1 -j "$off" -N1 "$good" | tr -d ' ')
  printf "$(printf '\\%03o' $(( (byte ^ 0xff) & 0xff )))" | dd of="$work/flip.pt" bs=1 seek="$off" conv=notrunc 2>/dev/null
  check "flip@$off" "$work/flip.pt"
done
say "OK: $rejected damaged files refused in one line each, $harmless harmless flips loaded the same weights"
