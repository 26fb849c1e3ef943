#include "mtx/decode/scoring.h"

#include <torch/torch.h>

#include <cmath>

#include "mtx/data/batch.h"
#include "mtx/data/batcher.h"
#include "mtx/model/autocast.h"

namespace mtx::decode {

LossEvaluation evaluate_loss(model::Transformer& model, const data::EncodedCorpus& corpus,
                             const tokenizer::SpecialIds& ids, int64_t max_tokens, const torch::Device& device,
                             bool bf16) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  data::BatcherOptions o;
  o.max_tokens = max_tokens;
  o.shuffle = false;
  const data::Batcher batcher = data::Batcher::for_corpus(corpus, o);
  double nll = 0;
  int64_t tokens = 0;
  for (const auto& indices : batcher.plan(1)) {
    const data::Batch b = data::make_batch(corpus, indices, ids).to(device);
    model::Autocast autocast(bf16);
    const torch::Tensor real = b.tgt_out.ne(ids.pad);                                        // [b, t]
    const torch::Tensor logits = model->logits_at(b.src, b.tgt_in, real).to(torch::kFloat);  // [n, V]
    const torch::Tensor target = b.tgt_out.masked_select(real);                              // [n]
    // -log p(target), as the training loss computes it (train/loss.h): log_softmax in fp32, then gather.
    nll -= torch::log_softmax(logits, -1).gather(1, target.unsqueeze(1)).sum().item<double>();
    tokens += target.size(0);
  }
  if (was_training) model->train();
  LossEvaluation v;
  v.tokens = tokens;
  v.loss = tokens ? nll / double(tokens) : 0.0;
  v.ppl = std::exp(std::min(v.loss, 700.0));
  return v;
}

}  // namespace mtx::decode
