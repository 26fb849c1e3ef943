// Cross-entropy with label smoothing (PyTorch's definition: eps spread uniformly over the whole
// vocabulary), padding ignored, averaged per target token of the batch.
#pragma once

#include <torch/types.h>

namespace mtx::train {

struct LossTerms {
  torch::Tensor smoothed_sum;  // scalar: sum over real tokens of the label-smoothed loss
  torch::Tensor nll_sum;       // scalar: sum over real tokens of -log p(target) (no smoothing)
  int64_t tokens = 0;          // real (non-pad) target tokens
};

// logits [batch, tgt_len, vocab], target [batch, tgt_len].
LossTerms label_smoothed_loss(const torch::Tensor& logits, const torch::Tensor& target, int64_t pad_id,
                              double smoothing);

}  // namespace mtx::train
