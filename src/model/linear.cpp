#include "mtx/model/linear.h"

#include <ATen/Context.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/nn/functional/linear.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <utility>
#include <vector>

#include "mtx/util/cpu_isa.h"

namespace mtx::model {
namespace int8 {
namespace {

struct Engine {
  at::QEngine engine = at::QEngine::NoQEngine;
  std::string name;
};

std::string engine_name(at::QEngine e) {
  switch (e) {
    case at::QEngine::FBGEMM:
      return "fbgemm";
    case at::QEngine::QNNPACK:
      return "qnnpack";
    case at::QEngine::ONEDNN:
      return "onednn";
    case at::QEngine::X86:
      return "x86";
    default:
      return "";
  }
}

// The first of fbgemm, x86, onednn, qnnpack this LibTorch supports (MTX_INT8_ENGINE=NAME picks another, and
// "libtorch" the first of them, where mtx's own kernels would otherwise run: for measuring), made the process's
// quantized engine: prepacking follows it.
const Engine& chosen_engine() {
  static const Engine chosen = [] {
    const at::QEngine order[] = {at::QEngine::FBGEMM, at::QEngine::X86, at::QEngine::ONEDNN, at::QEngine::QNNPACK};
    const auto& supported = at::globalContext().supportedQEngines();
    const char* wanted = std::getenv("MTX_INT8_ENGINE");
    Engine e;
    for (const at::QEngine q : order) {
      if (std::find(supported.begin(), supported.end(), q) == supported.end()) continue;
      const bool any = !wanted || !*wanted || std::string(wanted) == "libtorch" || std::string(wanted) == "mtx" ||
                       std::string(wanted) == "avx512-vnni";
      if (!any && engine_name(q) != wanted) continue;
      e.engine = q;
      e.name = engine_name(q);
      break;
    }
    if (e.engine != at::QEngine::NoQEngine) at::globalContext().setQEngine(e.engine);
    return e;
  }();
  return chosen;
}

const c10::OperatorHandle& prepack_op() {
  static const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow("quantized::linear_prepack", "");
  return op;
}

const c10::OperatorHandle& linear_dynamic_op() {
  static const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow("quantized::linear_dynamic", "");
  return op;
}

}  // namespace

std::string engine() { return KernelLinear::available() ? KernelLinear::kernel() : chosen_engine().name; }

Weight quantize(const torch::Tensor& w) {
  TORCH_CHECK(w.dim() == 2, "int8::quantize: expected a weight [out, in], got ", w.sizes());
  torch::NoGradGuard no_grad;
  const torch::Tensor f = w.detach().to(torch::kCPU, torch::kFloat).contiguous();  // [out, in]
  torch::Tensor scales = f.abs().amax(1) / 127.0;                                  // [out]
  scales.masked_fill_(scales == 0, 1.0);  // an all-zero row: any scale gives zeros
  Weight q;
  q.values = (f / scales.unsqueeze(1)).round_().clamp_(-127, 127).to(torch::kChar);  // [out, in]
  q.scales = scales;
  return q;
}

torch::Tensor dequantize(const Weight& w) {
  return w.values.to(torch::kFloat) * w.scales.unsqueeze(1);  // [out, in]
}

torch::Tensor dequantize_rows(const Weight& w, const torch::Tensor& ids) {
  return w.values.index_select(0, ids).to(torch::kFloat) * w.scales.index_select(0, ids).unsqueeze(1);  // [n, in]
}

PackedLinear::PackedLinear(const Weight& weight, const torch::Tensor& bias) : weight_(weight) {
  if (KernelLinear::available()) {
    kernel_ = KernelLinear(weight, bias);
    return;
  }
  const Engine& e = chosen_engine();
  TORCH_CHECK(e.engine != at::QEngine::NoQEngine,
              "int8 inference needs a quantized engine (fbgemm, onednn or qnnpack); this LibTorch has none");
  TORCH_CHECK(weight.values.scalar_type() == torch::kChar && weight.values.dim() == 2 &&
                  weight.scales.numel() == weight.values.size(0),
              "int8 weight: expected int8 values [out, in] and [out] scales");
  torch::NoGradGuard no_grad;
  const int64_t out = weight.values.size(0);
  const torch::Tensor qweight = at::_make_per_channel_quantized_tensor(
      weight.values.contiguous(), weight.scales.to(torch::kDouble), torch::zeros({out}, torch::kLong), 0);  // [out, in]
  std::vector<c10::IValue> stack{qweight, c10::IValue()};  // the bias stays out: added after rescaling
  prepack_op().callBoxed(&stack);
  packed_ = std::move(stack.at(0));
  if (bias.defined()) bias_ = bias.detach().to(torch::kFloat).contiguous();
  anchor_ = torch::zeros({1, weight.values.size(1)});  // [1, in]
  anchor_[0][0] = 1.0f;
  if (anchor_.size(1) > 1) anchor_[0][1] = -1.0f;
}

torch::Tensor PackedLinear::forward(const torch::Tensor& x, bool mostly_zeros) const {
  TORCH_CHECK(defined(), "int8::PackedLinear: not packed");
  if (kernel_.defined()) return kernel_.forward(x, mostly_zeros);
  TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat, "int8 layers run on float CPU tensors");
  torch::NoGradGuard no_grad;
  const int64_t in = weight_.values.size(1);
  const torch::Tensor rows = x.reshape({-1, in});  // [n, in]
  const int64_t n = rows.size(0);
  const torch::Tensor scale = rows.abs().amax(1, /*keepdim=*/true).clamp_min_(1e-30f);  // [n, 1]: max |x| per row
  // Every row scaled to max |x| = 1, and one last row holding both +1 and -1: the engine's per-tensor
  // activation range is then [-1, 1] whatever the batch holds, so each row quantizes alone.
  torch::Tensor input = torch::empty({n + 1, in}, rows.options());  // [n + 1, in]
  torch::Tensor scaled = input.narrow(0, 0, n);                     // [n, in]
  at::div_out(scaled, rows, scale);
  input.narrow(0, n, 1).copy_(anchor_);
  // x86's engines without VNNI (fbgemm, onednn) add pairs of u8 x s8 products in int16 (vpmaddubsw), which
  // 8-bit activations can saturate: there, 7-bit activations (reduce_range), as PyTorch's own default does.
  static const bool reduce_range = [] {
#if defined(__x86_64__)
    return !mtx::cpu_features().avx512vnni;
#else
    return false;
#endif
  }();
  std::vector<c10::IValue> stack{input, packed_, reduce_range};
  linear_dynamic_op().callBoxed(&stack);
  const torch::Tensor y = stack.at(0).toTensor().narrow(0, 0, n);                     // [n, out]
  torch::Tensor out = bias_.defined() ? torch::addcmul(bias_, y, scale) : y * scale;  // [n, out]
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = out.size(1);
  return out.view(shape);  // [.., out]
}

}  // namespace int8

torch::Tensor placeholder(const torch::Tensor& like) { return placeholder(like.sizes(), like.options()); }

torch::Tensor placeholder(c10::IntArrayRef sizes, const torch::TensorOptions& options) {
  return torch::full({1}, std::numeric_limits<float>::quiet_NaN(), options).expand(sizes);
}

LinearImpl::LinearImpl(int64_t in_features, int64_t out_features)
    : torch::nn::LinearImpl(torch::nn::LinearOptions(in_features, out_features)) {}

std::shared_ptr<torch::nn::Module> LinearImpl::clone(const c10::optional<torch::Device>& device) const {
  TORCH_CHECK(!is_int8(), "clone: this Linear holds int8 weights; clone the float model, then quantize the clone");
  TORCH_CHECK(!released_, "clone: this Linear released its float weight (inference only)");
  // torch::nn::LinearImpl's clone copies the parameters into a torch::nn::LinearImpl: moved into one of ours.
  auto base = std::dynamic_pointer_cast<torch::nn::LinearImpl>(torch::nn::LinearImpl::clone(device));
  auto copy = std::make_shared<LinearImpl>(*this);
  static_cast<torch::nn::LinearImpl&>(*copy) = std::move(*base);
  copy->fp32_ = fp32::TrackedLinear();
  return copy;
}

torch::Tensor LinearImpl::forward(const torch::Tensor& x) { return forward(x, false); }

torch::Tensor LinearImpl::forward(const torch::Tensor& x, bool mostly_zeros) {
  if (int8_.defined()) return int8_.forward(x, mostly_zeros);
  if (released_) {
    if (fp32::PackedLinear::available() && x.device().is_cpu() && x.scalar_type() == torch::kFloat &&
        !torch::GradMode::is_enabled()) {
      return fp32_.packed().forward(x, mostly_zeros);  // [.., out]
    }
    return torch::nn::functional::linear(x, float_weight(), bias);  // a narrower ISA chosen since (tests)
  }
  if (fp32_.runs(x, weight, bias)) return fp32_.packed().forward(x, mostly_zeros);  // [.., out]
  if (x.dim() > 2 && bias.defined() && !torch::GradMode::is_enabled() && x.is_contiguous()) {
    // Inference on [.., in]: one GEMM with the bias as its accumulator (LibTorch 1.13's linear does a
    // matmul and a separate bias pass for more than two dimensions).
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = weight.size(0);
    return torch::addmm(bias, x.view({-1, x.size(-1)}), weight.t()).view(shape);  // [.., out]
  }
  return torch::nn::functional::linear(x, weight, bias);  // [.., out]
}

void LinearImpl::pack_fp32() {
  if (int8_.defined() || released_ || !fp32::PackedLinear::available() || !weight.device().is_cpu() ||
      weight.scalar_type() != torch::kFloat) {
    return;
  }
  fp32_.pack(weight, bias);
}

void LinearImpl::quantize_int8() {
  TORCH_CHECK(!released_, "quantize_int8: this Linear's float weight was released");
  load_int8(int8::quantize(weight));
}

void LinearImpl::load_int8(const int8::Weight& w, bool keep_float) {
  TORCH_CHECK(weight.device().is_cpu(), "int8 inference runs on the CPU (the model is on ", weight.device(), ")");
  TORCH_CHECK(!released_, "load_int8: this Linear's float weight was released");
  const std::vector<int64_t> sizes = {options.out_features(), options.in_features()};
  TORCH_CHECK(w.values.sizes() == sizes, "int8 weight ", w.values.sizes(), " does not fit a Linear ", sizes);
  torch::NoGradGuard no_grad;
  int8_ = int8::PackedLinear(w, bias);
  if (keep_float) {
    weight.set_(int8::dequantize(w));  // (set_: the weight's storage may have been emptied before a load)
  } else {
    weight.set_(placeholder(weight));
    released_ = true;
  }
}

bool LinearImpl::release_float() {
  if (released_) return true;
  if (!int8_.defined() && !fp32_.current(weight, bias)) return false;
  torch::NoGradGuard no_grad;
  weight.set_(placeholder(weight));
  released_ = true;
  return true;
}

torch::Tensor LinearImpl::float_weight() const {
  if (!released_) return weight;
  if (int8_.defined()) return int8::dequantize(int8_.weight());
  return fp32_.packed().unpack();
}

torch::Tensor LinearImpl::float_rows(int64_t begin, int64_t end) const {
  if (!released_) return weight.narrow(0, begin, end - begin);
  const torch::Tensor ids = torch::arange(begin, end, torch::kLong);
  return int8_.defined() ? int8::dequantize_rows(int8_.weight(), ids) : fp32_.packed().rows(ids);
}

}  // namespace mtx::model
