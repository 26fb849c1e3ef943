// The loops of softmax_kernels.h, included once by each per-instruction-set unit: internal linkage, so each unit
// keeps its own compilation of them.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>

#include "softmax_kernels.h"

namespace mtx::decode::kernels {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// e^x for x <= 0 (here x - max of a row), branch-free so that the loop vectorises (Cephes' expf polynomial;
// relative error under 2e-7). Arguments below -87.3 give ~1e-38 instead of 0: nothing a sum notices.
inline float exp_nonpositive(float x) {
  x = x < -87.33654f ? -87.33654f : x;
  const float n = (x * 1.44269504f + 12582912.f) - 12582912.f;  // round(x / ln 2)
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;    // x - n ln 2, in two parts
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.f;
  const int32_t bits = (int32_t(n) + 127) << 23;  // 2^n
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return y * scale;
}

float max_loop(const float* x, int64_t n) {
  float lane[16];
  for (float& l : lane) l = kNegInf;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int j = 0; j < 16; ++j) lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
  }
  float m = kNegInf;
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  for (const float l : lane) m = l > m ? l : m;
  return m;
}

// 16 lanes as one value, in GCC's (and clang's) vector extensions: each level compiles them to its own registers
// (4 x SSE, 2 x AVX2, 1 x AVX-512, 4 x NEON) with the same operations per lane, so every level computes the same
// numbers -- where the compilers' loop vectoriser gives up on the polynomial and leaves it scalar.
typedef float Floats16 __attribute__((vector_size(64)));
typedef int32_t Ints16 __attribute__((vector_size(64)));

// exp_nonpositive on each lane, operation for operation, in place (a 64-byte vector passed by value has an ABI
// that differs between levels: never across a call).
inline void exp_nonpositive(Floats16& x) {
  const Ints16 low = x < -87.33654f;  // lanes of all ones where x is below the clamp
  x = Floats16((Ints16(x) & ~low) | (Ints16(Floats16{} - 87.33654f) & low));
  const Floats16 n = (x * 1.44269504f + 12582912.f) - 12582912.f;
  const Floats16 r = x - n * 0.693359375f + n * 2.12194440e-4f;
  Floats16 p = Floats16{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const Floats16 y = p * r * r + r + 1.f;
  const Ints16 bits = (__builtin_convertvector(n, Ints16) + 127) << 23;  // 2^n
  x = y * Floats16(bits);
}

float sum_exp_loop(const float* x, int64_t n, float max) {
  Floats16 lanes = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    Floats16 v;
    std::memcpy(&v, x + i, sizeof v);
    v -= max;
    exp_nonpositive(v);
    lanes += v;
  }
  float sum = 0;
  for (; i < n; ++i) sum += exp_nonpositive(x[i] - max);
  for (int j = 0; j < 16; ++j) sum += lanes[j];
  return sum;
}

constexpr RowLoops kLoops = {max_loop, sum_exp_loop};

}  // namespace
}  // namespace mtx::decode::kernels
