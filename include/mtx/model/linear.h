// The Linear layer every projection of the Transformer uses: torch's Linear (same parameters, names and
// initialisation), which can also run CPU inference on weights packed once for mtx's float kernel, or with int8 weights
// -- per output row symmetric int8, activations quantized dynamically per row, so a row's output never depends on the
// other rows: on mtx's own AVX-512 VNNI kernel where the CPU has it (int8_gemm.h), else over LibTorch's quantized
// engines (fbgemm/x86 in the 2.x build, oneDNN or QNNPACK in Debian's 1.13).
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <memory>
#include <string>

#include "mtx/model/fp32_gemm.h"
#include "mtx/model/int8_gemm.h"

namespace mtx::model {

namespace int8 {

// What int8 layers run on: "avx512-vnni", "avx2" or "generic" (mtx's kernels, the default at every level), else
// -- where MTX_INT8_ENGINE asks for LibTorch's -- the quantized CPU engine ("fbgemm", "x86", "onednn", "qnnpack")
// chosen once as the fastest this LibTorch has; "" when there is none (then packing throws).
std::string engine();

// Weights quantized per output row: values[r] * scales[r] ~ w[r], values in [-127, 127].
struct Weight {
  torch::Tensor values;  // [out, in] int8
  torch::Tensor scales;  // [out] float32
};
Weight quantize(const torch::Tensor& w);    // w [out, in] float -> per-row symmetric int8
torch::Tensor dequantize(const Weight& w);  // -> [out, in] float32: values * scales
// dequantize(w)'s rows `ids` [n] (int64) alone -> [n, in], the same numbers.
torch::Tensor dequantize_rows(const Weight& w, const torch::Tensor& ids);

// A packed int8 weight (and a float bias) for one engine. forward(x [.., in]) -> [.., out] float32: each
// row of x is scaled to max |x| = 1 and quantized on one fixed range, so its result is the same in any
// batch; the int8 product accumulates exactly in int32.
class PackedLinear {
 public:
  PackedLinear() = default;
  PackedLinear(const Weight& weight, const torch::Tensor& bias);  // bias [out] or undefined
  bool defined() const { return kernel_.defined() || !packed_.isNone(); }
  // mostly_zeros: KernelLinear::forward's (LibTorch's engines ignore it).
  torch::Tensor forward(const torch::Tensor& x, bool mostly_zeros = false) const;
  const Weight& weight() const { return weight_; }

 private:
  KernelLinear kernel_;  // mtx's kernel, where the CPU runs it (then the engine's fields stay empty)
  c10::IValue packed_;   // the engine's LinearPackedParamsBase
  Weight weight_;
  torch::Tensor bias_;
  torch::Tensor anchor_;  // [1, in]: +1, -1, then zeros
};

}  // namespace int8

// What a released float weight (LinearImpl::release_float) holds: a tensor of `like`'s shape, dtype and device
// over one NaN element (all strides zero), so shapes and parameter counts stay and any read of it shows.
torch::Tensor placeholder(const torch::Tensor& like);
torch::Tensor placeholder(c10::IntArrayRef sizes, const torch::TensorOptions& options = {});

// Cloneable through torch::nn::LinearImpl (a module holding one is cloned as LibTorch's are): clone() gives an
// mtx::model::Linear with its own copy of the float weight and bias, not packed; an int8 layer refuses it.
class LinearImpl : public torch::nn::LinearImpl {
 public:
  LinearImpl(int64_t in_features, int64_t out_features);
  std::shared_ptr<torch::nn::Module> clone(const c10::optional<torch::Device>& device = c10::nullopt) const override;
  torch::Tensor forward(const torch::Tensor& x);  // [.., in] -> [.., out]: int8 once quantized, else float
  // The same, told that x is mostly zeros (ReLU's outputs), which the packed float and int8 kernels may skip.
  torch::Tensor forward(const torch::Tensor& x, bool mostly_zeros);

  // Packs the float weight for mtx's AVX-512 kernel (fp32_gemm.h), where the CPU runs it: inference without
  // gradients on the CPU then runs on it for as long as the weight is unchanged (after a change: LibTorch's
  // BLAS, until packed again). Does nothing for an int8 layer, off the CPU or without AVX-512.
  void pack_fp32();

  // Quantizes the weight to int8 and packs it; the float weight becomes its dequantized value (so the
  // model's parameters, their hash and a stored int8 bundle all describe what runs). CPU only.
  void quantize_int8();
  // Packs given int8 weights (a stored int8 bundle); the float weight becomes their dequantized value, or,
  // with keep_float false, is released (release_float) without ever being built.
  void load_int8(const int8::Weight& weight, bool keep_float = true);
  bool is_int8() const { return int8_.defined(); }
  const int8::PackedLinear& int8() const { return int8_; }

  // Inference only from here: an int8 layer, or a float one packed by pack_fp32, drops the float weight that
  // its kernel does not read (the `weight` parameter becomes empty), so the model holds one copy of each
  // weight (it becomes a placeholder of its shape). Returns whether it did (an unpacked float layer keeps its
  // weight). forward() gives the same numbers as before; training, clone() and Module::save are not for a
  // released layer.
  bool release_float();
  bool released() const { return released_; }
  // The float weight [out, in]: `weight` itself, or once released its value rebuilt from the pack (a new
  // tensor, for hashing and inspection).
  torch::Tensor float_weight() const;
  torch::Tensor float_rows(int64_t begin, int64_t end) const;  // float_weight()'s rows [begin, end) alone

 private:
  int8::PackedLinear int8_;
  fp32::TrackedLinear fp32_;
  bool released_ = false;
};
TORCH_MODULE(Linear);

}  // namespace mtx::model
