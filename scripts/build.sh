#!/usr/bin/env bash
# Configure (once) and build mtx, its sentencepiece shim and the tests.
#   scripts/build.sh                 against Debian's LibTorch 1.13 into build/ (the default)
#   scripts/build.sh --torch pip     against PyTorch 2.x in .venv/ (scripts/setup.sh --torch pip) into build-torch2/,
#                                    with the Python package's module (build-torch2/python/mtx)
#   scripts/build.sh --target mtx    only the binary and its shim (what scripts/quickstart.sh runs)
#   MTX_BUILD_DIR=... to build elsewhere; other arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
torch=debian
if [ "${1:-}" = "--torch" ]; then
  [ $# -ge 2 ] || { echo "build: --torch needs debian or pip" >&2; exit 2; }
  torch=$2
  shift 2
fi
target=()
if [ "${1:-}" = "--target" ]; then
  [ $# -ge 2 ] || { echo "build: --target needs a target name (e.g. mtx)" >&2; exit 2; }
  target=(--target "$2")
  shift 2
fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
case "$torch" in
  debian) build=${MTX_BUILD_DIR:-build}; prefix=() ;;
  pip)
    build=${MTX_BUILD_DIR:-build-torch2}
    [ -x .venv/bin/python ] || { echo "build: no .venv; run scripts/setup.sh --torch pip first" >&2; exit 1; }
    prefix=(-DCMAKE_PREFIX_PATH="$(.venv/bin/python -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')")
    # The Python package's extension module too (docs/python.md): one compile of the library serves both.
    prefix+=(-DMTX_PYTHON=ON -DPython_EXECUTABLE="$PWD/.venv/bin/python")
    ;;
  *) echo "build: --torch is debian or pip, not '$torch'" >&2; exit 2 ;;
esac
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "${prefix[@]}" "$@"
fi
cmake --build "$build" -j "$(nproc)" "${target[@]}"
