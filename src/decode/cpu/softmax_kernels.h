// Search's passes over a row of logits (the maximum, the sum of exponentials, the best few), one translation unit
// per instruction set (private to src/decode): the same loops compiled for each level; nothing is contracted into
// fused multiply-adds, and each lane sums in a fixed order, so every level gives the same numbers. No LibTorch.
#pragma once

#include <cstdint>

namespace mtx::decode::kernels {

struct TopEntry {
  float value;
  int64_t index;
};

struct RowLoops {
  float (*max)(const float* x, int64_t n);                 // max of x[0..n) (-inf for n = 0)
  float (*sum_exp)(const float* x, int64_t n, float max);  // sum of e^(x[i] - max), x[i] <= max
  // The m largest entries of x[0..n) (NaN never), best first, into out[0..m) (-inf and index -1 past what there
  // is); equal values keep the lower index first.
  void (*top)(const float* x, int64_t n, int64_t m, TopEntry* out);
};

RowLoops row_loops_generic();
#if defined(__x86_64__)
RowLoops row_loops_avx2();
RowLoops row_loops_avx512();
#endif

}  // namespace mtx::decode::kernels
