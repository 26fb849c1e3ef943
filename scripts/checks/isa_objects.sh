#!/usr/bin/env bash
# The per-instruction-set kernel objects (src/*/cpu/*.o) define no symbol the linker may merge with another
# unit's (weak or unique, as inline functions and templates with external linkage are): such a copy, built for
# AVX2 or AVX-512, could stand in for every unit's and run on a CPU without those instructions.
#   scripts/checks/isa_objects.sh OBJECT...   (ctest Isa.KernelObjectsShareNoSymbols passes mtx_core's objects)
set -euo pipefail
checked=0 bad=0
for o in "$@"; do
  case "$o" in */cpu/*.o) ;; *) continue ;; esac
  checked=$((checked + 1))
  shared=$(nm --defined-only -C "$o" | awk '$2 ~ /^[WVu]$/' || true)
  if [ -n "$shared" ]; then
    echo "isa_objects: $o defines symbols another unit's copy may replace:" >&2
    echo "$shared" >&2
    bad=1
  fi
done
[ "$checked" -gt 0 ] || { echo "isa_objects: no per-ISA kernel objects among the arguments" >&2; exit 1; }
[ "$bad" = 0 ] || exit 1
echo "isa_objects: $checked kernel objects, no shared symbols"
