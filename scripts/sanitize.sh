#!/usr/bin/env bash
# The whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer (clang, Debian's LibTorch 1.13)
# in build-asan/, with the libFuzzer targets built alongside; then a short run of every fuzz target.
#   scripts/sanitize.sh [--mirror DIR] [--fuzz-seconds N] [--build-only] [--skip-e2e]
#     --fuzz-seconds N: per fuzz target (default 20; 0 skips fuzzing)
#     --skip-e2e: leave out the scripted end-to-end tests (faults, two hosts, CLI tutorials): CI runs them
#       in the plain suites
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/step.sh   # each phase a step: timed into MTX_STEP_TIMES when set
mirror_args=() fuzz_seconds=20 build_only=0 skip=
while [ $# -gt 0 ]; do
  case "$1" in
    --mirror) mirror_args=(--mirror "$2"); shift 2 ;;
    --fuzz-seconds) fuzz_seconds=$2; shift 2 ;;
    --build-only) build_only=1; shift ;;
    # The scripted end-to-end runs (faults, distributed, the minutes-long CLI tutorials) drive the mtx binary
    # for minutes; the plain suites run them, CI leaves them out here to keep within its time.
    --skip-e2e) source scripts/e2e_tests.sh; skip=$e2e_tests; shift ;;
    *) echo "usage: $0 [--mirror DIR] [--fuzz-seconds N] [--build-only] [--skip-e2e]" >&2; exit 2 ;;
  esac
done
step "asan: packages" env MTX_EXTRA_PACKAGES="clang ${MTX_EXTRA_PACKAGES:-}" scripts/setup.sh
build=build-asan
build_asan() {
  if [ ! -f "$build/CMakeCache.txt" ]; then
    CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DMTX_SANITIZE=ON -DMTX_FUZZ=ON
  fi
  cmake --build "$build" -j "$(nproc)"
}
step "asan: build" build_asan
[ "$build_only" = 1 ] && exit 0
step "data" scripts/get_multi30k.sh data/multi30k "${mirror_args[@]}"
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Tests run side by side, one per core: OpenMP threads that spin between parallel regions would take the cores
# from each other's working threads (docs/environment_variables.md#omp_num_threads-omp_wait_policy).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
# The server's tests (Serve*) run with LeakSanitizer on: a connection or request that outlives its answer (a
# reference cycle, say) is a leak at exit. The rest run without it: LibTorch's training and distributed code keep
# process-lifetime allocations that LeakSanitizer would report.
serve_tests='^Serve'
skip_args=()
[ -n "$skip" ] && skip_args=(-E "$skip")
serve_ctest() {
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=0 \
    ctest --test-dir "$build" --output-on-failure -j "$(nproc)" -R "$serve_tests" "${skip_args[@]}" 2>&1 |
    tee "$build/ctest-serve.log"
}
rest_ctest() {
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:detect_stack_use_after_return=0 \
    ctest --test-dir "$build" --output-on-failure -j "$(nproc)" -E "$serve_tests${skip:+|$skip}" 2>&1 |
    tee "$build/ctest.log"
}
step "asan: serve tests (LeakSanitizer on)" serve_ctest
step "asan: tests" rest_ctest
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:detect_stack_use_after_return=0
[ "$fuzz_seconds" = 0 ] || step "asan: fuzz targets" scripts/fuzz.sh --seconds "$fuzz_seconds" --build "$build"
