#!/usr/bin/env bash
# The page at / of a live `mtx serve` of a trained model, driven in headless Chromium as a person uses it
# (tests/page/drive_page.py: a typed paragraph, auto-detection, a .docx uploaded and downloaded, a text over the
# server's limit, alternatives, no console error).
#   scripts/checks/page.sh MTX_BINARY CKPT [--screenshots DIR]      (env PY: the .venv's python)
# Exits 0 when every step passes, 1 on a failure, 77 (skip) without chromium or python-docx, unless
# MTX_REQUIRE_CHROMIUM=1 or MTX_REQUIRE_ORACLES=1 (then that fails).
set -euo pipefail
fail() { echo "page: FAIL: $*" >&2; exit 1; }
[ $# -ge 2 ] || { echo "usage: $0 MTX_BINARY CKPT [--screenshots DIR]" >&2; exit 2; }
mtx=$(realpath "$1") ckpt=$(realpath "$2")
shift 2
cd "$(dirname "$0")/../.."
py=${PY:-.venv/bin/python}
if ! command -v chromium >/dev/null; then
  [ "${MTX_REQUIRE_CHROMIUM:-}" = 1 ] && fail "MTX_REQUIRE_CHROMIUM=1 but there is no chromium"
  echo "page: SKIP: no chromium (apt-get install chromium)" >&2
  exit 77
fi
if ! "$py" -c 'import docx' 2>/dev/null; then
  [ "${MTX_REQUIRE_ORACLES:-}" = 1 ] && fail "no python-docx in $py (scripts/test.sh installs it)"
  echo "page: SKIP: no python-docx in $py" >&2
  exit 77
fi
exec "$py" tests/page/drive_page.py --mtx "$mtx" --ckpt "$ckpt" "$@"
