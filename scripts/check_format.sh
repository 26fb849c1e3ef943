#!/usr/bin/env bash
# Checks that every C++ source and header is formatted as .clang-format says (clang-format 14, Debian's).
#   scripts/check_format.sh          report the files that differ, exit 1 if any
#   scripts/check_format.sh --fix    reformat them in place
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format-14 >/dev/null; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends clang-format-14
fi
mapfile -t files < <(git ls-files '*.cpp' '*.h')
if [ "${1:-}" = --fix ]; then
  clang-format-14 -i "${files[@]}"
  exit 0
fi
if ! clang-format-14 --dry-run -Werror "${files[@]}" 2> /tmp/mtx-format.$$; then
  grep -o '^[^:]*\.\(cpp\|h\):' /tmp/mtx-format.$$ | sort -u | sed 's/:$//; s/^/format: differs: /' >&2
  rm -f /tmp/mtx-format.$$
  echo "format: run scripts/check_format.sh --fix (clang-format-14 -i) and commit the result" >&2
  exit 1
fi
rm -f /tmp/mtx-format.$$
echo "format: ${#files[@]} files match .clang-format"
