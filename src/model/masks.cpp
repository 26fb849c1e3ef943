#include "mtx/model/masks.h"

#include <torch/torch.h>

#include <limits>

namespace mtx::model {

torch::Tensor key_padding_mask(const torch::Tensor& tokens, int64_t pad_id) {
  TORCH_CHECK(tokens.dim() == 2, "key_padding_mask: expected [batch, len] tokens, got ", tokens.sizes());
  return tokens.ne(pad_id).unsqueeze(1).unsqueeze(1);  // [batch, 1, 1, len]
}

torch::Tensor causal_mask(int64_t len, const torch::TensorOptions& options) {
  return torch::ones({len, len}, options.dtype(torch::kBool)).tril().view({1, 1, len, len});  // [1, 1, len, len]
}

torch::Tensor decoder_self_mask(const torch::Tensor& tokens, int64_t pad_id) {
  const int64_t len = tokens.size(1);
  return key_padding_mask(tokens, pad_id) & causal_mask(len, tokens.options());  // [batch, 1, len, len]
}

torch::Tensor mask_scores(const torch::Tensor& scores, const torch::Tensor& mask) {
  if (!mask.defined()) return scores;
  double lowest = std::numeric_limits<float>::lowest();
  if (scores.scalar_type() == torch::kBFloat16) lowest = -3.3895313892515355e38;
  if (scores.scalar_type() == torch::kHalf) lowest = -65504.0;
  if (scores.scalar_type() == torch::kDouble) lowest = std::numeric_limits<double>::lowest();
  return scores.masked_fill(mask.logical_not(), lowest);
}

}  // namespace mtx::model
