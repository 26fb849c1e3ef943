// The loops of softmax_kernels.h, included once by each per-instruction-set unit: internal linkage, so each unit
// keeps its own compilation of them.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "softmax_kernels.h"

namespace mtx::decode::kernels {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// e^x = y * 2^n for x in [-87.34, 0], on a float or on each lane of a vector (T{} is 0 either way): Cephes' expf
// polynomial, relative error under 2e-7. Returns y; n is a whole number.
template <class T>
inline T exp_reduced(const T& x, T& n) {
  n = (x * 1.44269504f + 12582912.f) - 12582912.f;        // round(x / ln 2)
  const T r = x - n * 0.693359375f + n * 2.12194440e-4f;  // x - n ln 2, in two parts
  T p = T{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return p * r * r + r + 1.f;
}

// e^x for x <= 0 (here x - max of a row), branch-free. Arguments below -87.3 give ~1e-38 instead of 0: nothing a
// sum notices.
inline float exp_nonpositive(float x) {
  float n;
  const float y = exp_reduced(x < -87.33654f ? -87.33654f : x, n);
  const int32_t bits = (int32_t(n) + 127) << 23;  // 2^n
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return y * scale;
}

// Vectors of the level's native width in GCC's (and clang's) vector extensions -- 4 lanes (SSE, NEON), 8 (AVX2) or
// 16 (AVX-512) -- with the same operations on every lane, so that every level computes the same numbers (the
// compilers' loop vectoriser gives up on the polynomial and leaves it scalar; wider-than-native vector types are
// split badly).
#if defined(__AVX512F__)
constexpr int kWidth = 16;
#elif defined(__AVX__)
constexpr int kWidth = 8;
#else
constexpr int kWidth = 4;
#endif
typedef float Floats __attribute__((vector_size(sizeof(float) * kWidth)));
typedef int32_t Ints __attribute__((vector_size(sizeof(int32_t) * kWidth)));
constexpr int kLanes = 16;               // the sum's lanes: the same at every level
constexpr int kParts = kLanes / kWidth;  // vectors per 16 lanes

// exp_nonpositive on each lane, operation for operation, in place.
inline void exp_nonpositive(Floats& x) {
  const Ints low = x < -87.33654f;  // lanes of all ones where x is below the clamp
  Floats n;
  const Floats y = exp_reduced(Floats((Ints(x) & ~low) | (Ints(Floats{} - 87.33654f) & low)), n);
  const Ints bits = (__builtin_convertvector(n, Ints) + 127) << 23;  // 2^n
  x = y * Floats(bits);
}

// Lane j holds the largest x[i] for i = j mod 16 (a NaN never replaces a lane); the tail, then the lanes.
float max_loop(const float* x, int64_t n) {
  Floats lanes[kParts];
  for (Floats& l : lanes) l = Floats{} + kNegInf;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int p = 0; p < kParts; ++p) {
      Floats v;
      std::memcpy(&v, x + i + p * kWidth, sizeof v);
      const Ints greater = v > lanes[p];
      lanes[p] = Floats((Ints(v) & greater) | (Ints(lanes[p]) & ~greater));
    }
  }
  float m = kNegInf;
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  for (int p = 0; p < kParts; ++p) {
    for (int j = 0; j < kWidth; ++j) m = lanes[p][j] > m ? lanes[p][j] : m;
  }
  return m;
}

// Lane j of the sum adds e^(x[i] - max) for i = j mod 16 in order; the tail past the last 16 goes first, then the
// lanes in order.
float sum_exp_loop(const float* x, int64_t n, float max) {
  constexpr int kBlocks = 4;  // 16-wide blocks per pass: independent polynomial chains for the pipelines
  Floats lanes[kParts] = {};
  int64_t i = 0;
  for (; i + kBlocks * kLanes <= n; i += kBlocks * kLanes) {
    for (int b = 0; b < kBlocks; ++b) {
      for (int p = 0; p < kParts; ++p) {
        Floats e;
        std::memcpy(&e, x + i + b * kLanes + p * kWidth, sizeof e);
        e -= max;
        exp_nonpositive(e);
        lanes[p] += e;
      }
    }
  }
  for (; i + kLanes <= n; i += kLanes) {
    for (int p = 0; p < kParts; ++p) {
      Floats e;
      std::memcpy(&e, x + i + p * kWidth, sizeof e);
      e -= max;
      exp_nonpositive(e);
      lanes[p] += e;
    }
  }
  float sum = 0;
  for (; i < n; ++i) sum += exp_nonpositive(x[i] - max);
  for (int p = 0; p < kParts; ++p) {
    for (int j = 0; j < kWidth; ++j) sum += lanes[p][j];
  }
  return sum;
}

// The best m so far: an entry goes in when it beats the m-th best held (or fewer than m are held), equal values
// keeping the lower index.
struct TopM {
  TopEntry* out;
  int64_t m, filled = 0;
  float floor = kNegInf;  // the m-th best so far once m are held

  TopM(TopEntry* o, int64_t count) : out(o), m(count) {
    for (int64_t j = 0; j < m; ++j) out[j] = {kNegInf, -1};
  }
  void offer(float v, int64_t i) {
    if (!(v > floor) && !(filled < m && v == v)) return;
    int64_t j = filled < m ? filled++ : m - 1;
    while (j > 0 && v > out[j - 1].value) {
      out[j] = out[j - 1];
      --j;
    }
    out[j] = {v, i};
    if (filled == m) floor = out[m - 1].value;
  }
};

// Bit j set where x[j] > floor, for j < 16 (false for NaN).
inline uint32_t above_bits(const float* x, float floor) {
#if defined(__AVX512F__)
  return _mm512_cmp_ps_mask(_mm512_loadu_ps(x), _mm512_set1_ps(floor), _CMP_GT_OQ);
#elif defined(__AVX__)
  const __m256 f = _mm256_set1_ps(floor);
  return uint32_t(_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x), f, _CMP_GT_OQ))) |
         uint32_t(_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + 8), f, _CMP_GT_OQ))) << 8;
#elif defined(__SSE2__)
  const __m128 f = _mm_set1_ps(floor);
  uint32_t bits = 0;
  for (int q = 0; q < 4; ++q) bits |= uint32_t(_mm_movemask_ps(_mm_cmpgt_ps(_mm_loadu_ps(x + 4 * q), f))) << (4 * q);
  return bits;
#else
  uint32_t bits = 0;
  for (int j = 0; j < 16; ++j) bits |= uint32_t(x[j] > floor) << j;
  return bits;
#endif
}

// Once m are held, 16 at a time: a comparison with the m-th best skips most of a row, and only what beats it is
// offered, in order -- the entries that one at a time would have gone in (the floor only rises).
void top_loop(const float* x, int64_t n, int64_t m, TopEntry* out) {
  TopM top(out, m);
  int64_t i = 0;
  for (; i < n && top.filled < m; ++i) top.offer(x[i], i);
  for (; i + kLanes <= n; i += kLanes) {
    uint32_t above = above_bits(x + i, top.floor);
    while (above) {
      const int j = __builtin_ctz(above);
      above &= above - 1;
      top.offer(x[i + j], i + j);  // checks again: the floor may have risen
    }
  }
  for (; i < n; ++i) top.offer(x[i], i);
}

constexpr RowLoops kLoops = {max_loop, sum_exp_loop, top_loop};

}  // namespace
}  // namespace mtx::decode::kernels
