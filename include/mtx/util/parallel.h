// A plain fork-join loop on std::threads, for mtx's own per-element work (dropout masks, metric
// statistics). LibTorch's at::parallel_for is inline and runs serially in code not built with -fopenmp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace mtx {

// Calls fn(begin, end) over [0, n) in at most `threads` contiguous chunks of at least `grain` elements,
// the first on the calling thread; returns when all are done. fn must not throw.
template <class F>
void parallel_for(int64_t n, int64_t grain, int threads, F fn) {
  const int64_t chunks =
      std::min<int64_t>(std::max(threads, 1), (n + std::max<int64_t>(grain, 1) - 1) / std::max<int64_t>(grain, 1));
  if (chunks <= 1) {
    if (n > 0) fn(int64_t(0), n);
    return;
  }
  const int64_t size = (n + chunks - 1) / chunks;
  std::vector<std::thread> pool;
  for (int64_t c = 1; c < chunks; ++c) {
    const int64_t begin = c * size, end = std::min(n, begin + size);
    if (begin < end) pool.emplace_back([=, &fn] { fn(begin, end); });
  }
  fn(int64_t(0), std::min(n, size));
  for (auto& t : pool) t.join();
}

}  // namespace mtx
