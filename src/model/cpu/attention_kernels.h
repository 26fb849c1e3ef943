// The fused attention's vector loops at CPU inference, one translation unit per instruction set (private to
// src/model): the same plain loops, compiled for each level, so that they vectorise to its width. Each lane sums
// in a fixed order and nothing is contracted into fused multiply-adds: a result depends on the data alone. No
// LibTorch.
#pragma once

#include <cstdint>

namespace mtx::model::kernels {

struct AttentionLoops {
  float (*dot)(const float* a, const float* b, int64_t n);       // sum of a[i] * b[i], in 8 lanes
  void (*axpy)(float w, const float* x, float* out, int64_t n);  // out[i] += w * x[i]
};

AttentionLoops attention_loops_generic();
#if defined(__x86_64__)
AttentionLoops attention_loops_avx2();
AttentionLoops attention_loops_avx512();
#endif

}  // namespace mtx::model::kernels
