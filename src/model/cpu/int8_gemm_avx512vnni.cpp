// The int8 GEMM on AVX-512 VNNI (vpdpbusd: 64 8-bit multiply-adds per instruction): compiled with the avx512vnni
// level's flags (CMakeLists.txt), called only where the kernels run at that level (util/cpu_isa.h). Internal
// linkage throughout and no library headers but the intrinsics'.
#include "int8_kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstring>

#include "tails.h"

// GCC 12's own AVX-512 intrinsics (_mm512_max_ps, _mm512_reduce_max_ps, and the epilogue's conversions once
// inlined) read an _mm512_undefined_ps() it then warns about (a false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace mtx::model::int8::kernels {
namespace {

constexpr int64_t kPanel = 32;  // outputs per packed panel: two 16-lane int32 accumulators per row
constexpr int64_t kGroup = 4;   // inputs per vpdpbusd lane
constexpr int kRows = 8;        // rows per tile: 16 accumulators, 2 weight vectors, 1 broadcast

__mmask16 lanes(int64_t out, int64_t n) {
  const int64_t left = out - n;
  return left >= 16 ? __mmask16(0xFFFF) : left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1u);
}

// acc - comp, scaled by sx * sw, plus the bias: one row's 16 outputs from n.
inline void store_outputs(__m512i acc, const int32_t* comp, const float* sw, const float* bias, float sx, float* y,
                          __mmask16 mask) {
  const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(sx), _mm512_loadu_ps(sw));
  const __m512 v = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc, _mm512_loadu_si512(comp)));
  _mm512_mask_storeu_ps(y, mask, _mm512_fmadd_ps(v, scale, _mm512_loadu_ps(bias)));
}

// R rows of u against one panel (32 outputs from n0): y[r][n0 ..] for r < R.
template <int R>
inline void tile(const uint8_t* u, int64_t in_pad, const uint8_t* panel, int64_t groups, const int32_t* comp,
                 const float* sw, const float* bias, const float* sx, float* y, int64_t out, int64_t n0) {
  __m512i acc0[R], acc1[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_si512();
  for (int64_t g = 0; g < groups; ++g) {
    const __m512i w0 = _mm512_loadu_si512(panel + g * 128);
    const __m512i w1 = _mm512_loadu_si512(panel + g * 128 + 64);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      int32_t four;
      std::memcpy(&four, u + r * in_pad + g * kGroup, sizeof(four));
      const __m512i a = _mm512_set1_epi32(four);
      acc0[r] = _mm512_dpbusd_epi32(acc0[r], a, w0);
      acc1[r] = _mm512_dpbusd_epi32(acc1[r], a, w1);
    }
  }
  const __mmask16 m0 = lanes(out, n0), m1 = lanes(out, n0 + 16);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    store_outputs(acc0[r], comp + n0, sw + n0, bias + n0, sx[r], y + r * out + n0, m0);
    if (m1) store_outputs(acc1[r], comp + n0 + 16, sw + n0 + 16, bias + n0 + 16, sx[r], y + r * out + n0 + 16, m1);
  }
}

}  // namespace

void quantize_rows_avx512vnni(const float* x, int64_t x_stride, int64_t in, int64_t in_pad, int64_t begin, int64_t end,
                              int levels, uint8_t* u, float* sx) {
  const float top = float(levels);
  const __m512i lo = _mm512_set1_epi32(-levels), hi = _mm512_set1_epi32(levels), shift = _mm512_set1_epi32(128);
  for (int64_t r = begin; r < end; ++r) {
    const float* xr = x + r * x_stride;
    uint8_t* ur = u + r * in_pad;
    // vmaxps returns its second operand where either is NaN: max(|x_k|, m) keeps the lane's m where |x_k| is NaN,
    // as std::max(m, |x_k|) does (int8::quantize_rows). With the operands the other way round a NaN would take the
    // lane's maximum out of the row's, and the whole row would quantize against a smaller scale.
    __m512 mx = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 16 <= in; k += 16) mx = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(xr + k)), mx);
    const __mmask16 tail = __mmask16((1u << (in - k)) - 1u);
    if (k < in) mx = _mm512_max_ps(_mm512_abs_ps(_mm512_maskz_loadu_ps(tail, xr + k)), mx);
    const float maxabs = _mm512_reduce_max_ps(mx);
    sx[r] = maxabs / top;
    const __m512 inv = _mm512_set1_ps(maxabs > 0 ? top / maxabs : 0.0f);
    for (k = 0; k + 16 <= in; k += 16) {
      __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xr + k), inv));  // round to nearest even
      q = _mm512_add_epi32(_mm512_min_epi32(_mm512_max_epi32(q, lo), hi), shift);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(ur + k), _mm512_cvtepi32_epi8(q));
    }
    if (k < in) {
      __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(tail, xr + k), inv));
      q = _mm512_add_epi32(_mm512_min_epi32(_mm512_max_epi32(q, lo), hi), shift);
      _mm512_mask_cvtepi32_storeu_epi8(ur + k, tail, q);
    }
    for (k = in; k < in_pad; ++k) ur[k] = 128;
  }
}

void gemm_panels_avx512vnni(const uint8_t* u, int64_t rows, int64_t in_pad, const uint8_t* packed, int64_t p_begin,
                            int64_t p_end, const int32_t* comp, const float* sw, const float* bias, const float* sx,
                            float* y, int64_t out) {
  const int64_t groups = in_pad / kGroup;
  for (int64_t p = p_begin; p < p_end; ++p) {
    const uint8_t* panel = packed + p * groups * 128;
    const int64_t n0 = p * kPanel;
    int64_t m = 0;
    for (; m + kRows <= rows; m += kRows) {
      tile<kRows>(u + m * in_pad, in_pad, panel, groups, comp, sw, bias, sx + m, y + m * out, out, n0);
    }
    model::kernels::with_tail_rows<kRows>(rows - m, [&](auto r) {
      tile<decltype(r)::value>(u + m * in_pad, in_pad, panel, groups, comp, sw, bias, sx + m, y + m * out, out, n0);
    });
  }
}

}  // namespace mtx::model::int8::kernels

#pragma GCC diagnostic pop

#endif
