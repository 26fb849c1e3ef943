// The packed float GEMM on AVX2 with FMA: compiled with -mavx2 -mfma (CMakeLists.txt), called only where the
// kernels run at the avx2 level or wider (util/cpu_isa.h). Internal linkage throughout and no library headers
// but the intrinsics', so that no code built for AVX2 can stand in for another unit's.
#include "fp32_kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "tails.h"

namespace mtx::model::fp32::kernels {
namespace {

constexpr int64_t kHalf = 16;     // outputs per half panel: two 8-lane vectors
constexpr int64_t kDepth = 1024;  // k per pass, a half panel's slice held in L2; sums go through y between passes
constexpr int kRows = 6;          // rows per tile: 12 accumulators, 2 weight vectors, 1 broadcast

// The lanes of an 8-wide vector at output n that are real outputs (n < out).
__m256i lanes(int64_t out, int64_t n) {
  const int64_t left = out - n;
  const int count = left >= 8 ? 8 : left <= 0 ? 0 : int(left);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// A tile's running sums for R rows of a half panel: from y (or 0 on the first slice), and back to y (+ bias on the
// last slice); plain moves where the half panel is whole (`full`).
template <int R>
inline void load_sums(__m256 (&acc)[R][2], const float* y, int64_t out, const __m256i* mask, bool full, bool first) {
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < 2; ++c) {
      acc[r][c] = first  ? _mm256_setzero_ps()
                  : full ? _mm256_loadu_ps(y + r * out + 8 * c)
                         : _mm256_maskload_ps(y + r * out + 8 * c, mask[c]);
    }
  }
}

template <int R>
inline void store_sums(const __m256 (&acc)[R][2], const float* bias, float* y, int64_t out, const __m256i* mask,
                       bool full, bool last) {
  for (int c = 0; c < 2; ++c) {
    const __m256 b = _mm256_loadu_ps(bias + 8 * c);
    for (int r = 0; r < R; ++r) {
      const __m256 v = last ? _mm256_add_ps(acc[r][c], b) : acc[r][c];
      if (full) {
        _mm256_storeu_ps(y + r * out + 8 * c, v);
      } else {
        _mm256_maskstore_ps(y + r * out + 8 * c, mask[c], v);
      }
    }
  }
}

// R rows of x (row stride in) against one half panel's k-slice [k0, k0 + depth) (row stride kPanel): the
// running sums live in y between slices (first: start from 0; last: add the bias).
template <int R, bool kPrefetch>
inline void tile(const float* x, int64_t in, const float* slice, int64_t depth, const float* bias, float* y,
                 int64_t out, const __m256i* mask, bool full, bool first, bool last, const float* next) {
  __m256 acc[R][2];
  load_sums<R>(acc, y, out, mask, full, first);
  for (int64_t k = 0; k < depth; ++k) {
    const __m256 w0 = _mm256_loadu_ps(slice + k * kPanel);
    const __m256 w1 = _mm256_loadu_ps(slice + k * kPanel + 8);
    if (kPrefetch) _mm_prefetch(reinterpret_cast<const char*>(next + k * kPanel), _MM_HINT_T0);
    for (int r = 0; r < R; ++r) {
      const __m256 a = _mm256_broadcast_ss(x + r * in + k);
      acc[r][0] = _mm256_fmadd_ps(a, w0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(a, w1, acc[r][1]);
    }
  }
  store_sums<R>(acc, bias, y, out, mask, full, last);
}

// The first tile also prefetches the slice that comes next (`next`, `depth` rows of kPanel; null at the end).
template <int R>
void tiles(const float* x, int64_t rows, int64_t in, const float* slice, int64_t depth, const float* bias, float* y,
           int64_t out, const __m256i* mask, bool full, bool first, bool last, const float* next) {
  int64_t m = 0;
  // Rows m .. m + r (r a std::integral_constant), prefetching when m is the first row.
  const auto run = [&](auto r) {
    if (m == 0 && next) {
      tile<decltype(r)::value, true>(x, in, slice, depth, bias, y, out, mask, full, first, last, next);
    } else {
      tile<decltype(r)::value, false>(x + m * in, in, slice, depth, bias, y + m * out, out, mask, full, first, last,
                                      next);
    }
  };
  for (; m + R <= rows; m += R) run(std::integral_constant<int, R>{});
  model::kernels::with_tail_rows<R>(rows - m, run);
}

// Sparse: R rows of x against a half panel's k-slice at the offsets ks[0 .. n) only; x's values at them in
// xs (kSparseStride per offset, Columns).
template <int R>
inline void sparse_tile(const float* xs, const float* slice, const int32_t* ks, int64_t n, const float* bias, float* y,
                        int64_t out, const __m256i* mask, bool full, bool first, bool last) {
  constexpr int64_t kAhead = 32;  // the weights' rows come in no order the hardware prefetcher follows
  __m256 acc[R][2];
  load_sums<R>(acc, y, out, mask, full, first);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = ks[i];
    if (i + kAhead < n) _mm_prefetch(reinterpret_cast<const char*>(slice + ks[i + kAhead] * kPanel), _MM_HINT_T0);
    const __m256 w0 = _mm256_loadu_ps(slice + k * kPanel);
    const __m256 w1 = _mm256_loadu_ps(slice + k * kPanel + 8);
    for (int r = 0; r < R; ++r) {
      const __m256 a = _mm256_broadcast_ss(xs + i * kSparseStride + r);
      acc[r][0] = _mm256_fmadd_ps(a, w0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(a, w1, acc[r][1]);
    }
  }
  store_sums<R>(acc, bias, y, out, mask, full, last);
}

// The columns of 8 rows: t[j] = (v[0][j], .., v[7][j]).
inline void transpose8(const __m256* v, __m256* t) {
  const __m256 a0 = _mm256_unpacklo_ps(v[0], v[1]), a1 = _mm256_unpackhi_ps(v[0], v[1]);
  const __m256 a2 = _mm256_unpacklo_ps(v[2], v[3]), a3 = _mm256_unpackhi_ps(v[2], v[3]);
  const __m256 a4 = _mm256_unpacklo_ps(v[4], v[5]), a5 = _mm256_unpackhi_ps(v[4], v[5]);
  const __m256 a6 = _mm256_unpacklo_ps(v[6], v[7]), a7 = _mm256_unpackhi_ps(v[6], v[7]);
  const __m256 b0 = _mm256_shuffle_ps(a0, a2, 0x44), b1 = _mm256_shuffle_ps(a0, a2, 0xEE);
  const __m256 b2 = _mm256_shuffle_ps(a1, a3, 0x44), b3 = _mm256_shuffle_ps(a1, a3, 0xEE);
  const __m256 b4 = _mm256_shuffle_ps(a4, a6, 0x44), b5 = _mm256_shuffle_ps(a4, a6, 0xEE);
  const __m256 b6 = _mm256_shuffle_ps(a5, a7, 0x44), b7 = _mm256_shuffle_ps(a5, a7, 0xEE);
  t[0] = _mm256_permute2f128_ps(b0, b4, 0x20);
  t[1] = _mm256_permute2f128_ps(b1, b5, 0x20);
  t[2] = _mm256_permute2f128_ps(b2, b6, 0x20);
  t[3] = _mm256_permute2f128_ps(b3, b7, 0x20);
  t[4] = _mm256_permute2f128_ps(b0, b4, 0x31);
  t[5] = _mm256_permute2f128_ps(b1, b5, 0x31);
  t[6] = _mm256_permute2f128_ps(b2, b6, 0x31);
  t[7] = _mm256_permute2f128_ps(b3, b7, 0x31);
}

}  // namespace

int64_t sparse_columns_avx2(const float* x, int64_t rows, int64_t in, int32_t* ks, float* xs, int64_t* begin) {
  constexpr int R = kSparseRowsAvx2;
  static_assert(R <= 8 && kSparseStride == 8, "a tile's column is one 8-lane vector");
  const __m256 zero = _mm256_setzero_ps();
  int64_t n = 0;
  *begin++ = 0;
  for (int64_t m = 0; m < rows; m += R) {
    const int64_t height = rows - m < R ? rows - m : R;
    for (int64_t k0 = 0; k0 < in; k0 += kSparseDepthAvx2) {
      const int64_t k1 = in - k0 < kSparseDepthAvx2 ? in : k0 + kSparseDepthAvx2;
      for (int64_t c = k0; c < k1; c += 8) {
        const int64_t width = k1 - c < 8 ? k1 - c : 8;
        const __m256i valid = lanes(width, 0);
        __m256 v[8], t[8], any = zero;
        for (int r = 0; r < 8; ++r) {
          v[r] = r >= height  ? zero
                 : width == 8 ? _mm256_loadu_ps(x + (m + r) * in + c)
                              : _mm256_maskload_ps(x + (m + r) * in + c, valid);
          any = _mm256_or_ps(any, _mm256_cmp_ps(v[r], zero, _CMP_NEQ_UQ));  // NaN counts as nonzero
        }
        unsigned bits = unsigned(_mm256_movemask_ps(any));
        if (!bits) continue;
        transpose8(v, t);
        for (; bits; bits &= bits - 1) {
          const int j = __builtin_ctz(bits);
          ks[n] = int32_t(c - k0 + j);
          _mm256_storeu_ps(xs + n * kSparseStride, t[j]);
          ++n;
        }
      }
      *begin++ = n;
    }
  }
  return n;
}

void gemm_panels_sparse_avx2(int64_t rows, int64_t in, const float* packed, int64_t p_begin, int64_t p_end,
                             const float* bias, float* y, int64_t out, const Columns& columns) {
  constexpr int R = kSparseRowsAvx2;
  for (int64_t p = p_begin; p < p_end; ++p) {
    for (int64_t h = 0; h < kPanel / kHalf; ++h) {
      const int64_t n0 = p * kPanel + h * kHalf;
      if (n0 >= out) break;
      const __m256i mask[2] = {lanes(out, n0), lanes(out, n0 + 8)};
      const bool full = n0 + kHalf <= out;
      const float* half = packed + p * in * kPanel + h * kHalf;
      for (int64_t s = 0; s < columns.slices; ++s) {
        const int64_t k0 = s * kSparseDepthAvx2;
        const bool first = s == 0, last = s + 1 == columns.slices;
        int64_t m = 0;
        const auto run = [&](auto r) {
          const int64_t* range = columns.begin + m / R * columns.slices + s;
          sparse_tile<decltype(r)::value>(columns.values + range[0] * kSparseStride, half + k0 * kPanel,
                                          columns.k + range[0], range[1] - range[0], bias + n0, y + m * out + n0, out,
                                          mask, full, first, last);
        };
        for (; m + R <= rows; m += R) run(std::integral_constant<int, R>{});
        model::kernels::with_tail_rows<R>(rows - m, run);
      }
    }
  }
}

void gemm_panels_avx2(const float* x, int64_t rows, int64_t in, const float* packed, int64_t p_begin, int64_t p_end,
                      const float* bias, float* y, int64_t out) {
  for (int64_t p = p_begin; p < p_end; ++p) {
    for (int64_t h = 0; h < kPanel / kHalf; ++h) {
      const int64_t n0 = p * kPanel + h * kHalf;
      if (n0 >= out) break;
      const __m256i mask[2] = {lanes(out, n0), lanes(out, n0 + 8)};
      const bool full = n0 + kHalf <= out;  // vmaskmovps is slow on some CPUs (AMD's): plain moves where they can
      const float* half = packed + p * in * kPanel + h * kHalf;
      // The half panel after this one (the next panel's first), null past the range or the outputs.
      const int64_t p_next = h + 1 < kPanel / kHalf ? p : p + 1, h_next = h + 1 < kPanel / kHalf ? h + 1 : 0;
      const bool more = p_next < p_end && p_next * kPanel + h_next * kHalf < out;
      const float* next_half = more ? packed + p_next * in * kPanel + h_next * kHalf : nullptr;
      for (int64_t k0 = 0; k0 < in; k0 += kDepth) {
        const int64_t depth = in - k0 < kDepth ? in - k0 : kDepth;
        // Next: the next half's first slice after this half's last, else this half's next slice where it is as
        // deep as this one (the prefetch reads `depth` rows of it).
        const int64_t after = k0 + depth;
        const float* next = after == in ? next_half : in - after >= depth ? half + after * kPanel : nullptr;
        tiles<kRows>(x + k0, rows, in, half + k0 * kPanel, depth, bias + n0, y + n0, out, mask, full, k0 == 0,
                     after == in, next);
      }
    }
  }
}

}  // namespace mtx::model::fp32::kernels

#endif
