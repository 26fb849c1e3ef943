// The packed float GEMM on AVX-512: compiled with the avx512 level's flags (CMakeLists.txt), called only where
// the kernels run at that level or wider (util/cpu_isa.h). Internal linkage throughout and no library headers
// but the intrinsics', so that no code built for AVX-512 can stand in for another unit's.
#include "fp32_kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "tails.h"

namespace mtx::model::fp32::kernels {
namespace {

constexpr int kCols = 2;  // 16-lane vectors per row of a tile
static_assert(16 * kCols == kPanel, "a tile covers one panel");
constexpr int64_t kDepth = 256;  // k per pass: a panel's slice (256 x 32 floats, 32 KB) stays in L1 across the rows
constexpr int kRows = 8;         // rows per tile: 16 accumulators, 2 weight vectors, 1 broadcast

// The lanes of a 16-wide vector at output n that are real outputs (n < out).
__mmask16 lanes(int64_t out, int64_t n) {
  const int64_t left = out - n;
  return left >= 16 ? __mmask16(0xFFFF) : left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1u);
}

// R rows of x (row stride in) against one panel's k-slice [k0, k0 + depth): the running sums live in y between
// slices (first: start from 0; last: add the bias), so each output is one fma chain over k in order.
template <int R>
inline void tile(const float* x, int64_t in, const float* slice, int64_t depth, const float* bias, float* y,
                 int64_t out, const __mmask16* mask, bool first, bool last) {
  __m512 acc[R][kCols];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int c = 0; c < kCols; ++c) {
      acc[r][c] = first || !mask[c] ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask[c], y + r * out + 16 * c);
    }
  }
  for (int64_t k = 0; k < depth; ++k) {
    __m512 w[kCols];
#pragma GCC unroll 4
    for (int c = 0; c < kCols; ++c) w[c] = _mm512_loadu_ps(slice + k * kPanel + 16 * c);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 a = _mm512_set1_ps(x[r * in + k]);
#pragma GCC unroll 4
      for (int c = 0; c < kCols; ++c) acc[r][c] = _mm512_fmadd_ps(a, w[c], acc[r][c]);
    }
  }
#pragma GCC unroll 4
  for (int c = 0; c < kCols; ++c) {
    if (!mask[c]) continue;
    const __m512 b = _mm512_loadu_ps(bias + 16 * c);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      _mm512_mask_storeu_ps(y + r * out + 16 * c, mask[c], last ? _mm512_add_ps(acc[r][c], b) : acc[r][c]);
    }
  }
}

}  // namespace

void gemm_panels_avx512(const float* x, int64_t rows, int64_t in, const float* packed, int64_t p_begin, int64_t p_end,
                        const float* bias, float* y, int64_t out) {
  for (int64_t p = p_begin; p < p_end; ++p) {
    const float* panel = packed + p * in * kPanel;
    const int64_t n0 = p * kPanel;
    __mmask16 mask[kCols];
    for (int c = 0; c < kCols; ++c) mask[c] = lanes(out, n0 + 16 * c);
    const float* b = bias + n0;
    for (int64_t k0 = 0; k0 < in; k0 += kDepth) {
      const int64_t depth = in - k0 < kDepth ? in - k0 : kDepth;
      const bool first = k0 == 0, last = k0 + depth == in;
      const float* slice = panel + k0 * kPanel;
      int64_t m = 0;
      for (; m + kRows <= rows; m += kRows) {
        tile<kRows>(x + m * in + k0, in, slice, depth, b, y + m * out + n0, out, mask, first, last);
      }
      model::kernels::with_tail_rows<kRows>(rows - m, [&](auto r) {
        tile<decltype(r)::value>(x + m * in + k0, in, slice, depth, b, y + m * out + n0, out, mask, first, last);
      });
    }
  }
}

}  // namespace mtx::model::fp32::kernels

#endif
