#include "mtx/train/loss.h"

#include <torch/torch.h>

#include <cmath>

namespace mtx::train {
namespace {

// Sum over tokens of (1 - eps) * nll + eps * uniform, where uniform = -mean_v log p(v).
struct SmoothedCrossEntropy : torch::autograd::Function<SmoothedCrossEntropy> {
  // -> {smoothed sum, nll sum (not differentiable)}
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& logits,
                                                const torch::Tensor& target, double smoothing) {
    const torch::Tensor logp = torch::log_softmax(logits.to(torch::kFloat), -1);  // [n, V]
    const torch::Tensor nll = -logp.gather(1, target.unsqueeze(1)).squeeze(1);    // [n]
    const torch::Tensor nll_sum = nll.sum();                                      // scalar
    torch::Tensor loss = (1.0 - smoothing) * nll_sum;
    if (smoothing > 0) loss = loss - smoothing / double(logp.size(1)) * logp.sum();  // scalar
    ctx->save_for_backward({logp, target});
    ctx->saved_data["smoothing"] = smoothing;
    ctx->saved_data["dtype"] = int64_t(logits.scalar_type());
    ctx->mark_non_differentiable({nll_sum});
    return {loss, nll_sum};
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& logp = saved[0];    // [n, V]
    const torch::Tensor& target = saved[1];  // [n]
    const double eps = ctx->saved_data["smoothing"].toDouble();
    const torch::Tensor g = grads[0].to(torch::kFloat);  // scalar
    // g * (softmax - eps / V) in place of one fresh tensor, then -(1 - eps) * g at each target.
    torch::Tensor grad = logp.exp().mul_(g);  // [n, V]
    if (eps > 0) grad.sub_(g * (eps / double(logp.size(1))));
    grad.scatter_add_(1, target.unsqueeze(1), (-(1.0 - eps) * g).expand({target.size(0), 1}));
    const auto dtype = static_cast<torch::ScalarType>(ctx->saved_data["dtype"].toInt());
    return {grad.to(dtype), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

LossTerms token_loss(const torch::Tensor& logits, const torch::Tensor& target, double smoothing) {
  TORCH_CHECK(logits.dim() == 2 && target.dim() == 1 && logits.size(0) == target.size(0), "loss: logits ",
              logits.sizes(), " do not match target ", target.sizes());
  TORCH_CHECK(smoothing >= 0 && smoothing < 1, "loss: smoothing must be in [0, 1), got ", smoothing);
  LossTerms out;
  out.tokens = target.size(0);
  const auto sums = SmoothedCrossEntropy::apply(logits, target, smoothing);
  out.smoothed_sum = sums[0];
  out.nll_sum = sums[1];
  return out;
}

LossTerms label_smoothed_loss(const torch::Tensor& logits, const torch::Tensor& target, int64_t pad_id,
                              double smoothing) {
  TORCH_CHECK(
      logits.dim() == 3 && target.dim() == 2 && logits.size(0) == target.size(0) && logits.size(1) == target.size(1),
      "loss: logits ", logits.sizes(), " do not match target ", target.sizes());
  const torch::Tensor real = target.ne(pad_id);  // [b, t]
  return token_loss(logits.index({real}), target.masked_select(real), smoothing);
}

}  // namespace mtx::train
