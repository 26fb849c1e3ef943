# Sourced by the test scripts: `step NAME CMD...` runs CMD; when MTX_STEP_TIMES names a file, it appends
# "NAME<TAB>SECONDS" there once CMD succeeds (.ci/run prints those lines as its per-step table and checks each
# against its budget in .ci/budgets.tsv).
step() {
  local name=$1 start=$SECONDS
  shift
  "$@"
  if [ -n "${MTX_STEP_TIMES:-}" ]; then
    printf '%s\t%s\n' "$name" "$((SECONDS - start))" >> "$MTX_STEP_TIMES"
  fi
}
