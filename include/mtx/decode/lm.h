// What a trained language model (task lm) is used for: the perplexity of a text (the tutorial's
// evaluate()) and continuing a prompt by sampling (temperature, top-k, seed) over the model's incremental
// step and cache -- the step translation's beam search uses.
#pragma once

#include <cstdint>
#include <vector>

#include "mtx/model/transformer.h"

namespace mtx::decode {

struct TextLoss {
  double loss = 0;  // nll per predicted token
  double ppl = 0;   // exp(loss)
  int64_t tokens = 0;
};
// The token sequence cut into `columns` rows, read in windows of `bptt` (each predicting its next tokens);
// `model` is left in the mode it was in. Throws DataError when the sequence is too short.
TextLoss text_loss(model::Transformer& model, const std::vector<int32_t>& ids, int64_t columns, int64_t bptt,
                   const torch::Device& device);

struct GenerateOptions {
  int max_tokens = 50;       // tokens generated after the prompt
  double temperature = 1.0;  // logits divided by this before sampling (0 = always the most likely token)
  int top_k = 0;             // sample among the k most likely tokens only (0 = all)
  uint64_t seed = 1;         // equal seeds give equal continuations
  int context = 35;          // positions the model sees at most (the training windows, train.bptt); past it
                             // the cache restarts from the last context/2 tokens
  bool stop_at_eos = false;  // end at the first <eos> (a line end) instead of going on
};
// Throws ConfigError naming the offending option.
void validate(const GenerateOptions& options);

// `prompt` ids (empty: the text starts after an <eos>, as at a line start) -> the generated ids.
std::vector<int32_t> generate(model::Transformer& model, const std::vector<int32_t>& prompt, int32_t eos,
                              const GenerateOptions& options);

}  // namespace mtx::decode
