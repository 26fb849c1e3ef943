#!/usr/bin/env bash
# The Python package as a user installs it: `pip wheel` of this repository against .venv's torch (no build
# isolation), then a fresh virtual environment with the wheel and that torch, where `import mtx` translates with
# MODEL (a model file; default: a tiny one trained here through the package).
#   scripts/check_wheel.sh [MODEL.pt]
# Needs scripts/setup.sh --torch pip. Builds in build-wheel/ (a compile of the library of its own).
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-}
dist=$(mktemp -d)
venv=$(mktemp -d)
trap 'rm -rf "$dist" "$venv"' EXIT
.venv/bin/pip wheel --no-build-isolation --no-deps . -w "$dist" -Cbuild-dir=build-wheel
wheel=$(ls "$dist"/mtx-*.whl)
echo "check_wheel: built $(basename "$wheel") ($(du -h "$wheel" | cut -f1))"
torch=$(.venv/bin/python -c 'import torch; print(torch.__version__.split("+")[0])')
/usr/bin/python3 -m venv "$venv"
"$venv/bin/pip" install -q "$wheel" "torch==$torch"
if [ -z "$model" ]; then
  model=$venv/model/run/best.pt
  "$venv/bin/python" - "$venv/model" "$(realpath data/multi30k)" <<'PY'
import sys, mtx
work, data = sys.argv[1:]
mtx.train("configs/tiny.json", overrides=[f"data.dir={data}", f"data.cache_dir={work}/cache", "train.max_steps=20",
          "train.threads=2"], out=f"{work}/run")
PY
fi
cd "$venv"  # not the repository: the installed package, not python/mtx
"$venv/bin/python" -c "
import sys, mtx
t = mtx.Translator(sys.argv[1])
print('check_wheel: mtx', mtx.__version__, 'translates:', t.translate(['Ein Hund läuft über die Wiese.'])[0].text)
" "$model"
