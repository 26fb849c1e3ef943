#!/usr/bin/env bash
# The Python package as a user installs it: `pip wheel` of this repository against .venv's torch (no build
# isolation), then a fresh virtual environment where `pip install` of the wheel brings the torch it requires and
# `import mtx` translates with MODEL (a model file; default: a tiny one trained here through the package).
#   scripts/check_wheel.sh [--build-dir DIR] [MODEL.pt]
#     --build-dir DIR: build in DIR (default build-wheel/, a compile of the library of its own). scripts/test.sh
#       --torch pip passes build-torch2/: the wheel build then keeps that build's settings and recompiles one file
#       (the one that holds the install prefix), so one LibTorch 2.x compile serves the tests and the wheel.
# Needs scripts/setup.sh --torch pip.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-wheel
if [ "${1:-}" = --build-dir ]; then
  [ $# -ge 2 ] || { echo "check_wheel: --build-dir needs a directory" >&2; exit 2; }
  build=$2
  shift 2
fi
model=${1:+$(realpath "$1")}
dist=$(mktemp -d)
venv=$(mktemp -d)
trap 'rm -rf "$dist" "$venv"' EXIT
# A build directory configured before (scripts/build.sh) keeps its options: pyproject.toml's defaults would turn
# its tests and tcmalloc off and so rebuild its executables.
keep=()
if [ -f "$build/CMakeCache.txt" ]; then
  for opt in MTX_BUILD_TESTS MTX_USE_TCMALLOC; do
    value=$(sed -n "s/^$opt:BOOL=//p" "$build/CMakeCache.txt")
    [ -n "$value" ] && keep+=("-Ccmake.define.$opt=$value")
  done
fi
start=$(date +%s)
.venv/bin/pip wheel -q --no-build-isolation --no-deps . -w "$dist" -Cbuild-dir="$build" "${keep[@]}"
wheel=$(ls "$dist"/mtx-*.whl)
requires=$(.venv/bin/python -c '
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    print(", ".join(l[len("Requires-Dist: "):] for l in z.read(meta).decode().splitlines() if l.startswith("Requires-Dist: ")))
' "$wheel")
echo "check_wheel: built $(basename "$wheel") ($(du -h "$wheel" | cut -f1), requires $requires) in $(($(date +%s) - start)) s"
# The fresh environment holds its own torch (PyPI's CUDA-enabled wheel: about 5.2 GB installed), so room for it is
# checked first, rather than pip failing halfway with "No space left on device".
need_gb=7
free_gb=$(( $(df -Pk "$venv" | awk 'NR == 2 { print $4 }') / 1024 / 1024 ))
if [ "$free_gb" -lt "$need_gb" ]; then
  echo "check_wheel: $free_gb GB free under $(dirname "$venv"); a fresh environment with torch needs about $need_gb GB" \
       "(set TMPDIR to a larger disk)" >&2
  exit 1
fi
/usr/bin/python3 -m venv "$venv"
"$venv/bin/pip" install -q "$wheel"  # and the torch release its metadata requires
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
