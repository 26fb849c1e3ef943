#!/usr/bin/env bash
# CI's closing report: the time of each step (MTX_STEP_TIMES, written by scripts/lib/step.sh) against its budget
# in .ci/budgets.tsv, the whole run against TOTAL seconds, and the slowest tests of every ctest log given. Exits 1,
# naming the step, when a step passed its budget or has none, or when the run passed TOTAL.
#   .ci/report.sh TIMES_FILE TOTAL_S ELAPSED_S [CTEST_LOG:SUITE ...]
set -euo pipefail
cd "$(dirname "$0")/.."
times=$1 total=$2 elapsed=$3
shift 3
status=0
echo
echo "ci: time per step (budgets: .ci/budgets.tsv)"
printf '%-40s %8s %8s  %s\n' step seconds budget ""
while IFS=$'\t' read -r name seconds; do
  budget=$(awk -F'\t' -v n="$name" '!/^#/ && $1 == n { print $2 }' .ci/budgets.tsv)
  mark=""
  if [ -z "$budget" ]; then
    mark="NO BUDGET: add it to .ci/budgets.tsv"
    status=1
  elif [ "$seconds" -gt "$budget" ]; then
    mark="OVER BUDGET"
    status=1
  fi
  printf '%-40s %8s %8s  %s\n' "$name" "$seconds" "${budget:--}" "$mark"
done < "$times"
printf '%-40s %8s %8s\n' "whole run" "$elapsed" "$total"
if [ $# -gt 0 ]; then
  echo
  echo "ci: the 30 slowest tests (seconds, suite, test)"
  for log in "$@"; do
    file=${log%%:*} suite=${log#*:}
    [ -f "$file" ] || continue
    # ctest's lines: "  12/315 Test  #45: Suite.Name .......   Passed    1.23 sec"
    sed -nE "s/^ *[0-9]+\/[0-9]+ +Test +#[0-9]+: ([^ ]+) .* ([0-9.]+) sec\$/\2\t$suite\t\1/p" "$file"
  done | sort -t$'\t' -k1,1 -g -r | awk -F'\t' 'NR <= 30 { printf "%8.1f  %-6s %s\n", $1, $2, $3 }'
fi
if [ "$status" != 0 ]; then
  awk -F'\t' 'NR == FNR { if (!/^#/) b[$1] = $2; next }
    !($1 in b) { printf "ci: step \"%s\" (%s s) has no budget: add a line for it to .ci/budgets.tsv\n", $1, $2 }
    ($1 in b) && $2 > b[$1] {
      printf "ci: step \"%s\" took %s s, over its budget of %s s in .ci/budgets.tsv: make it faster, or raise the budget with the reason in the commit\n", $1, $2, b[$1] }' \
    .ci/budgets.tsv "$times" >&2
fi
if [ "$elapsed" -gt "$total" ]; then
  echo "ci: the whole run took $elapsed s, over its $total s (CONTRIBUTING.md, \"CI's time\")" >&2
  status=1
fi
exit "$status"
