#!/usr/bin/env bash
# Disk full while writing a checkpoint: the run dir is a small tmpfs, filled up before a resumed run's
# next checkpoint. Expected: one clear error line and a non-zero exit; the previous last.pt and best.pt
# intact (same weights, loadable); no temp file left behind.
#   scripts/faults/disk_full.sh [--work DIR]
# Needs a mount namespace: runs itself under `unshare -m` (root) or `unshare -rm` (user namespaces).
set -euo pipefail
source "$(dirname "$0")/common.sh"
work=""
[ "${1:-}" = "--work" ] && work=$2
if [ -z "${MTX_FAULTS_IN_NS:-}" ]; then
  flags=-m
  [ "$(id -u)" = 0 ] || flags=-rm
  if ! unshare $flags true 2>/dev/null; then
    echo "faults: disk_full: SKIPPED: no mount namespace here (needs root or unprivileged user namespaces)"
    exit 0
  fi
  MTX_FAULTS_IN_NS=1 MTX="$MTX" DATA="$DATA" exec unshare $flags -- bash "$0" "$@"
fi
[ -n "$work" ] || { work=$(mktemp -d); trap 'umount "$work/mnt" 2>/dev/null || true; rm -rf "$work"' EXIT; }
make_corpus "$work/corpus" 1000
write_config "$work/cfg.json" "$work/corpus" "$work/cache"
mkdir -p "$work/mnt"
mount -t tmpfs -o size=16m tmpfs "$work/mnt"
run=$work/mnt/run

"$MTX" train --config "$work/cfg.json" --set train.max_steps=12 --out "$run" > "$work/first.log" 2>&1 ||
  fail "first run failed: $(tail -3 "$work/first.log")"
last_sha=$(sha "$run/last.pt"); best_sha=$(sha "$run/best.pt")
ckpt_bytes=$(stat -c %s "$run/last.pt")
free=$(df --output=avail -B1 "$work/mnt" | tail -1)
keep=$((ckpt_bytes / 4))
fallocate -l $((free - keep)) "$work/mnt/filler" 2>/dev/null || dd if=/dev/zero of="$work/mnt/filler" bs=64k count=$(((free - keep) / 65536)) 2>/dev/null || true
say "checkpoint $ckpt_bytes bytes; $(df --output=avail -B1 "$work/mnt" | tail -1) bytes left on the run's file system"

set +e
"$MTX" train --resume "$run" --set train.max_steps=30 > "$work/full.log" 2>&1
rc=$?
set -e
errors=$(grep -c '^mtx: error' "$work/full.log" || true)
say "resumed run on a full disk: exit $rc; $(grep '^mtx: error' "$work/full.log" || echo 'no error line')"
[ "$rc" -ne 0 ] || fail "training on a full disk exited 0"
[ "$errors" = 1 ] || fail "expected one error line, got $errors: $(tail -5 "$work/full.log")"
grep -qi 'disk full\|no space' "$work/full.log" || fail "the error does not say the disk is full"
if grep -q 'terminate called\|Segmentation\|core dumped' "$work/full.log"; then fail "crashed: $(tail -5 "$work/full.log")"; fi
rm -f "$work/mnt/filler"
[ "$(sha "$run/last.pt")" = "$last_sha" ] || fail "last.pt changed"
[ "$(sha "$run/best.pt")" = "$best_sha" ] || fail "best.pt changed"
left=$(find "$run" -name '.*.tmp.*' | wc -l)
[ "$left" = 0 ] || fail "$left temp files left behind"
say "OK: one error line, exit $rc, last.pt and best.pt intact and loadable, no temp files"
