#include "mtx/model/int8_gemm.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cpu/int8_kernels.h"
#include "mtx/model/linear.h"
#include "mtx/util/cpu_isa.h"
#include "mtx/util/errors.h"
#include "mtx/util/system.h"

namespace mtx::model::int8 {
namespace {

constexpr int64_t kPanel = 32;  // outputs per packed panel (cpu/int8_kernels.h)
constexpr int64_t kGroup = 4;   // inputs per 32-bit lane
// From this many rows on, 7-bit activations on the avx2 level go to oneDNN's GEMM where mtx was built with it
// (docs/inference.md: below it mtx's kernel is faster, above it oneDNN's).
constexpr int64_t kOneDnnRows = 32;
constexpr int8_t kSevenBitOffset = 64;  // u = q + 64 in [1, 127] for |q| <= 63
// Rows per chunk of the products that skip zeros: a chunk's gathered values, at most 384 x (in_pad + 8) bytes, are
// meant to stay in L2.
constexpr int64_t kSparseChunkRows = 384;

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Whether a call of `rows` rows at `levels` on the avx2 kernel goes to oneDNN's GEMM.
bool onednn_takes(bool avx2, int levels, int64_t rows) {
  return avx2 && levels <= 63 && rows >= kOneDnnRows && kernels::onednn_available();
}

int levels_of(int bits) {
  TORCH_CHECK(bits == 8 || bits == 7, "int8: activations have 8 or 7 bits, not ", bits);
  return (1 << (bits - 1)) - 1;
}

int8_t quantize_value(float v, float top) {
  if (std::isnan(v)) return int8_t(-top);
  return int8_t(std::clamp(std::nearbyint(v), -top, top));
}

}  // namespace

int activation_bits() {
  static const int bits = [] {
    const char* env = std::getenv("MTX_INT8_ACTIVATION_BITS");
    const std::string value = env ? env : "";
    if (value.empty() || value == "7") return 7;
    if (value == "8") return 8;
    throw ConfigError("MTX_INT8_ACTIVATION_BITS: 7 (the default) or 8, not '" + value + "'");
  }();
  return bits;
}

int64_t onednn_from_rows() {
  const bool avx2 = KernelLinear::available() && std::string(KernelLinear::kernel()) == "avx2";
  return onednn_takes(avx2, levels_of(activation_bits()), kOneDnnRows) ? kOneDnnRows : 0;
}

std::pair<torch::Tensor, torch::Tensor> quantize_rows(const torch::Tensor& x_in, int bits) {
  TORCH_CHECK(x_in.dim() == 2 && x_in.scalar_type() == torch::kFloat && x_in.device().is_cpu(),
              "quantize_rows: expected float CPU rows [n, in], got ", x_in.sizes());
  const float top = float(levels_of(bits));
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
    sp[r] = maxabs / top;
    const float inv = maxabs > 0 ? top / maxabs : 0.0f;
    for (int64_t k = 0; k < in; ++k) qp[r * in + k] = quantize_value(xr[k] * inv, top);
  }
  return {q, scales};
}

torch::Tensor reference_linear(const Weight& weight, const torch::Tensor& bias, const torch::Tensor& x, int bits) {
  const int64_t out = weight.values.size(0), in = weight.values.size(1);
  const auto [q, sx] = quantize_rows(x.reshape({-1, in}).to(torch::kFloat), bits);
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

const char* KernelLinear::kernel() {
  if (!available()) return "";
  const cpu::Isa isa = cpu::isa();
  return isa == cpu::Isa::avx512_vnni ? "avx512-vnni" : isa >= cpu::Isa::avx2 ? "avx2" : "generic";
}

bool KernelLinear::available() {
  static const bool wanted = [] {
    const char* env = std::getenv("MTX_INT8_ENGINE");
    const std::string name = env ? env : "";
    return name.empty() || name == "mtx" || name == "avx512-vnni";
  }();
  return wanted;
}

KernelLinear::KernelLinear(const Weight& weight, const torch::Tensor& bias, int activation_bits) {
  TORCH_CHECK(available(), "int8: MTX_INT8_ENGINE picks LibTorch's engine, not mtx's kernels");
  levels_ = levels_of(activation_bits);
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
  columns_ = std::make_shared<Columns>();
  has_minus_128_ = (w == -128).any().item<bool>();
  // [out, in], oneDNN's operand: the weight's own values (never changed in place), not a copy of them.
  if (kernels::onednn_available()) weights_ = w;
  scales_ = torch::zeros({out_pad_}, torch::kFloat);
  scales_.narrow(0, 0, out_).copy_(weight.scales.to(torch::kFloat));
  bias_ = torch::zeros({out_pad_}, torch::kFloat);
  if (bias.defined()) bias_.narrow(0, 0, out_).copy_(bias.detach().to(torch::kCPU, torch::kFloat));
}

const uint8_t* KernelLinear::kmajor() const {
  std::call_once(columns_->once, [&] {
    columns_->kmajor = torch::empty({out_pad_ / kPanel, in_pad_, kPanel}, torch::kByte);  // [out_pad / 32, in_pad, 32]
    kernels::pack_columns(packed_.data_ptr<uint8_t>(), out_pad_, in_pad_, columns_->kmajor.data_ptr<uint8_t>());
  });
  return columns_->kmajor.data_ptr<uint8_t>();
}

torch::Tensor KernelLinear::forward(const torch::Tensor& x, bool mostly_zeros) const {
  TORCH_CHECK(defined(), "int8::KernelLinear: not packed");
  TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat, "int8 layers run on float CPU tensors");
  TORCH_CHECK(x.size(-1) == in_, "int8 linear: input has ", x.size(-1), " features, the layer takes ", in_);
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = out_;
  const std::string kernel_name = kernel();
  TORCH_CHECK(!kernel_name.empty(), "int8: MTX_INT8_ENGINE picks LibTorch's engine, not mtx's kernels");
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
  // result does not depend on the split (exact int32 sums, one fixed epilogue per output). A thread takes at least
  // 2^16 units of work (a panel costs in x (rows + 2): its int8 weights stream in a quarter of float's time).
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 16) / (in_pad_ * (n + 2)));
#if defined(__x86_64__)
  if (kernel_name == "avx512-vnni") {
    torch::Tensor u = torch::empty({n, in_pad_}, torch::kByte);  // [n, in_pad]: q + 128
    uint8_t* up = u.data_ptr<uint8_t>();
    at::parallel_for(0, n, 64, [&](int64_t begin, int64_t end) {
      kernels::quantize_rows_avx512vnni(xp, in_, in_, in_pad_, begin, end, levels_, up, sxp);
    });
    const int32_t* cp = comp_.data_ptr<int32_t>();
    at::parallel_for(0, panels, grain, [&](int64_t begin, int64_t end) {
      kernels::gemm_panels_avx512vnni(up, n, in_pad_, pp, begin, end, cp, swp, bp, sxp, yp, out_);
    });
    return y.view(shape);
  }
#endif
  const bool avx2 = kernel_name == "avx2";
  TORCH_CHECK(!avx2 || !has_minus_128_,
              "int8: weights of -128 (outside mtx quantize's +-127) cannot run on the avx2 kernel; quantize the float "
              "model again with mtx quantize");
  torch::Tensor q = torch::empty({n, in_pad_}, torch::kChar);  // [n, in_pad]
  int8_t* qp = q.data_ptr<int8_t>();
  at::parallel_for(0, n, 64, [&](int64_t begin, int64_t end) {
#if defined(__x86_64__)
    if (avx2) return kernels::quantize_rows_avx2(xp, in_, in_, in_pad_, begin, end, levels_, qp, sxp);
#endif
    kernels::quantize_rows_generic(xp, in_, in_, in_pad_, begin, end, levels_, qp, sxp);
  });
#if defined(__x86_64__)
  // Rows [m, m + rows) on oneDNN's GEMM. The int32 sums go into y's own memory ([rows, out], 4 bytes each), and the
  // epilogue turns each into its float in place: no second [rows, out] buffer to allocate and stream through.
  const auto onednn_rows = [&](int64_t m, int64_t rows) {
    torch::Tensor u = torch::empty({rows, in_pad_}, torch::kByte);  // [rows, in_pad]: q + 64
    uint8_t* up = u.data_ptr<uint8_t>();
    const int8_t* qm = qp + m * in_pad_;
    auto* sp = reinterpret_cast<int32_t*>(yp + m * out_);
    at::parallel_for(0, rows, 64, [&](int64_t begin, int64_t end) {
      kernels::offset_bytes_avx2(qm + begin * in_pad_, (end - begin) * in_pad_, kSevenBitOffset, up + begin * in_pad_);
    });
    kernels::onednn_cap_isa(cpu::isa() < cpu::Isa::avx512);
    const int status = kernels::gemm_onednn_u8s8(up, rows, in_, in_pad_, uint8_t(kSevenBitOffset),
                                                 weights_.data_ptr<int8_t>(), out_, sp);
    TORCH_CHECK(status == 0, "int8: oneDNN's u8 x s8 GEMM failed (dnnl_status_t ", status, ")");
    at::parallel_for(0, rows, std::max<int64_t>(1, 4096 / out_), [&](int64_t begin, int64_t end) {
      kernels::epilogue_avx2(sp, begin, end, out_, swp, bp, sxp + m, yp + m * out_);
    });
  };
  if (mostly_zeros && avx2 && levels_ <= 63) {
    // Mostly zeros (ReLU's outputs): each chunk's tiles gather their nonzero columns once, and the products with
    // the zeros are skipped -- where that skips a fifth of them or more; else the chunk runs dense.
    thread_local std::vector<int32_t> ks;
    thread_local std::vector<int8_t> values;
    thread_local std::vector<uint8_t> negative;
    thread_local std::vector<int64_t> begin;
    thread_local std::vector<uint32_t> masks;
    const uint8_t* kp = kmajor();
    const int64_t chunk = kSparseChunkRows;
    for (int64_t m = 0; m < n; m += chunk) {
      const int64_t rows_here = std::min(chunk, n - m);
      const int64_t tiles = (rows_here + kernels::kSparseRows - 1) / kernels::kSparseRows;
      const auto columns = size_t(tiles * (in_pad_ + 8));
      ks.resize(std::max(ks.size(), columns));
      values.resize(std::max(values.size(), columns * kernels::kSparseRows + 8));
      negative.resize(std::max(negative.size(), size_t(tiles)));
      begin.resize(std::max(begin.size(), size_t(tiles + 1)));
      masks.resize(std::max(masks.size(), size_t(in_pad_ / 32 + 1)));
      const int64_t kept = kernels::sparse_columns_avx2(qp + m * in_pad_, rows_here, in_pad_, ks.data(), values.data(),
                                                        negative.data(), begin.data(), masks.data());
      const kernels::Columns gathered{ks.data(), values.data(), negative.data(), begin.data()};
      if (kept * 5 > tiles * in_pad_ * 4 && onednn_takes(avx2, levels_, rows_here)) {
        onednn_rows(m, rows_here);
        continue;
      }
      const bool sparse = kept * 5 <= tiles * in_pad_ * 4;
      const int64_t chunk_grain = std::max<int64_t>(1, (int64_t(1) << 16) / (in_pad_ * (rows_here + 2)));
      at::parallel_for(0, panels, chunk_grain, [&](int64_t p_begin, int64_t p_end) {
        if (!sparse) {
          kernels::gemm_panels_avx2(qp + m * in_pad_, rows_here, in_pad_, pp, p_begin, p_end, true, swp, bp, sxp + m,
                                    yp + m * out_, out_);
          return;
        }
        thread_local std::vector<uint8_t> scratch;
        scratch.resize(std::max(scratch.size(), size_t((in_pad_ + 9) * 32)));
        kernels::gemm_panels_sparse_avx2(rows_here, kp, in_pad_, p_begin, p_end, swp, bp, sxp + m, yp + m * out_, out_,
                                         gathered, scratch.data());
      });
    }
    return y.view(shape);
  }
  if (onednn_takes(avx2, levels_, n)) {
    onednn_rows(0, n);
    return y.view(shape);
  }
#endif
  at::parallel_for(0, panels, grain, [&](int64_t begin, int64_t end) {
#if defined(__x86_64__)
    if (avx2) return kernels::gemm_panels_avx2(qp, n, in_pad_, pp, begin, end, levels_ <= 63, swp, bp, sxp, yp, out_);
#endif
    kernels::gemm_panels_generic(qp, n, in_pad_, pp, begin, end, swp, bp, sxp, yp, out_);
  });
  return y.view(shape);
}

}  // namespace mtx::model::int8
