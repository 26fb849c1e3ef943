#!/usr/bin/env bash
# Install the Debian (bookworm) packages mtx builds and runs with. Skips apt entirely when
# everything is already installed, so re-running is quick.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git ca-certificates curl
  libtorch-dev libopenblas0-openmp
  libtcmalloc-minimal4   # linked into mtx: reuses freed tensor memory instead of page-faulting it back in
  libblas3   # the reference BLAS: only so the test of mtx's slow-BLAS warning can run
  libsentencepiece-dev sentencepiece
  libcli11-dev libspdlog-dev nlohmann-json3-dev libgtest-dev zlib1g-dev
  libutf8proc-dev   # Unicode categories and case mapping for sacreBLEU-exact tokenisation
)
# Optional extras, e.g. the PyTorch peer for scripts/bench: MTX_EXTRA_PACKAGES="python3-torch"
read -r -a extra <<< "${MTX_EXTRA_PACKAGES:-}"
packages+=("${extra[@]}")

missing=()
for p in "${packages[@]}"; do
  [ -n "$p" ] || continue
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = "installed" ] || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "setup: run as root or install sudo" >&2; exit 1; }
  sudo="sudo"
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
