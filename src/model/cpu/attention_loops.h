// The loops of attention_kernels.h, included once by each per-instruction-set unit: internal linkage, so each
// unit keeps its own compilation of them.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

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

void query_loop(const float* q, const float* k, int64_t k_stride, const float* v, int64_t v_stride, const bool* mask,
                int64_t T, int64_t D, float scale, float* w, float* out) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  float top = kNegInf;
  for (int64_t t = 0; t < T; ++t) {
    if (mask && !mask[t]) {
      w[t] = kNegInf;
      continue;
    }
    const float s = dot_loop(q, k + t * k_stride, D) * scale;
    w[t] = s;
    top = s > top ? s : top;
  }
  for (int64_t d = 0; d < D; ++d) out[d] = 0.0f;
  if (top == kNegInf) return;  // every key masked: zeros
  float sum = 0;
  for (int64_t t = 0; t < T; ++t) {
    const float e = mask && !mask[t] ? 0.0f : std::exp(w[t] - top);
    w[t] = e;
    sum += e;
  }
  for (int64_t t = 0; t < T; ++t) {
    if (w[t] == 0.0f) continue;
    axpy_loop(w[t] / sum, v + t * v_stride, out, D);
  }
}

constexpr AttentionLoops kLoops = {query_loop};

}  // namespace
}  // namespace mtx::model::kernels
