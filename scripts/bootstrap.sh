#!/usr/bin/env bash
# Everything a run of mtx needs on a fresh Debian bookworm machine, each step skipped when done:
# install the packages, configure and build, fetch Multi30k into data/multi30k.
#   scripts/bootstrap.sh [--torch debian|pip] [--mirror DIR] [--run-only]
#     --torch pip: LibTorch 2.x from PyPI's torch in .venv/, built into build-torch2/ (default: Debian's 1.13, build/)
#     --mirror DIR: a local copy of the Multi30k .gz files
#     --run-only: install and build only what running mtx needs (the binary and its shim; no test-only packages,
#                 no test binary), as scripts/quickstart.sh does; scripts/test.sh adds the rest later
set -euo pipefail
cd "$(dirname "$0")/.."
mirror_args=()
torch_args=()
only_args=()
build_args=()
usage="usage: $0 [--torch debian|pip] [--mirror DIR] [--run-only]"
while [ $# -gt 0 ]; do
  case "$1" in
    --mirror) [ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }
              mirror_args=(--mirror "$2"); shift 2 ;;
    --torch) [ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }
             torch_args=(--torch "$2"); shift 2 ;;
    --run-only) only_args=(--run-only); build_args=(--target mtx); shift ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
scripts/setup.sh "${torch_args[@]}" "${only_args[@]}"
scripts/build.sh "${torch_args[@]}" "${build_args[@]}"
scripts/get_multi30k.sh data/multi30k "${mirror_args[@]}"
