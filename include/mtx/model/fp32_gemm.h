// mtx's own float product for CPU inference (AVX-512 or AVX2 with FMA): y = x . W^T + bias with W packed once, when the
// model is set up to translate, into panels of 32 outputs (what the kernel reads, in the order it reads it). A BLAS
// sgemm packs the weight again on every call -- for a decoder step of a few rows that repacking is most of the
// work, and for the vocabulary projection it is a pass over 8 MB per block of rows. Each output is one fused
// multiply-add chain over k in order, so a row's result depends on that row alone (any batch, any blocking, any
// thread count) and equals reference_linear bit for bit.
#pragma once

#include <torch/types.h>

#include <cstdint>

namespace mtx::model::fp32 {

// y[r][o] = (sum over k in order of fma(x[r][k], w[o][k], acc), from 0) + bias[o], in plain loops: what the
// kernel is tested against. x [.., in], w [out, in], bias [out] or undefined -> [.., out].
torch::Tensor reference_linear(const torch::Tensor& w, const torch::Tensor& bias, const torch::Tensor& x);

class PackedLinear {
 public:
  // The kernels run at the avx2 level or wider (util/cpu_isa.h) and MTX_FP32_GEMM is unset or "avx512"
  // ("blas" keeps LibTorch's BLAS: for tests and comparisons). Asked at every use: a narrower level chosen later
  // (cpu::ScopedIsa) sends layers back to the BLAS.
  static bool available();
  // The kernel that forward() runs now: "avx512", "avx2", or "" where none is available.
  static const char* kernel();

  PackedLinear() = default;
  PackedLinear(const torch::Tensor& w, const torch::Tensor& bias);  // w [out, in] float, bias [out] or undefined
  bool defined() const { return packed_.defined(); }
  // [.., in] float CPU -> [.., out] float. mostly_zeros (ReLU's outputs): the products with x's zeros are
  // skipped where many are (on AVX2), with the same numbers.
  torch::Tensor forward(const torch::Tensor& x, bool mostly_zeros = false) const;
  // The weight it was packed from, bit for bit: [out, in] (a new tensor).
  torch::Tensor unpack() const;
  // Rows `ids` [n] (int64, each in [0, out)) of that weight: [n, in], as an embedding lookup of them.
  torch::Tensor rows(const torch::Tensor& ids) const;

 private:
  int64_t out_ = 0, in_ = 0, out_pad_ = 0;
  torch::Tensor packed_;  // float [out_pad / 32, in, 32]: panel p holds outputs 32p .. 32p + 31 for each k
  torch::Tensor bias_;    // float [out_pad] (zeros without a bias, and past out)
};

// A PackedLinear and what it was packed from: current() while the weight and bias are the same tensors, on the
// same storage, with no in-place change since (an optimizer step, a load or a copy bumps a tensor's version).
// So a model can be packed for translation in the middle of training and never run on stale weights.
class TrackedLinear {
 public:
  void pack(const torch::Tensor& w, const torch::Tensor& bias);  // repacks only when not current
  bool current(const torch::Tensor& w, const torch::Tensor& bias) const;
  // Whether forward(x) of a layer with this weight and bias runs on the pack: inference (no gradients) on float
  // CPU input, the pack current.
  bool runs(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias) const;
  const PackedLinear& packed() const { return packed_; }

 private:
  struct Source {
    const void* impl = nullptr;
    const void* data = nullptr;
    int64_t version = -1;
  };
  static Source source_of(const torch::Tensor& t);
  static bool same(const Source& s, const torch::Tensor& t);
  PackedLinear packed_;
  Source weight_, bias_;
};

}  // namespace mtx::model::fp32
