#!/usr/bin/env bash
# The whole test suite on a fresh Debian bookworm machine: install, build, fetch Multi30k, ctest.
#   scripts/test.sh [--torch debian|pip] [--mirror DIR] [--skip-e2e] [-- CTEST_ARGS...]
#     --torch pip: the LibTorch 2.x build (build-torch2/) instead of the default Debian 1.13 one (build/)
#     --mirror DIR: a local copy of the Multi30k .gz files
#     --skip-e2e: leave out the minutes-long scripted end-to-end runs (scripts/e2e_tests.sh)
#     -- CTEST_ARGS: to ctest, e.g. -R REGEX to run a subset (.ci/run's 2.x suite)
# Each phase is a `step` (scripts/lib/step.sh): with MTX_STEP_TIMES set, its time is recorded there. ctest's
# output is kept in BUILD/ctest.log (per-test times: .ci/run lists the slowest).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/step.sh
torch_args=() mirror_args=() ctest_args=() skip_e2e=0
while [ $# -gt 0 ]; do
  case "$1" in
    --torch) torch_args=(--torch "$2"); shift 2 ;;
    --mirror) mirror_args=(--mirror "$2"); shift 2 ;;
    --skip-e2e) skip_e2e=1; shift ;;
    --) shift; ctest_args+=("$@"); break ;;
    *) echo "usage: $0 [--torch debian|pip] [--mirror DIR] [--skip-e2e] [-- CTEST_ARGS...]" >&2; exit 2 ;;
  esac
done
if [ "$skip_e2e" = 1 ]; then
  source scripts/e2e_tests.sh
  ctest_args+=(-E "$e2e_tests")
fi
build=build suite=1.13
[ "${torch_args[*]}" = "--torch pip" ] && build=build-torch2 suite=2.x
step "$suite: packages" scripts/setup.sh "${torch_args[@]}"
step "$suite: build" scripts/build.sh "${torch_args[@]}"
step "data" scripts/get_multi30k.sh data/multi30k "${mirror_args[@]}"
# CTranslate2 for the export parity test (Export.Ct2ScoresTargetsAsMtxDoes skips, saying so, without it).
step "$suite: python packages" scripts/venv.sh ctranslate2==4.8.5 safetensors==0.8.0 numpy ||
  echo "test: no ctranslate2 in .venv: the CTranslate2 export test skips" >&2
# transformers, its PyTorch, sentencepiece and protobuf: the importers' oracles (tests/oracles/hf_*.py), run by the
# end-to-end tests ImportHf.*; pymarian: Marian itself, the oracle of ImportMarian.*ByMarian*
# (tests/oracles/pymarian_oracle.py); libretranslatepy and schemathesis: clients of mtx serve nobody here wrote
# (tests/clients/third_party.py); python-docx, python-pptx, odfpy and pysrt: the documents' writers and readers
# (tests/documents/corpus.py). Once installed they must run: MTX_REQUIRE_ORACLES=1 fails them rather than skip.
if [ "$skip_e2e" = 0 ]; then
  if step "$suite: oracle packages" scripts/venv.sh "${MTX_TORCH:-torch==2.15.0}" transformers==5.24.0 sentencepiece==0.2.3 safetensors==0.8.0 protobuf==7.36.2 \
       libretranslatepy==2.1.4 schemathesis==4.32.5 deep-translator==1.11.4 requests werkzeug \
       python-docx==1.2.0 python-pptx==1.0.2 odfpy==1.4.1 pysrt==1.1.2 pymarian==1.12.42; then
    export MTX_REQUIRE_ORACLES=1
  elif [ "${CI:-}" = true ]; then
    echo "test: cannot install the importer's oracle (torch, transformers, sentencepiece) into .venv" >&2
    exit 1
  else
    echo "test: no transformers in .venv: the importer's exactness tests (ImportHf.*) skip" >&2
  fi
fi
# CI installs chromium (scripts/setup.sh): the page's browser test must then run, not skip.
[ "${CI:-}" = true ] && export MTX_REQUIRE_CHROMIUM=1
# Tests run side by side, one per core: OpenMP threads that spin between parallel regions would take the cores
# from each other's working threads (docs/environment_variables.md#omp_num_threads-omp_wait_policy).
build=${MTX_BUILD_DIR:-$build}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
run_ctest() { ctest --test-dir "$build" --output-on-failure -j "$(nproc)" "${ctest_args[@]}" 2>&1 | tee "$build/ctest.log"; }
step "$suite: tests" run_ctest
# The 2.x build holds the Python package's module: build its wheel from the same build directory and install it
# as a user would, in a fresh virtual environment (scripts/check_wheel.sh; the library is not compiled again).
if [ "$suite" = 2.x ]; then
  step "2.x: wheel" scripts/check_wheel.sh --build-dir "$build"
fi
