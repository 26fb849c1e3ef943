#include "mtx/model/int8_gemm.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define MTX_HAVE_VNNI_KERNEL 1
#define MTX_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#endif

#include "cpu/int8_kernels.h"
#include "mtx/model/linear.h"
#include "mtx/util/cpu_isa.h"
#include "mtx/util/system.h"

namespace mtx::model::int8 {
namespace {

constexpr int64_t kPanel = 32;  // outputs per packed panel: two 16-lane int32 accumulators per row
constexpr int64_t kGroup = 4;   // inputs per vpdpbusd lane
constexpr int kRows = 8;        // rows per tile: 16 accumulators, 2 weight vectors, 1 broadcast

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

float row_inverse(float maxabs) { return maxabs > 0 ? 127.0f / maxabs : 0.0f; }

int8_t quantize_value(float v) {
  if (std::isnan(v)) return -127;
  return int8_t(std::clamp(std::nearbyint(v), -127.0f, 127.0f));
}

#ifdef MTX_HAVE_VNNI_KERNEL

// GCC 12's own AVX-512 intrinsics (_mm512_max_ps, _mm512_reduce_max_ps) read an _mm512_undefined_ps() it then
// warns about (a false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// Rows [begin, end) of x (row stride x_stride) -> u (row stride in_pad): q + 128 as unsigned bytes, the padding
// past `in` 128 (its weights are 0); sx[r] = max|x_r| / 127. The same arithmetic as quantize_rows.
MTX_VNNI void quantize_rows_avx512(const float* x, int64_t x_stride, int64_t in, int64_t in_pad, int64_t begin,
                                   int64_t end, uint8_t* u, float* sx) {
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127), shift = _mm512_set1_epi32(128);
  for (int64_t r = begin; r < end; ++r) {
    const float* xr = x + r * x_stride;
    uint8_t* ur = u + r * in_pad;
    __m512 mx = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 16 <= in; k += 16) mx = _mm512_max_ps(mx, _mm512_abs_ps(_mm512_loadu_ps(xr + k)));
    const __mmask16 tail = __mmask16((1u << (in - k)) - 1u);
    if (k < in) mx = _mm512_max_ps(mx, _mm512_abs_ps(_mm512_maskz_loadu_ps(tail, xr + k)));
    const float maxabs = _mm512_reduce_max_ps(mx);
    sx[r] = maxabs / 127.0f;
    const __m512 inv = _mm512_set1_ps(row_inverse(maxabs));
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

// acc - comp, scaled by sx * sw, plus the bias: one row's 16 outputs from n.
MTX_VNNI inline void store_outputs(__m512i acc, const int32_t* comp, const float* sw, const float* bias, float sx,
                                   float* y, __mmask16 mask) {
  const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(sx), _mm512_loadu_ps(sw));
  const __m512 v = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc, _mm512_loadu_si512(comp)));
  _mm512_mask_storeu_ps(y, mask, _mm512_fmadd_ps(v, scale, _mm512_loadu_ps(bias)));
}

// R rows of u against one panel (32 outputs from n0): y[r][n0 ..] for r < R.
template <int R>
MTX_VNNI inline void tile(const uint8_t* u, int64_t in_pad, const uint8_t* panel, int64_t groups, const int32_t* comp,
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
  const auto lanes = [out](int64_t n) -> __mmask16 {
    const int64_t left = out - n;
    return left >= 16 ? __mmask16(0xFFFF) : left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1u);
  };
  const __mmask16 m0 = lanes(n0), m1 = lanes(n0 + 16);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    store_outputs(acc0[r], comp + n0, sw + n0, bias + n0, sx[r], y + r * out + n0, m0);
    if (m1) store_outputs(acc1[r], comp + n0 + 16, sw + n0 + 16, bias + n0 + 16, sx[r], y + r * out + n0 + 16, m1);
  }
}

// Panels [p_begin, p_end) for all `rows` rows of u.
MTX_VNNI void gemm_panels(const uint8_t* u, int64_t rows, int64_t in_pad, const uint8_t* packed, int64_t p_begin,
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
    const uint8_t* um = u + m * in_pad;
    float* ym = y + m * out;
    switch (rows - m) {
      case 7:
        tile<7>(um, in_pad, panel, groups, comp, sw, bias, sx + m, ym, out, n0);
        break;
      case 6:
        tile<6>(um, in_pad, panel, groups, comp, sw, bias, sx + m, ym, out, n0);
        break;
      case 5:
        tile<5>(um, in_pad, panel, groups, comp, sw, bias, sx + m, ym, out, n0);
        break;
      case 4:
        tile<4>(um, in_pad, panel, groups, comp, sw, bias, sx + m, ym, out, n0);
        break;
      case 3:
        tile<3>(um, in_pad, panel, groups, comp, sw, bias, sx + m, ym, out, n0);
        break;
      case 2:
        tile<2>(um, in_pad, panel, groups, comp, sw, bias, sx + m, ym, out, n0);
        break;
      case 1:
        tile<1>(um, in_pad, panel, groups, comp, sw, bias, sx + m, ym, out, n0);
        break;
      default:
        break;
    }
  }
}

#pragma GCC diagnostic pop

#endif

}  // namespace

std::pair<torch::Tensor, torch::Tensor> quantize_rows(const torch::Tensor& x_in) {
  TORCH_CHECK(x_in.dim() == 2 && x_in.scalar_type() == torch::kFloat && x_in.device().is_cpu(),
              "quantize_rows: expected float CPU rows [n, in], got ", x_in.sizes());
  const torch::Tensor x = x_in.contiguous();
  const int64_t n = x.size(0), in = x.size(1);
  torch::Tensor q = torch::empty({n, in}, torch::kChar);
  torch::Tensor scales = torch::empty({n}, torch::kFloat);
  const float* xp = x.data_ptr<float>();
  int8_t* qp = q.data_ptr<int8_t>();
  float* sp = scales.data_ptr<float>();
  for (int64_t r = 0; r < n; ++r) {
    const float* xr = xp + r * in;
    float maxabs = 0;
    for (int64_t k = 0; k < in; ++k) maxabs = std::max(maxabs, std::fabs(xr[k]));
    sp[r] = maxabs / 127.0f;
    const float inv = row_inverse(maxabs);
    for (int64_t k = 0; k < in; ++k) qp[r * in + k] = quantize_value(xr[k] * inv);
  }
  return {q, scales};
}

torch::Tensor reference_linear(const Weight& weight, const torch::Tensor& bias, const torch::Tensor& x) {
  const int64_t out = weight.values.size(0), in = weight.values.size(1);
  const auto [q, sx] = quantize_rows(x.reshape({-1, in}).to(torch::kFloat));
  const int64_t n = q.size(0);
  const torch::Tensor w = weight.values.contiguous();
  const torch::Tensor sw = weight.scales.to(torch::kFloat).contiguous();
  const torch::Tensor b = bias.defined() ? bias.to(torch::kFloat).contiguous() : torch::zeros({out});
  torch::Tensor y = torch::empty({n, out}, torch::kFloat);
  const int8_t* qp = q.data_ptr<int8_t>();
  const int8_t* wp = w.data_ptr<int8_t>();
  const float *sxp = sx.data_ptr<float>(), *swp = sw.data_ptr<float>(), *bp = b.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      int32_t acc = 0;
      for (int64_t k = 0; k < in; ++k) acc += int32_t(qp[r * in + k]) * int32_t(wp[o * in + k]);
      yp[r * out + o] = std::fma(float(acc), sxp[r] * swp[o], bp[o]);
    }
  }
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = out;
  return y.view(shape);
}

const char* VnniLinear::kernel() {
  if (!available()) return "";
  return cpu::isa() == cpu::Isa::avx512_vnni ? "avx512-vnni" : "avx2";
}

bool VnniLinear::available() {
  static const bool wanted = [] {
    const char* env = std::getenv("MTX_INT8_ENGINE");
    return !env || !*env || std::string(env) == "avx512-vnni";
  }();
#if defined(__x86_64__)
  return wanted && cpu::isa() >= cpu::Isa::avx2;
#else
  return false;
#endif
}

VnniLinear::VnniLinear(const Weight& weight, const torch::Tensor& bias) {
  TORCH_CHECK(available(), "int8: this CPU has no AVX-512 VNNI");
  TORCH_CHECK(weight.values.scalar_type() == torch::kChar && weight.values.dim() == 2 &&
                  weight.scales.numel() == weight.values.size(0),
              "int8 weight: expected int8 values [out, in] and [out] scales");
  out_ = weight.values.size(0);
  in_ = weight.values.size(1);
  out_pad_ = round_up(out_, kPanel);
  in_pad_ = round_up(in_, kGroup);
  const int64_t groups = in_pad_ / kGroup;
  const torch::Tensor w = weight.values.contiguous();
  const int8_t* wp = w.data_ptr<int8_t>();
  packed_ = torch::zeros({out_pad_ * in_pad_}, torch::kByte);
  comp_ = torch::zeros({out_pad_}, torch::kInt);
  uint8_t* pp = packed_.data_ptr<uint8_t>();
  int32_t* cp = comp_.data_ptr<int32_t>();
  for (int64_t n = 0; n < out_; ++n) {
    const int64_t p = n / kPanel, lane = n % kPanel, half = lane / 16, l = lane % 16;
    int32_t sum = 0;
    for (int64_t k = 0; k < in_; ++k) {
      const int8_t v = wp[n * in_ + k];
      sum += v;
      pp[p * groups * 128 + (k / kGroup) * 128 + half * 64 + l * kGroup + k % kGroup] = static_cast<uint8_t>(v);
    }
    cp[n] = 128 * sum;
  }
  has_minus_128_ = (w == -128).any().item<bool>();
  scales_ = torch::zeros({out_pad_}, torch::kFloat);
  scales_.narrow(0, 0, out_).copy_(weight.scales.to(torch::kFloat));
  bias_ = torch::zeros({out_pad_}, torch::kFloat);
  if (bias.defined()) bias_.narrow(0, 0, out_).copy_(bias.detach().to(torch::kCPU, torch::kFloat));
}

torch::Tensor VnniLinear::forward(const torch::Tensor& x) const {
  TORCH_CHECK(defined(), "int8::VnniLinear: not packed");
  TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat, "int8 layers run on float CPU tensors");
  TORCH_CHECK(x.size(-1) == in_, "int8 linear: input has ", x.size(-1), " features, the layer takes ", in_);
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = out_;
#if defined(__x86_64__)
  const std::string kernel_name = kernel();
  TORCH_CHECK(!kernel_name.empty(), "int8: mtx's kernels do not run below the avx2 level (util/cpu_isa.h)");
  const torch::Tensor rows = x.reshape({-1, in_}).contiguous();  // [n, in]
  const int64_t n = rows.size(0);
  torch::Tensor y = torch::empty({n, out_}, x.options());  // [n, out]
  if (n == 0) return y.view(shape);
  const float* xp = rows.data_ptr<float>();
  torch::Tensor sx = torch::empty({n}, torch::kFloat);  // [n]
  float* sxp = sx.data_ptr<float>();
  const uint8_t* pp = packed_.data_ptr<uint8_t>();
  const float* swp = scales_.data_ptr<float>();
  const float* bp = bias_.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const int64_t panels = out_pad_ / kPanel;
  // Each panel's 32 outputs are computed by one thread for every row: work splits over panels, and the
  // result does not depend on the split (exact int32 sums, one fixed epilogue per output).
  const int64_t grain = std::max<int64_t>(1, 256 / n);  // at least ~256 row-panels of work per thread
  if (kernel_name == "avx2") {
    TORCH_CHECK(!has_minus_128_,
                "int8: weights of -128 (outside mtx quantize's +-127) cannot run on the avx2 kernel; quantize the "
                "float model again with mtx quantize");
    torch::Tensor q = torch::empty({n, in_pad_}, torch::kChar);  // [n, in_pad]
    int8_t* qp = q.data_ptr<int8_t>();
    at::parallel_for(0, n, 64, [&](int64_t begin, int64_t end) {
      kernels::quantize_rows_avx2(xp, in_, in_, in_pad_, begin, end, qp, sxp);
    });
    at::parallel_for(0, panels, grain, [&](int64_t begin, int64_t end) {
      kernels::gemm_panels_avx2(qp, n, in_pad_, pp, begin, end, swp, bp, sxp, yp, out_);
    });
    return y.view(shape);
  }
#ifdef MTX_HAVE_VNNI_KERNEL
  torch::Tensor u = torch::empty({n, in_pad_}, torch::kByte);  // [n, in_pad]: q + 128
  uint8_t* up = u.data_ptr<uint8_t>();
  at::parallel_for(
      0, n, 64, [&](int64_t begin, int64_t end) { quantize_rows_avx512(xp, in_, in_, in_pad_, begin, end, up, sxp); });
  const int32_t* cp = comp_.data_ptr<int32_t>();
  at::parallel_for(0, panels, grain, [&](int64_t begin, int64_t end) {
    gemm_panels(up, n, in_pad_, pp, begin, end, cp, swp, bp, sxp, yp, out_);
  });
  return y.view(shape);
#endif
#endif
  TORCH_CHECK(false, "int8: this build has no kernel of mtx's for this CPU");
  return x;
}

}  // namespace mtx::model::int8
