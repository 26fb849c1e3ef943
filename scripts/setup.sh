#!/usr/bin/env bash
# Install what mtx builds and runs with. Skips apt (and pip) entirely when everything is already there,
# so re-running is quick.
#   scripts/setup.sh                 Debian's packages, LibTorch 1.13 (CPU) included: the default build
#   scripts/setup.sh --torch pip     Debian's packages but LibTorch, plus PyTorch 2.x (CUDA-enabled) from
#                                    PyPI into .venv/ (MTX_TORCH=torch==X.Y.Z picks another version)
#   scripts/setup.sh --packages-only the Debian packages of the chosen build, no pip
#   scripts/setup.sh --run-only      leave out what only the test suite uses (chromium, the reference BLAS,
#                                    iproute2): what scripts/quickstart.sh needs to build and run mtx
set -euo pipefail
cd "$(dirname "$0")/.."
torch=debian
pip=1
run_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --torch) [ $# -ge 2 ] || { echo "setup: --torch needs debian or pip" >&2; exit 2; }; torch=$2; shift 2 ;;
    --packages-only) pip=0; shift ;;
    --run-only) run_only=1; shift ;;
    *) echo "setup: unknown argument $1 (usage: $0 [--torch debian|pip] [--packages-only] [--run-only])" >&2; exit 2 ;;
  esac
done
case "$torch" in debian|pip) ;; *) echo "setup: --torch is debian or pip, not '$torch'" >&2; exit 2 ;; esac

packages=(
  build-essential cmake ninja-build ccache pkg-config git ca-certificates curl
  libtcmalloc-minimal4   # linked into mtx: reuses freed tensor memory instead of page-faulting it back in
  libsentencepiece-dev sentencepiece
  libcli11-dev libspdlog-dev nlohmann-json3-dev libgtest-dev zlib1g-dev
  libssl-dev        # OpenSSL's libcrypto: SHA-256 of checkpoints, tokenizers and caches
  libutf8proc-dev   # Unicode categories and case mapping for sacreBLEU-exact tokenisation
  libminizip-dev libyaml-cpp-dev   # Marian's .npz models and .yml files (mtx import --from marian)
  libboost-dev      # Boost.Beast/Asio, headers only: mtx serve's HTTP
  libgumbo-dev      # an HTML5 parser: inline markup placed on aligned words (text/markup.h)
  libicu-dev        # ICU: sentence segmentation with per-language abbreviations (text/segment.h)
  libcld2-dev       # CLD2: language identification for source "auto" and /detect (text/language_id.h)
  libpugixml-dev    # pugixml: the XML of .docx, .pptx, .odt and .odp documents (doc/document.h)
  libcmark-gfm-dev libcmark-gfm-extensions-dev  # cmark-gfm: Markdown documents (doc/document.h)
  libstemmer-dev    # Snowball stemmers: glossary terms matched in their inflected forms (decode/glossary.h)
  libgloo-dev       # the headers c10d's ProcessGroupGloo includes (data-parallel training on CPUs)
)
# What only the test suite uses (scripts/test.sh installs them; scripts/quickstart.sh does without).
test_packages=(
  chromium          # the serve page's test in a headless browser (ServeTest.ThePageTranslatesInHeadlessChromium)
  iproute2          # ip netns: the two-host test of distributed training
  libreoffice-writer-nogui libreoffice-impress-nogui  # opens translated documents (scripts/checks/documents.sh)
)
if [ "$torch" = debian ]; then
  packages+=(libtorch-dev libopenblas0-openmp
             libdnnl-dev)  # oneDNN's int8 GEMM for CPUs without VNNI (the libdnnl2 Debian's LibTorch links)
  test_packages+=(libblas3)  # the reference BLAS: only so the test of mtx's slow-BLAS warning can run
else
  packages+=(python3-venv python3-pip)   # .venv for PyPI's torch; its wheel brings its own BLAS (MKL)
fi
# Optional extras, e.g. the PyTorch peer for scripts/bench: MTX_EXTRA_PACKAGES="python3-torch"
read -r -a extra <<< "${MTX_EXTRA_PACKAGES:-}"
packages+=("${extra[@]}")
[ "$run_only" = 1 ] || packages+=("${test_packages[@]}")

missing=()
for p in "${packages[@]}"; do
  [ -n "$p" ] || continue
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = "installed" ] || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
else
  sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "setup: run as root or install sudo" >&2; exit 1; }
    sudo="sudo"
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ "$torch" = pip ] && [ "$pip" = 1 ]; then
  # The CUDA toolkit (nvcc, headers) must be there for torch's CMake package to configure a CUDA build.
  command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || \
    echo "setup: warning: no nvcc (CUDA toolkit) found; scripts/build.sh --torch pip needs one (CUDA 12.6 or newer)" >&2
  # pybind11 and scikit-build-core: the Python package (python/, built with the 2.x build: MTX_PYTHON);
  # pytest and sacrebleu: its tests.
  scripts/venv.sh "${MTX_TORCH:-torch==2.15.0}" pybind11==3.1.0 scikit-build-core==1.1.2 pytest==9.2.0 sacrebleu==2.6.0
  .venv/bin/python -c 'import torch; print("setup: PyTorch", torch.__version__, "in .venv (CUDA", torch.version.cuda, "compiled in)")'
fi
