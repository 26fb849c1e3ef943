#!/usr/bin/env bash
# The per-instruction-set kernel objects (src/*/cpu/*.o) define no weak function (inline functions and templates
# with external linkage are): the linker keeps one copy of such a function for the whole program, and a copy built
# for AVX2 or AVX-512 would then run on CPUs without those instructions. (Weak data -- the typeinfo that
# sanitizers emit -- is the same at every level.) Nor do they initialize anything at load time: a static
# initializer runs on every CPU, before any level is checked. (GCC's ASan registers globals from initializers with
# a priority in their name, _GLOBAL__sub_I_00099_...: those are the sanitizer's own.)
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
  initializers=$(grep -E '_GLOBAL__sub_I_' <<< "$symbols" | grep -vE '_GLOBAL__sub_I_[0-9]{5}_' || true)
  if [ -n "$initializers" ]; then
    echo "isa_objects: $o initializes data at load time (make it constexpr):" >&2
    echo "$initializers" >&2
    bad=1
  fi
done
[ "$checked" -gt 0 ] || { echo "isa_objects: no per-ISA kernel objects among the arguments" >&2; exit 1; }
[ "$bad" = 0 ] || exit 1
echo "isa_objects: $checked kernel objects, no weak functions, no static initializers"
