#!/usr/bin/env bash
# The executables find libstdc++'s symbols in libstdc++: it comes before every LibTorch library in their
# lookup order (DT_NEEDED). Some PyTorch wheels (2.11's libtorch.so) export statically linked copies of
# libstdc++ functions that jump through unresolved weak symbols; with LibTorch first, std::filesystem::remove_all
# crashed at address 0 on a GPU machine.
#   scripts/checks/link_order.sh EXECUTABLE...
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 EXECUTABLE..." >&2; exit 2; }
status=0
for exe in "$@"; do
  needed=$(readelf -d "$exe" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  stdcxx=$(grep -n '^libstdc++\.so' <<< "$needed" | head -n 1 | cut -d: -f1 || true)
  torch=$(grep -n -E '^lib(torch|c10)' <<< "$needed" | head -n 1 | cut -d: -f1 || true)
  if [ -z "$stdcxx" ]; then
    echo "link_order: $exe does not name libstdc++ (DT_NEEDED: $(tr '\n' ' ' <<< "$needed"))" >&2
    status=1
  elif [ -n "$torch" ] && [ "$stdcxx" -gt "$torch" ]; then
    echo "link_order: $exe names $(sed -n "${torch:-1}p" <<< "$needed") before libstdc++ (DT_NEEDED:" \
         "$(tr '\n' ' ' <<< "$needed")); link libstdc++ ahead of LibTorch (MTX_FIRST_LINK in CMakeLists.txt)" >&2
    status=1
  fi
done
[ "$status" = 0 ] && echo "link_order: libstdc++ ahead of LibTorch in $*"
exit "$status"
