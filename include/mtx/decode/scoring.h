// Teacher-forced scoring of a parallel set: the negative log-likelihood per target token and its
// perplexity -- the seq2seq tutorial's "Val. Loss / Val. PPL" and "Test Loss / Test PPL" (mtx eval --ckpt
// --metric ppl, and the trainer's validation).
#pragma once

#include <cstdint>

#include "mtx/data/dataset.h"
#include "mtx/model/transformer.h"
#include "mtx/tokenizer/tokenizer.h"

namespace mtx::decode {

struct LossEvaluation {
  double loss = 0;  // nll per target token (padding ignored)
  double ppl = 0;
  int64_t tokens = 0;
};

// In batches of `max_tokens`, in corpus order; `model` is left in the mode it was in. `bf16`: autocast on CUDA.
LossEvaluation evaluate_loss(model::Transformer& model, const data::EncodedCorpus& corpus,
                             const tokenizer::SpecialIds& ids, int64_t max_tokens, const torch::Device& device,
                             bool bf16 = false);

}  // namespace mtx::decode
