#include "mtx/train/loss.h"

#include <torch/torch.h>

namespace mtx::train {

LossTerms label_smoothed_loss(const torch::Tensor& logits, const torch::Tensor& target, int64_t pad_id,
                              double smoothing) {
  TORCH_CHECK(logits.dim() == 3 && target.dim() == 2 && logits.size(0) == target.size(0) &&
                  logits.size(1) == target.size(1),
              "loss: logits ", logits.sizes(), " do not match target ", target.sizes());
  const torch::Tensor logp = torch::log_softmax(logits.to(torch::kFloat), -1);         // [b, t, V]
  const torch::Tensor nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1);         // [b, t]
  const torch::Tensor real = target.ne(pad_id);                                         // [b, t]
  LossTerms out;
  out.nll_sum = nll.masked_select(real).sum();
  if (smoothing > 0) {
    const torch::Tensor uniform = -logp.mean(-1);                                       // [b, t]
    out.smoothed_sum = ((1.0 - smoothing) * nll + smoothing * uniform).masked_select(real).sum();
  } else {
    out.smoothed_sum = out.nll_sum;
  }
  out.tokens = real.sum().item<int64_t>();
  return out;
}

}  // namespace mtx::train
