#include "mtx/model/fp32_gemm.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "cpu/fp32_kernels.h"
#include "mtx/util/cpu_isa.h"
#include "mtx/util/system.h"

namespace mtx::model::fp32 {
namespace {

using kernels::kPanel;

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

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
#if defined(__x86_64__)
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
  const torch::Tensor w = w_in.detach().to(torch::kCPU, torch::kFloat);  // [out, in]
  // Straight into the panels (no padded copy of the whole weight: the pack is the only new memory).
  packed_ = torch::empty({panels, in_, kPanel}, torch::kFloat);  // [panels, in, 32]
  const int64_t full = out_ / kPanel;
  if (full > 0)
    packed_.narrow(0, 0, full).copy_(w.narrow(0, 0, full * kPanel).view({full, kPanel, in_}).transpose(1, 2));
  if (full < panels) {                             // the last panel: its rows past `out` are zeros
    torch::Tensor last = packed_.select(0, full);  // [in, 32]
    last.zero_();
    const int64_t n = out_ - full * kPanel;
    last.narrow(1, 0, n).copy_(w.narrow(0, full * kPanel, n).t());
  }
  bias_ = torch::zeros({out_pad_}, torch::kFloat);
  if (bias.defined()) bias_.narrow(0, 0, out_).copy_(bias.detach().to(torch::kCPU, torch::kFloat));
}

torch::Tensor PackedLinear::unpack() const {
  TORCH_CHECK(defined(), "fp32::PackedLinear: not packed");
  return packed_.transpose(1, 2).reshape({out_pad_, in_}).narrow(0, 0, out_).clone();  // [out, in]
}

torch::Tensor PackedLinear::rows(const torch::Tensor& ids) const {
  TORCH_CHECK(defined(), "fp32::PackedLinear: not packed");
  const torch::Tensor i = ids.to(torch::kLong);
  using torch::indexing::Slice;
  return packed_.index({torch::div(i, kPanel, "floor"), Slice(), torch::remainder(i, kPanel)});  // [n, in]
}

torch::Tensor PackedLinear::forward(const torch::Tensor& x, bool mostly_zeros) const {
  TORCH_CHECK(defined(), "fp32::PackedLinear: not packed");
  TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat, "fp32::PackedLinear runs on float CPU tensors");
  TORCH_CHECK(x.size(-1) == in_, "linear: input has ", x.size(-1), " features, the layer takes ", in_);
  // The output is allocated in its final shape, and a contiguous x read in place: a decoding step makes a dozen of
  // these calls on a few rows, where each LibTorch call (a view, a copy check) costs about what the rows do.
  c10::SmallVector<int64_t, 4> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = out_;
#if defined(__x86_64__)
  const torch::Tensor rows = x.is_contiguous() ? x : x.reshape({-1, in_}).contiguous();  // [n, in] in memory
  const int64_t n = in_ > 0 ? rows.numel() / in_ : 0;
  torch::Tensor y = torch::empty(shape, x.options());  // [.., out]
  if (n == 0) return y;
  const float* xp = static_cast<const float*>(rows.data_ptr());
  const float* pp = static_cast<const float*>(packed_.data_ptr());
  const float* bp = static_cast<const float*>(bias_.data_ptr());
  float* yp = static_cast<float*>(y.data_ptr());
  // Threads split the panels; every output is computed by one thread in one fixed order. A thread takes at least
  // 2^16 units of work (a panel costs in x (rows + 8): with few rows, streaming its weights dominates).
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 16) / (in_ * (n + 8)));
  const bool avx512 = cpu::isa() >= cpu::Isa::avx512;
  // Many rows go in equal chunks of at most ~512 KB of x (multiples of both levels' tile heights), each chunk
  // against all of a thread's panels, so that x is read from L2. They change no output's order of operations.
  const int64_t most = std::max<int64_t>(48, (int64_t(1) << 17) / in_ / 48 * 48);
  const int64_t chunks = (n + most - 1) / most;
  const int64_t chunk = round_up((n + chunks - 1) / chunks, 48);
  if (mostly_zeros && !avx512) {
    // Mostly zeros, on AVX2: each chunk's nonzero columns are gathered once, and the products with the zeros
    // skipped -- where that skips a fifth of them or more.
    thread_local std::vector<int32_t> ks;
    thread_local std::vector<float> xs;
    thread_local std::vector<int64_t> begin;
    const int64_t slices = (in_ + kernels::kSparseDepthAvx2 - 1) / kernels::kSparseDepthAvx2;
    for (int64_t m = 0; m < n; m += chunk) {
      const int64_t rows_here = std::min(chunk, n - m);
      const int64_t tiles = (rows_here + kernels::kSparseRowsAvx2 - 1) / kernels::kSparseRowsAvx2;
      ks.resize(std::max(ks.size(), size_t(tiles * in_)));
      xs.resize(std::max(xs.size(), size_t(tiles * in_ * kernels::kSparseStride)));
      begin.resize(std::max(begin.size(), size_t(tiles * slices + 1)));
      const int64_t kept =
          kernels::sparse_columns_avx2(xp + m * in_, rows_here, in_, ks.data(), xs.data(), begin.data());
      const kernels::Columns columns{ks.data(), xs.data(), begin.data(), slices};
      const bool sparse = kept * 5 <= tiles * in_ * 4;
      // (The buffers are not touched again until every thread is done: parallel_for returns after them.)
      const int64_t chunk_grain = std::max<int64_t>(1, (int64_t(1) << 16) / (in_ * (rows_here + 8)));
      at::parallel_for(0, out_pad_ / kPanel, chunk_grain, [&](int64_t p_begin, int64_t p_end) {
        if (sparse) {
          kernels::gemm_panels_sparse_avx2(rows_here, in_, pp, p_begin, p_end, bp, yp + m * out_, out_, columns);
        } else {
          kernels::gemm_panels_avx2(xp + m * in_, rows_here, in_, pp, p_begin, p_end, bp, yp + m * out_, out_);
        }
      });
    }
    return y;
  }
  at::parallel_for(0, out_pad_ / kPanel, grain, [&](int64_t p_begin, int64_t p_end) {
    for (int64_t m = 0; m < n; m += chunk) {
      const int64_t rows_here = std::min(chunk, n - m);
      if (avx512) {
        kernels::gemm_panels_avx512(xp + m * in_, rows_here, in_, pp, p_begin, p_end, bp, yp + m * out_, out_);
      } else {
        kernels::gemm_panels_avx2(xp + m * in_, rows_here, in_, pp, p_begin, p_end, bp, yp + m * out_, out_);
      }
    }
  });
  return y;
#else
  TORCH_CHECK(false, "fp32::PackedLinear: this build has no kernel of mtx's (x86-64 only)");
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
