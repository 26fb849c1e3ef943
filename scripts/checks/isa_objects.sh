#!/usr/bin/env bash
# The per-instruction-set kernel objects (src/*/cpu/*.o) define no weak function (inline functions and templates
# with external linkage are): the linker keeps one copy of such a function for the whole program, and a copy built
# for AVX2 or AVX-512 would then run on CPUs without those instructions. (Weak data -- the typeinfo that
# sanitizers emit -- is the same at every level.)
#   scripts/checks/isa_objects.sh OBJECT...   (';'-separated lists too: ctest Isa.KernelObjectsShareNoSymbols
#                                              passes mtx_core's objects)
set -euo pipefail
checked=0 bad=0
IFS=';' read -r -a objects <<< "$(IFS=';'; echo "$*")"
for o in "${objects[@]}"; do
  case "$o" in */cpu/*.o) ;; *) continue ;; esac
  checked=$((checked + 1))
  symbols=$(nm --defined-only -C "$o")  # fails the check when nm cannot read it
  shared=$(awk '$2 == "W"' <<< "$symbols")
  if [ -n "$shared" ]; then
    echo "isa_objects: $o defines weak functions another unit's copy may replace:" >&2
    echo "$shared" >&2
    bad=1
  fi
done
[ "$checked" -gt 0 ] || { echo "isa_objects: no per-ISA kernel objects among the arguments" >&2; exit 1; }
[ "$bad" = 0 ] || exit 1
echo "isa_objects: $checked kernel objects, no weak functions"
