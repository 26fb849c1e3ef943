#include "mtx/model/fp32_gemm.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define MTX_HAVE_AVX512_KERNEL 1
#define MTX_AVX512 __attribute__((target("avx512f")))
#endif

#include "cpu/fp32_kernels.h"
#include "mtx/util/cpu_isa.h"
#include "mtx/util/system.h"

namespace mtx::model::fp32 {
namespace {

constexpr int kCols = 2;                // 16-lane vectors per row of a tile
constexpr int64_t kPanel = 16 * kCols;  // outputs per panel
static_assert(kPanel == kernels::kPanel, "one pack for every instruction set");
constexpr int64_t kDepth = 256;  // k per pass: a panel's slice (256 x 32 floats, 32 KB) stays in L1 across the rows
constexpr int kRows = 8;         // rows per tile: 16 accumulators, 2 weight vectors, 1 broadcast

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

#ifdef MTX_HAVE_AVX512_KERNEL

// R rows of x (row stride in) against one panel's k-slice [k0, k0 + depth): the running sums live in y between
// slices (first: start from 0; last: add the bias), so each output is one fma chain over k in order.
template <int R>
MTX_AVX512 inline void tile(const float* x, int64_t in, const float* slice, int64_t depth, const float* bias, float* y,
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

// Panels [p_begin, p_end) for all `rows` rows of x.
MTX_AVX512 void gemm_panels(const float* x, int64_t rows, int64_t in, const float* packed, int64_t p_begin,
                            int64_t p_end, const float* bias, float* y, int64_t out) {
  const auto lanes = [out](int64_t n) -> __mmask16 {
    const int64_t left = out - n;
    return left >= 16 ? __mmask16(0xFFFF) : left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1u);
  };
  for (int64_t p = p_begin; p < p_end; ++p) {
    const float* panel = packed + p * in * kPanel;
    const int64_t n0 = p * kPanel;
    __mmask16 mask[kCols];
    for (int c = 0; c < kCols; ++c) mask[c] = lanes(n0 + 16 * c);
    const float* b = bias + n0;
    for (int64_t k0 = 0; k0 < in; k0 += kDepth) {
      const int64_t depth = std::min(kDepth, in - k0);
      const bool first = k0 == 0, last = k0 + depth == in;
      const float* slice = panel + k0 * kPanel;
      int64_t m = 0;
      for (; m + kRows <= rows; m += kRows) {
        tile<kRows>(x + m * in + k0, in, slice, depth, b, y + m * out + n0, out, mask, first, last);
      }
      const float* xm = x + m * in + k0;
      float* ym = y + m * out + n0;
      static_assert(kRows == 8, "the tail below covers 1 .. 7 rows");
      switch (rows - m) {
        case 7:
          tile<7>(xm, in, slice, depth, b, ym, out, mask, first, last);
          break;
        case 6:
          tile<6>(xm, in, slice, depth, b, ym, out, mask, first, last);
          break;
        case 5:
          tile<5>(xm, in, slice, depth, b, ym, out, mask, first, last);
          break;
        case 4:
          tile<4>(xm, in, slice, depth, b, ym, out, mask, first, last);
          break;
        case 3:
          tile<3>(xm, in, slice, depth, b, ym, out, mask, first, last);
          break;
        case 2:
          tile<2>(xm, in, slice, depth, b, ym, out, mask, first, last);
          break;
        case 1:
          tile<1>(xm, in, slice, depth, b, ym, out, mask, first, last);
          break;
        default:
          break;
      }
    }
  }
}

#endif

}  // namespace

torch::Tensor reference_linear(const torch::Tensor& w_in, const torch::Tensor& bias, const torch::Tensor& x_in) {
  const int64_t out = w_in.size(0), in = w_in.size(1);
  const torch::Tensor x = x_in.reshape({-1, in}).to(torch::kFloat).contiguous();  // [n, in]
  const torch::Tensor w = w_in.to(torch::kFloat).contiguous();                    // [out, in]
  const torch::Tensor b = bias.defined() ? bias.to(torch::kFloat).contiguous() : torch::zeros({out});
  const int64_t n = x.size(0);
  torch::Tensor y = torch::empty({n, out}, torch::kFloat);  // [n, out]
  const float *xp = x.data_ptr<float>(), *wp = w.data_ptr<float>(), *bp = b.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      float acc = 0;
      for (int64_t k = 0; k < in; ++k) acc = std::fma(xp[r * in + k], wp[o * in + k], acc);
      yp[r * out + o] = acc + bp[o];
    }
  }
  std::vector<int64_t> shape(x_in.sizes().begin(), x_in.sizes().end());
  shape.back() = out;
  return y.view(shape);
}

bool PackedLinear::available() {
#ifdef MTX_HAVE_AVX512_KERNEL
  constexpr bool kernel_built = true;
#else
  constexpr bool kernel_built = false;
#endif
  static const bool wanted = [] {
    const char* env = std::getenv("MTX_FP32_GEMM");
    return !env || !*env || std::string(env) == "avx512";
  }();
  return kernel_built && wanted && cpu::isa() >= cpu::Isa::avx2;
}

const char* PackedLinear::kernel() {
  if (!available()) return "";
  return cpu::isa() >= cpu::Isa::avx512 ? "avx512" : "avx2";
}

PackedLinear::PackedLinear(const torch::Tensor& w_in, const torch::Tensor& bias) {
  TORCH_CHECK(available(), "fp32::PackedLinear: the kernels run below the avx2 level (util/cpu_isa.h)");
  TORCH_CHECK(w_in.dim() == 2, "fp32::PackedLinear: expected a weight [out, in], got ", w_in.sizes());
  torch::NoGradGuard no_grad;
  out_ = w_in.size(0);
  in_ = w_in.size(1);
  out_pad_ = round_up(out_, kPanel);
  const int64_t panels = out_pad_ / kPanel;
  torch::Tensor w = torch::zeros({out_pad_, in_}, torch::kFloat);  // [out_pad, in]
  w.narrow(0, 0, out_).copy_(w_in.detach().to(torch::kCPU, torch::kFloat));
  packed_ = w.view({panels, kPanel, in_}).transpose(1, 2).contiguous();  // [panels, in, 32]
  bias_ = torch::zeros({out_pad_}, torch::kFloat);
  if (bias.defined()) bias_.narrow(0, 0, out_).copy_(bias.detach().to(torch::kCPU, torch::kFloat));
}

torch::Tensor PackedLinear::forward(const torch::Tensor& x) const {
  TORCH_CHECK(defined(), "fp32::PackedLinear: not packed");
  TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat, "fp32::PackedLinear runs on float CPU tensors");
  TORCH_CHECK(x.size(-1) == in_, "linear: input has ", x.size(-1), " features, the layer takes ", in_);
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = out_;
#ifdef MTX_HAVE_AVX512_KERNEL
  const torch::Tensor rows = x.reshape({-1, in_}).contiguous();  // [n, in]
  const int64_t n = rows.size(0);
  torch::Tensor y = torch::empty({n, out_}, x.options());  // [n, out]
  if (n == 0) return y.view(shape);
  const float* xp = rows.data_ptr<float>();
  const float* pp = packed_.data_ptr<float>();
  const float* bp = bias_.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  // Threads split the panels; every output is computed by one thread in one fixed order.
  const int64_t grain = std::max<int64_t>(1, 256 / n);  // at least ~256 row-panels of work per thread
  const bool avx512 = std::string(kernel()) == "avx512";
  at::parallel_for(0, out_pad_ / kPanel, grain, [&](int64_t begin, int64_t end) {
    if (avx512) {
      gemm_panels(xp, n, in_, pp, begin, end, bp, yp, out_);
    } else {
      kernels::gemm_panels_avx2(xp, n, in_, pp, begin, end, bp, yp, out_);
    }
  });
  return y.view(shape);
#else
  TORCH_CHECK(false, "fp32::PackedLinear: this build has no AVX-512 kernel");
  return x;
#endif
}

TrackedLinear::Source TrackedLinear::source_of(const torch::Tensor& t) {
  if (!t.defined()) return {};
  return {t.unsafeGetTensorImpl(), t.data_ptr(), t._version()};
}

bool TrackedLinear::same(const Source& s, const torch::Tensor& t) {
  if (!t.defined()) return s.impl == nullptr;
  return s.impl == t.unsafeGetTensorImpl() && s.data == t.data_ptr() && s.version == t._version();
}

bool TrackedLinear::current(const torch::Tensor& w, const torch::Tensor& bias) const {
  return packed_.defined() && same(weight_, w) && same(bias_, bias);
}

bool TrackedLinear::runs(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias) const {
  return !torch::GradMode::is_enabled() && x.device().is_cpu() && x.scalar_type() == torch::kFloat &&
         current(w, bias) && PackedLinear::available();
}

void TrackedLinear::pack(const torch::Tensor& w, const torch::Tensor& bias) {
  if (current(w, bias)) return;
  packed_ = PackedLinear(w, bias);
  weight_ = source_of(w);
  bias_ = source_of(bias);
}

}  // namespace mtx::model::fp32
