// The loops of attention_kernels.h, included once by each per-instruction-set unit: internal linkage, so each
// unit keeps its own compilation of them.
#pragma once

#include <cstdint>

#include "attention_kernels.h"

namespace mtx::model::kernels {
namespace {

// Lanes of 8 so that the compiler vectorises it; each lane sums in a fixed order.
float dot_loop(const float* a, const float* b, int64_t n) {
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) lane[j] += a[i + j] * b[i + j];
  }
  float s = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

void axpy_loop(float w, const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] += w * x[i];
}

constexpr AttentionLoops kLoops = {dot_loop, axpy_loop};

}  // namespace
}  // namespace mtx::model::kernels
