// The tail of a row-blocked loop, shared by the per-instruction-set units: each includes it into its own
// anonymous namespace (internal linkage), so no unit's compilation can stand in for another's.
#pragma once

#include <cstdint>
#include <type_traits>

namespace mtx::model::kernels {
namespace {

// Calls f(std::integral_constant<int, n>{}) for the n = rows left after the whole tiles, 0 < n < Max, so that
// a tile template gets its row count at compile time; nothing for n = 0.
template <int Max, class F>
inline void with_tail_rows(int64_t n, F&& f) {
  if constexpr (Max > 1) {
    if (n == Max - 1) {
      f(std::integral_constant<int, Max - 1>{});
      return;
    }
    with_tail_rows<Max - 1>(n, f);
  }
}

}  // namespace
}  // namespace mtx::model::kernels
