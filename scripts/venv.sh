#!/usr/bin/env bash
# The project-local Python environment (.venv/, git-ignored) for peers, oracles and converters -- never
# needed to run mtx itself. Creates it when missing and installs the requirements given that are not yet
# satisfied, so re-running is quick:
#   scripts/venv.sh REQUIREMENT...      e.g. scripts/venv.sh sacrebleu==2.6.0 'torch==2.15.0'
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${MTX_VENV:-.venv}
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3   # Debian's python, whose venv module setup.sh installs
if [ ! -x "$venv/bin/python" ]; then
  if ! "$py" -m venv "$venv" >/dev/null 2>&1; then
    rm -rf "$venv"
    MTX_EXTRA_PACKAGES="python3-venv python3-pip" scripts/setup.sh --packages-only >/dev/null
    "$py" -m venv "$venv"
  fi
  "$venv/bin/python" -m pip install -q --upgrade pip
fi
[ $# -gt 0 ] || exit 0
# pip's own check of what is installed is slow for large wheels; ask importlib.metadata first.
todo=()
for req in "$@"; do
  "$venv/bin/python" - "$req" <<'PY' 2>/dev/null || todo+=("$req")
import sys, importlib.metadata as md
from pip._vendor.packaging.requirements import Requirement
r = Requirement(sys.argv[1])
sys.exit(0 if r.specifier.contains(md.version(r.name), prereleases=True) else 1)
PY
done
if [ ${#todo[@]} -gt 0 ]; then
  echo "venv: installing ${todo[*]} into $venv" >&2
  "$venv/bin/python" -m pip install -q "${todo[@]}"
fi
