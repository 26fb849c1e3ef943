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

// A tile's epilogue: R rows' int32 sums for the 16 outputs from n -> y[r][o] = fma(float(acc), sx[r] * sw[o],
// bias[o]), the reference's numbers.
template <int R>
inline void store_half(const __m256i (&acc)[R][2], const float* sw, const float* bias, const float* sx, float* y,
                       int64_t out, int64_t n) {
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
  store_half<R>(acc, sw, bias, sx, y, out, n);
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

namespace {

// For each byte mask m of 8 columns: the pshufb control that moves the set columns' bytes to the front, in order.
// Built at compile time: nothing in a per-level unit may run at load time (scripts/checks/isa_objects.sh).
struct Compactions {
  uint8_t control[256][8] = {};
};
constexpr Compactions make_compactions() {
  Compactions c;
  for (int m = 0; m < 256; ++m) {
    int n = 0;
    for (int j = 0; j < 8; ++j) {
      if (m >> j & 1) c.control[m][n++] = uint8_t(j);
    }
    for (; n < 8; ++n) c.control[m][n] = 0x80;  // a zero byte
  }
  return c;
}
alignas(16) constexpr Compactions kCompactions = make_compactions();

}  // namespace

int64_t sparse_columns_avx2(const int8_t* q, int64_t rows, int64_t in_pad, int32_t* ks, int8_t* values,
                            uint8_t* negative, int64_t* begin, uint32_t* masks) {
  const int64_t tiles = (rows + kSparseRows - 1) / kSparseRows;
  const int64_t blocks = in_pad / 32;  // whole 32-column blocks; the rest (in_pad % 32 < 32) one by one
  int64_t c = 0, kept = 0;
  begin[0] = 0;
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t m = t * kSparseRows, n = rows - m < kSparseRows ? rows - m : kSparseRows;
    const int8_t* tile = q + m * in_pad;
    const int64_t first = c;
    __m256i all = _mm256_setzero_si256();  // OR of every value: its sign bits tell of a negative one
    for (int64_t b = 0; b < blocks; ++b) {
      __m256i any = _mm256_setzero_si256();
      for (int64_t r = 0; r < n; ++r)
        any = _mm256_or_si256(any, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + r * in_pad + 32 * b)));
      all = _mm256_or_si256(all, any);
      auto nonzero = ~uint32_t(_mm256_movemask_epi8(_mm256_cmpeq_epi8(any, _mm256_setzero_si256())));
      masks[b] = nonzero;
      for (; nonzero != 0; nonzero &= nonzero - 1) ks[c++] = int32_t(32 * b + __builtin_ctz(nonzero));
    }
    const int64_t block_end = c;
    int tail_negative = 0;
    for (int64_t k = 32 * blocks; k < in_pad; ++k) {
      int any = 0;
      for (int64_t r = 0; r < n; ++r) any |= tile[r * in_pad + k];
      tail_negative |= any & 0x80;
      if (any != 0) ks[c++] = int32_t(k);
    }
    negative[t] = uint8_t(_mm256_movemask_epi8(all) != 0 || tail_negative != 0);
    const int64_t found = c - first;
    kept += found;
    while ((c - first) % 8 != 0) ks[c++] = 0;  // padding: column 0 with values 0
    const int64_t count = c - first;
    for (int64_t r = 0; r < kSparseRows; ++r) {
      int8_t* vr = values + first * kSparseRows + r * count;
      int64_t i = 0;
      if (r < n) {
        // The same columns in every row: each 8 columns' nonzero ones moved to the front with one pshufb (the
        // 8-byte stores run up to 7 bytes past; the next ones, or the padding's zeros below, overwrite them).
        const int8_t* qr = tile + r * in_pad;
        for (int64_t b = 0; b < blocks; ++b) {
          for (int j = 0; j < 4; ++j) {
            const uint32_t m8 = masks[b] >> (8 * j) & 0xff;
            if (m8 == 0) continue;
            const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(qr + 32 * b + 8 * j));
            const __m128i control = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(kCompactions.control[m8]));
            _mm_storel_epi64(reinterpret_cast<__m128i*>(vr + i), _mm_shuffle_epi8(bytes, control));
            i += __builtin_popcount(m8);
          }
        }
        for (int64_t j = block_end - first; j < found; ++j) vr[i++] = qr[ks[first + j]];
      }
      for (; i < count; ++i) vr[i] = 0;
    }
    begin[t + 1] = c;
  }
  return kept;
}

namespace {

int32_t load4u(const void* p) {
  int32_t v;
  __builtin_memcpy(&v, p, 4);
  return v;
}

// R rows of a tile (values at row stride `count`) against one half (16 outputs from n) of a panel whose gathered
// columns were interleaved into wq: per group of 4 columns, 4 vectors of 8 outputs x 4 inputs. Signed: some value
// of the tile is negative, and vpmaddubsw gets |q| and w * sign(q); else (ReLU's outputs) q and w as they are.
template <int R, bool Signed>
inline void sparse_tile(const int8_t* v, int64_t count, const __m256i* wq, int64_t h, const float* sw,
                        const float* bias, const float* sx, float* y, int64_t out, int64_t n) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  for (int64_t g = 0; g < count / kGroup; g += 2) {  // count is a multiple of 8: whole pairs of groups
    const __m256i w00 = _mm256_load_si256(wq + g * 4 + 2 * h), w01 = _mm256_load_si256(wq + g * 4 + 2 * h + 1);
    const __m256i w10 = _mm256_load_si256(wq + g * 4 + 4 + 2 * h), w11 = _mm256_load_si256(wq + g * 4 + 5 + 2 * h);
    for (int r = 0; r < R; ++r) {
      const int64_t at = r * count + g * kGroup;
      const __m256i a0 = _mm256_set1_epi32(load4u(v + at)), a1 = _mm256_set1_epi32(load4u(v + at + kGroup));
      // |q| <= 63: two groups' pair sums (each within 2 x 63 x 127) add in int16 before one widening.
      __m256i s0, s1;
      if (Signed) {
        const __m256i m0 = _mm256_abs_epi8(a0), m1 = _mm256_abs_epi8(a1);
        s0 = _mm256_add_epi16(_mm256_maddubs_epi16(m0, _mm256_sign_epi8(w00, a0)),
                              _mm256_maddubs_epi16(m1, _mm256_sign_epi8(w10, a1)));
        s1 = _mm256_add_epi16(_mm256_maddubs_epi16(m0, _mm256_sign_epi8(w01, a0)),
                              _mm256_maddubs_epi16(m1, _mm256_sign_epi8(w11, a1)));
      } else {
        s0 = _mm256_add_epi16(_mm256_maddubs_epi16(a0, w00), _mm256_maddubs_epi16(a1, w10));
        s1 = _mm256_add_epi16(_mm256_maddubs_epi16(a0, w01), _mm256_maddubs_epi16(a1, w11));
      }
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(s0, ones));  // [8 x int32]
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(s1, ones));
    }
  }
  store_half<R>(acc, sw, bias, sx, y, out, n);
}

template <bool Signed>
void sparse_half(const int8_t* v, int64_t count, const __m256i* wq, int64_t h, int64_t n_rows, const float* sw,
                 const float* bias, const float* sx, float* y, int64_t out, int64_t n) {
  constexpr int kTileRows = 3;  // rows per pass: 6 accumulators, 4 weight vectors, the broadcasts and 1s
  int64_t r = 0;
  for (; r + kTileRows <= n_rows; r += kTileRows)
    sparse_tile<kTileRows, Signed>(v + r * count, count, wq, h, sw, bias, sx + r, y + r * out, out, n);
  model::kernels::with_tail_rows<kTileRows>(n_rows - r, [&](auto rr) {
    sparse_tile<decltype(rr)::value, Signed>(v + r * count, count, wq, h, sw, bias, sx + r, y + r * out, out, n);
  });
}

}  // namespace

void gemm_panels_sparse_avx2(int64_t rows, const uint8_t* kmajor, int64_t in_pad, int64_t p_begin, int64_t p_end,
                             const float* sw, const float* bias, const float* sx, float* y, int64_t out,
                             const Columns& columns, uint8_t* scratch) {
  const int64_t tiles = (rows + kSparseRows - 1) / kSparseRows;
  // 32-byte aligned within scratch's (in_pad + 9) * 32 bytes.
  auto* wq = reinterpret_cast<__m256i*>((reinterpret_cast<uintptr_t>(scratch) + 31) / 32 * 32);
  for (int64_t p = p_begin; p < p_end; ++p) {
    const uint8_t* panel = kmajor + p * in_pad * kPanel;
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t first = columns.begin[t], count = columns.begin[t + 1] - first;
      const int32_t* ks = columns.k + first;
      // Four columns' 32 weights each -> [8 outputs x 4 inputs] x 4: bytes, then words interleaved (the pack's
      // column_position order makes these outputs 0-7, 8-15, 16-23, 24-31).
      for (int64_t g = 0; g < count / kGroup; ++g) {
        const __m256i r0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + ks[4 * g] * kPanel));
        const __m256i r1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + ks[4 * g + 1] * kPanel));
        const __m256i r2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + ks[4 * g + 2] * kPanel));
        const __m256i r3 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + ks[4 * g + 3] * kPanel));
        const __m256i t0 = _mm256_unpacklo_epi8(r0, r1), t1 = _mm256_unpackhi_epi8(r0, r1);
        const __m256i t2 = _mm256_unpacklo_epi8(r2, r3), t3 = _mm256_unpackhi_epi8(r2, r3);
        _mm256_store_si256(wq + 4 * g, _mm256_unpacklo_epi16(t0, t2));
        _mm256_store_si256(wq + 4 * g + 1, _mm256_unpackhi_epi16(t0, t2));
        _mm256_store_si256(wq + 4 * g + 2, _mm256_unpacklo_epi16(t1, t3));
        _mm256_store_si256(wq + 4 * g + 3, _mm256_unpackhi_epi16(t1, t3));
      }
      const int64_t m = t * kSparseRows, n_rows = rows - m < kSparseRows ? rows - m : kSparseRows;
      const int8_t* v = columns.values + first * kSparseRows;
      for (int64_t h = 0; h < 2; ++h) {
        const int64_t n = p * kPanel + 16 * h;
        if (n >= out) break;
        if (columns.negative[t]) {
          sparse_half<true>(v, count, wq, h, n_rows, sw, bias, sx + m, y + m * out, out, n);
        } else {
          sparse_half<false>(v, count, wq, h, n_rows, sw, bias, sx + m, y + m * out, out, n);
        }
      }
    }
  }
}

void gemm_panels_avx2(const int8_t* q, int64_t rows, int64_t in_pad, const uint8_t* packed, int64_t p_begin,
                      int64_t p_end, bool seven_bit, const float* sw, const float* bias, const float* sx, float* y,
                      int64_t out) {
  if (seven_bit) return panels<true>(q, rows, in_pad, packed, p_begin, p_end, sw, bias, sx, y, out);
  panels<false>(q, rows, in_pad, packed, p_begin, p_end, sw, bias, sx, y, out);
}

}  // namespace mtx::model::int8::kernels

#endif
