#!/usr/bin/env bash
# All fault checks: kill -9 and resume, disk full, damaged checkpoints.
#   scripts/faults/run.sh            the full form (20 kills over 480 updates, 12 byte flips)
#   scripts/faults/run.sh --short    CI's form (5 kills over 150 updates, 4 flips)
# MTX (the binary) and DATA (Multi30k) as in common.sh.
set -euo pipefail
here=$(dirname "$0")
if [ "${1:-}" = "--short" ]; then
  "$here/kill_resume.sh" --kills 5 --steps 150
  "$here/disk_full.sh"
  "$here/corrupt.sh" --flips 4
else
  "$here/kill_resume.sh"
  "$here/disk_full.sh"
  "$here/corrupt.sh"
fi
echo "faults: all OK"
