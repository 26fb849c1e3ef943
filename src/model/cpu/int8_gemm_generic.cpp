// The int8 GEMM in plain C++, for the generic level and CPUs without mtx's vector kernels (aarch64 among them):
// compiled without instruction-set flags, vectorised as the compiler can. Internal linkage throughout: no
// standard-library templates (std::min, std::clamp, ... are weak functions where a build does not inline them).
#include <math.h>

#include "int8_kernels.h"

namespace mtx::model::int8::kernels {
namespace {

constexpr int64_t kPanel = 32;  // outputs per panel
constexpr int64_t kGroup = 4;   // inputs per output in a group: a panel's group is [32 outputs][4 inputs]

}  // namespace

void quantize_rows_generic(const float* x, int64_t x_stride, int64_t in, int64_t in_pad, int64_t begin, int64_t end,
                           int levels, int8_t* q, float* sx) {
  const float top = float(levels);
  for (int64_t r = begin; r < end; ++r) {
    const float* xr = x + r * x_stride;
    int8_t* qr = q + r * in_pad;
    float maxabs = 0;
    for (int64_t k = 0; k < in; ++k) {
      const float a = fabsf(xr[k]);
      maxabs = maxabs < a ? a : maxabs;  // NaN never wins
    }
    sx[r] = maxabs / top;
    const float inverse = maxabs > 0 ? top / maxabs : 0.0f;
    for (int64_t k = 0; k < in; ++k) {
      const float v = nearbyintf(xr[k] * inverse);                                     // to even
      qr[k] = v != v ? int8_t(-levels) : int8_t(v < -top ? -top : v > top ? top : v);  // NaN -> -levels
    }
    for (int64_t k = in; k < in_pad; ++k) qr[k] = 0;
  }
}

void gemm_panels_generic(const int8_t* q, int64_t rows, int64_t in_pad, const uint8_t* packed, int64_t p_begin,
                         int64_t p_end, const float* sw, const float* bias, const float* sx, float* y, int64_t out) {
  const int64_t groups = in_pad / kGroup;
  for (int64_t p = p_begin; p < p_end; ++p) {
    const int8_t* panel = reinterpret_cast<const int8_t*>(packed) + p * groups * kPanel * kGroup;
    const int64_t n0 = p * kPanel, width = out - n0 < kPanel ? out - n0 : kPanel;
    for (int64_t r = 0; r < rows; ++r) {
      const int8_t* qr = q + r * in_pad;
      int32_t acc[kPanel] = {};
      for (int64_t g = 0; g < groups; ++g) {
        const int8_t* w = panel + g * kPanel * kGroup;  // [32 outputs][4 inputs]
        const int32_t a0 = qr[g * kGroup], a1 = qr[g * kGroup + 1], a2 = qr[g * kGroup + 2], a3 = qr[g * kGroup + 3];
        for (int64_t n = 0; n < kPanel; ++n) {
          acc[n] += a0 * w[n * kGroup] + a1 * w[n * kGroup + 1] + a2 * w[n * kGroup + 2] + a3 * w[n * kGroup + 3];
        }
      }
      for (int64_t n = 0; n < width; ++n) {
        y[r * out + n0 + n] = fmaf(float(acc[n]), sx[r] * sw[n0 + n], bias[n0 + n]);
      }
    }
  }
}

void pack_columns(const uint8_t* packed, int64_t out_pad, int64_t in_pad, uint8_t* kmajor) {
  const int64_t groups = in_pad / kGroup;
  for (int64_t p = 0; p < out_pad / kPanel; ++p) {
    for (int64_t k = 0; k < in_pad; ++k) {
      for (int64_t o = 0; o < kPanel; ++o) {
        const int64_t half = o / 16, lane = o % 16;
        kmajor[(p * in_pad + k) * kPanel + column_position(o)] =
            packed[p * groups * 128 + (k / kGroup) * 128 + half * 64 + lane * kGroup + k % kGroup];
      }
    }
  }
}

}  // namespace mtx::model::int8::kernels
