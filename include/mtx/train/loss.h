// Cross-entropy with label smoothing (PyTorch's definition: eps spread uniformly over the whole
// vocabulary), padding ignored, averaged per target token of the batch.
//
// The smoothed loss has its own backward: (softmax - (1 - eps) * onehot - eps / V) * grad, computed
// from the saved log-probabilities in three passes over [tokens, V], where autograd's graph of
// log_softmax + gather + mean + sums makes seven (the vocabulary-sized tensors dominate the loss's cost).
#pragma once

#include <torch/types.h>

namespace mtx::train {

struct LossTerms {
  torch::Tensor smoothed_sum;  // scalar: sum over real tokens of the label-smoothed loss
  torch::Tensor nll_sum;       // scalar: sum over real tokens of -log p(target) (no smoothing)
  int64_t tokens = 0;          // real (non-pad) target tokens
};

// logits [tokens, vocab] of real tokens only, target [tokens].
LossTerms token_loss(const torch::Tensor& logits, const torch::Tensor& target, double smoothing);

// logits [batch, tgt_len, vocab], target [batch, tgt_len]; positions holding pad_id are ignored.
LossTerms label_smoothed_loss(const torch::Tensor& logits, const torch::Tensor& target, int64_t pad_id,
                              double smoothing);

}  // namespace mtx::train
