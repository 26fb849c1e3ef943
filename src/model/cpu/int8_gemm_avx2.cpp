// The int8 GEMM on AVX2 (no VNNI): compiled with -mavx2 -mfma (CMakeLists.txt), called only where the kernels
// run at the avx2 level or wider without avx512_vnni (util/cpu_isa.h). vpmaddubsw multiplies unsigned by signed
// bytes and saturates pair sums at int16: it gets |q| and w * sign(q), whose pairs stay within 2 x 127 x 127.
// Internal linkage throughout and no library headers but the intrinsics'.
#include "int8_kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "tails.h"

namespace mtx::model::int8::kernels {
namespace {

constexpr int64_t kPanel = 32;  // outputs per panel
constexpr int64_t kGroup = 4;   // inputs per 32-bit lane
constexpr int kRows = 3;        // rows per tile: 6 accumulators, 2 weight vectors, the activations and 1s

__m256i lanes(int64_t out, int64_t n) {
  const int64_t left = out - n;
  const int count = left >= 8 ? 8 : left <= 0 ? 0 : int(left);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

int32_t load4(const int8_t* p) {
  // Four bytes as one lane (little-endian, as the weights' groups are laid out).
  return int32_t(uint32_t(uint8_t(p[0])) | uint32_t(uint8_t(p[1])) << 8 | uint32_t(uint8_t(p[2])) << 16 |
                 uint32_t(uint8_t(p[3])) << 24);
}

// One group's int16 pair sums |a| x (w * sign a) for the 16 outputs of w (a: 4 activations in every lane).
inline __m256i pair_sums(__m256i a, __m256i w) {
  return _mm256_maddubs_epi16(_mm256_abs_epi8(a), _mm256_sign_epi8(w, a));
}

// R rows of q against one half panel (16 outputs from n): y[r][n ..] for r < R. SevenBit: every |q| <= 63, and two
// groups' pair sums are added in int16 before they are widened.
template <int R, bool SevenBit>
inline void tile(const int8_t* q, int64_t in_pad, const uint8_t* half, int64_t groups, const float* sw,
                 const float* bias, const float* sx, float* y, int64_t out, int64_t n) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  int64_t g = 0;
  if (SevenBit) {
    for (; g + 2 <= groups; g += 2) {
      const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(half + g * 128));
      const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(half + g * 128 + 32));
      const __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(half + g * 128 + 128));
      const __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(half + g * 128 + 160));
      for (int r = 0; r < R; ++r) {
        const __m256i a = _mm256_set1_epi32(load4(q + r * in_pad + g * kGroup));
        const __m256i b = _mm256_set1_epi32(load4(q + r * in_pad + (g + 1) * kGroup));
        acc[r][0] = _mm256_add_epi32(
            acc[r][0], _mm256_madd_epi16(_mm256_add_epi16(pair_sums(a, w0), pair_sums(b, v0)), ones));  // [8 x int32]
        acc[r][1] =
            _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(_mm256_add_epi16(pair_sums(a, w1), pair_sums(b, v1)), ones));
      }
    }
  }
  for (; g < groups; ++g) {
    const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(half + g * 128));
    const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(half + g * 128 + 32));
    for (int r = 0; r < R; ++r) {
      const __m256i a = _mm256_set1_epi32(load4(q + r * in_pad + g * kGroup));
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(pair_sums(a, w0), ones));  // [8 x int32]
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(pair_sums(a, w1), ones));
    }
  }
  for (int c = 0; c < 2; ++c) {
    const int64_t nc = n + 8 * c;
    const __m256i mask = lanes(out, nc);
    const __m256 w_scale = _mm256_loadu_ps(sw + nc), b = _mm256_loadu_ps(bias + nc);
    for (int r = 0; r < R; ++r) {
      const __m256 scale = _mm256_mul_ps(_mm256_set1_ps(sx[r]), w_scale);
      const __m256 v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[r][c]), scale, b);
      if (nc + 8 <= out) {
        _mm256_storeu_ps(y + r * out + nc, v);
      } else {
        _mm256_maskstore_ps(y + r * out + nc, mask, v);  // only at the row's end: masked stores are slow on AMD
      }
    }
  }
}

}  // namespace

void quantize_rows_avx2(const float* x, int64_t x_stride, int64_t in, int64_t in_pad, int64_t begin, int64_t end,
                        int levels, int8_t* q, float* sx) {
  const float top = float(levels);
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  const __m256i lo = _mm256_set1_epi32(-levels), hi = _mm256_set1_epi32(levels);
  for (int64_t r = begin; r < end; ++r) {
    const float* xr = x + r * x_stride;
    int8_t* qr = q + r * in_pad;
    // max(|x_k|, m) keeps m where |x_k| is NaN, as std::max(m, |x_k|) does.
    __m256 mx = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= in; k += 8) mx = _mm256_max_ps(_mm256_andnot_ps(sign_bit, _mm256_loadu_ps(xr + k)), mx);
    alignas(32) float m8[8];
    _mm256_store_ps(m8, mx);
    float maxabs = 0;
    for (int i = 0; i < 8; ++i) maxabs = m8[i] > maxabs ? m8[i] : maxabs;
    for (; k < in; ++k) {
      const float v = xr[k] < 0 ? -xr[k] : xr[k];
      maxabs = maxabs < v ? v : maxabs;
    }
    sx[r] = maxabs / top;
    const float inverse = maxabs > 0 ? top / maxabs : 0.0f;
    const __m256 inv = _mm256_set1_ps(inverse);
    for (k = 0; k + 8 <= in; k += 8) {
      // Round to nearest even; NaN converts to INT_MIN, which the clamp takes to -levels.
      const __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xr + k), inv));
      const __m256i c = _mm256_min_epi32(_mm256_max_epi32(v, lo), hi);  // within int8: the packs keep it
      const __m128i words = _mm_packs_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(qr + k), _mm_packs_epi16(words, words));
    }
    for (; k < in; ++k) {
      const __m256i v = _mm256_cvtps_epi32(_mm256_set1_ps(xr[k] * inverse));
      qr[k] = int8_t(_mm256_extract_epi32(_mm256_min_epi32(_mm256_max_epi32(v, lo), hi), 0));
    }
    for (k = in; k < in_pad; ++k) qr[k] = 0;
  }
}

namespace {

template <bool SevenBit>
void panels(const int8_t* q, int64_t rows, int64_t in_pad, const uint8_t* packed, int64_t p_begin, int64_t p_end,
            const float* sw, const float* bias, const float* sx, float* y, int64_t out) {
  const int64_t groups = in_pad / kGroup;
  for (int64_t p = p_begin; p < p_end; ++p) {
    for (int64_t h = 0; h < 2; ++h) {
      const int64_t n = p * kPanel + 16 * h;
      if (n >= out) break;
      const uint8_t* half = packed + p * groups * 128 + 64 * h;
      int64_t m = 0;
      for (; m + kRows <= rows; m += kRows) {
        tile<kRows, SevenBit>(q + m * in_pad, in_pad, half, groups, sw, bias, sx + m, y + m * out, out, n);
      }
      model::kernels::with_tail_rows<kRows>(rows - m, [&](auto r) {
        tile<decltype(r)::value, SevenBit>(q + m * in_pad, in_pad, half, groups, sw, bias, sx + m, y + m * out, out, n);
      });
    }
  }
}

}  // namespace

void epilogue_avx2(const int32_t* acc, int64_t begin, int64_t end, int64_t out, const float* sw, const float* bias,
                   const float* sx, float* y) {
  for (int64_t r = begin; r < end; ++r) {
    const __m256 x_scale = _mm256_set1_ps(sx[r]);
    const int32_t* ar = acc + r * out;
    float* yr = y + r * out;
    int64_t o = 0;
    for (; o + 8 <= out; o += 8) {
      const __m256 scale = _mm256_mul_ps(x_scale, _mm256_loadu_ps(sw + o));
      const __m256 sums = _mm256_cvtepi32_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ar + o)));
      _mm256_storeu_ps(yr + o, _mm256_fmadd_ps(sums, scale, _mm256_loadu_ps(bias + o)));
    }
    if (o < out) {  // masked only at the row's end: masked stores are slow on AMD's cores
      const __m256i mask = lanes(out, o);
      const __m256 scale = _mm256_mul_ps(x_scale, _mm256_loadu_ps(sw + o));  // sw, bias padded to whole panels
      const __m256 sums = _mm256_cvtepi32_ps(_mm256_maskload_epi32(ar + o, mask));
      _mm256_maskstore_ps(yr + o, mask, _mm256_fmadd_ps(sums, scale, _mm256_loadu_ps(bias + o)));
    }
  }
}

void offset_bytes_avx2(const int8_t* q, int64_t n, int8_t offset, uint8_t* u) {
  const __m256i add = _mm256_set1_epi8(offset);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(u + i), _mm256_add_epi8(v, add));
  }
  for (; i < n; ++i) u[i] = uint8_t(q[i] + offset);
}

void gemm_panels_avx2(const int8_t* q, int64_t rows, int64_t in_pad, const uint8_t* packed, int64_t p_begin,
                      int64_t p_end, bool seven_bit, const float* sw, const float* bias, const float* sx, float* y,
                      int64_t out) {
  if (seven_bit) return panels<true>(q, rows, in_pad, packed, p_begin, p_end, sw, bias, sx, y, out);
  panels<false>(q, rows, in_pad, packed, p_begin, p_end, sw, bias, sx, y, out);
}

}  // namespace mtx::model::int8::kernels

#endif
