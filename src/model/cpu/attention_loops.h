// The loops of attention_kernels.h, included once by each per-instruction-set unit: internal linkage, so each
// unit keeps its own compilation of them.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "attention_kernels.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

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

#if defined(__AVX2__)
// dot_loop of q with 8 keys at once (n a multiple of 8): each key's 8 lanes sum as dot_loop's do, and the two
// rounds of hadd and the halves' add form dot_loop's tree, ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)), so
// every score is the same float as dot_loop's.
inline __m256 dot8_keys(const float* q, const float* k, int64_t k_stride, int64_t n) {
  __m256 acc[8];
  for (int j = 0; j < 8; ++j) acc[j] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 qv = _mm256_loadu_ps(q + i);
    for (int j = 0; j < 8; ++j)
      acc[j] = _mm256_add_ps(acc[j], _mm256_mul_ps(qv, _mm256_loadu_ps(k + j * k_stride + i)));
  }
  // hadd(a, b) = [a0+a1, a2+a3, b0+b1, b2+b3 | a4+a5, a6+a7, b4+b5, b6+b7]
  const __m256 lo_hi0 = _mm256_hadd_ps(_mm256_hadd_ps(acc[0], acc[1]), _mm256_hadd_ps(acc[2], acc[3]));  // keys 0-3
  const __m256 lo_hi1 = _mm256_hadd_ps(_mm256_hadd_ps(acc[4], acc[5]), _mm256_hadd_ps(acc[6], acc[7]));  // keys 4-7
  const __m128 s0 = _mm_add_ps(_mm256_castps256_ps128(lo_hi0), _mm256_extractf128_ps(lo_hi0, 1));
  const __m128 s1 = _mm_add_ps(_mm256_castps256_ps128(lo_hi1), _mm256_extractf128_ps(lo_hi1, 1));
  return _mm256_set_m128(s1, s0);
}

// out = sum over t of (w[t] / sum) * v_t for D = 8 V, in key order as the plain loop sums it (keys with w[t] 0
// skipped), with out's V vectors held in registers across the keys instead of stored and reloaded per key.
template <int V>
void weighted_sum8(const float* w, float sum, const float* v, int64_t v_stride, int64_t T, float* out) {
  __m256 acc[V];
  for (int j = 0; j < V; ++j) acc[j] = _mm256_setzero_ps();
  for (int64_t t = 0; t < T; ++t) {
    if (w[t] == 0.0f) continue;
    const __m256 wt = _mm256_set1_ps(w[t] / sum);
    const float* vt = v + t * v_stride;
    for (int j = 0; j < V; ++j) acc[j] = _mm256_add_ps(acc[j], _mm256_mul_ps(wt, _mm256_loadu_ps(vt + 8 * j)));
  }
  for (int j = 0; j < V; ++j) _mm256_storeu_ps(out + 8 * j, acc[j]);
}

// weighted_sum8 for D a multiple of 8 up to 64; false where D is another size.
bool weighted_sum_in_registers(const float* w, float sum, const float* v, int64_t v_stride, int64_t T, int64_t D,
                               float* out) {
  switch (D) {
    case 8:
      weighted_sum8<1>(w, sum, v, v_stride, T, out);
      return true;
    case 16:
      weighted_sum8<2>(w, sum, v, v_stride, T, out);
      return true;
    case 24:
      weighted_sum8<3>(w, sum, v, v_stride, T, out);
      return true;
    case 32:
      weighted_sum8<4>(w, sum, v, v_stride, T, out);
      return true;
    case 40:
      weighted_sum8<5>(w, sum, v, v_stride, T, out);
      return true;
    case 48:
      weighted_sum8<6>(w, sum, v, v_stride, T, out);
      return true;
    case 56:
      weighted_sum8<7>(w, sum, v, v_stride, T, out);
      return true;
    case 64:
      weighted_sum8<8>(w, sum, v, v_stride, T, out);
      return true;
    default:
      return false;
  }
}
#endif

void axpy_loop(float w, const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] += w * x[i];
}

void query_loop(const float* q, const float* k, int64_t k_stride, const float* v, int64_t v_stride, const bool* mask,
                int64_t T, int64_t D, float scale, float* w, float* out) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  float top = kNegInf;
  int64_t scored = 0;  // keys whose w[t] holds the score already (masked or not)
#if defined(__AVX2__)
  if (D % 8 == 0) {
    for (; scored + 8 <= T; scored += 8) {
      _mm256_storeu_ps(w + scored,
                       _mm256_mul_ps(dot8_keys(q, k + scored * k_stride, k_stride, D), _mm256_set1_ps(scale)));
    }
  }
#endif
  for (int64_t t = 0; t < T; ++t) {
    if (mask && !mask[t]) {
      w[t] = kNegInf;
      continue;
    }
    const float s = t < scored ? w[t] : dot_loop(q, k + t * k_stride, D) * scale;
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
#if defined(__AVX2__)
  if (weighted_sum_in_registers(w, sum, v, v_stride, T, D, out)) return;
#endif
  for (int64_t t = 0; t < T; ++t) {
    if (w[t] == 0.0f) continue;
    axpy_loop(w[t] / sum, v + t * v_stride, out, D);
  }
}

constexpr AttentionLoops kLoops = {query_loop};

}  // namespace
}  // namespace mtx::model::kernels
