// Teacher-forced scoring of a parallel set: the negative log-likelihood per target token and its
// perplexity -- the seq2seq tutorial's "Val. Loss / Val. PPL" and "Test Loss / Test PPL" (mtx eval --ckpt
// --metric ppl, and the trainer's validation); and per pair, the log-probability of each target token (mtx score:
// CTranslate2's score_batch, Marian's scorer).
#pragma once

#include <cstdint>
#include <vector>

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

// One pair's teacher-forced score.
struct PairScore {
  std::vector<int32_t> tokens;          // the target tokens scored, EOS last
  std::vector<double> token_log_probs;  // log p(token | source, the tokens before it), one per token
  double log_prob = 0;                  // their sum
};

// The log-probabilities of `targets` given `sources` (ids without EOS; EOS is appended to each), per pair in
// input order. Pairs of one shape (source and target length) are scored together, at most `batch_tokens` tokens
// (source + target) a batch: no padding, so a pair's numbers do not depend on its company. Sources longer than
// the models take are cut as translation cuts them (max_source_tokens); a target longer than they write is a
// ConfigError naming the pair. An ensemble scores as it translates: the log-softmax of the mean of its models'
// log-probabilities. `models` are put in eval mode.
std::vector<PairScore> score_pairs(std::vector<model::Transformer>& models, const tokenizer::SpecialIds& ids,
                                   const std::vector<std::vector<int32_t>>& sources,
                                   const std::vector<std::vector<int32_t>>& targets, int64_t batch_tokens = 4096,
                                   int64_t max_source_tokens = -1);

}  // namespace mtx::decode
