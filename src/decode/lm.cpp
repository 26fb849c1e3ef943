#include "mtx/decode/lm.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "mtx/data/lm_text.h"
#include "mtx/util/errors.h"
#include "mtx/util/random.h"

namespace mtx::decode {

TextLoss text_loss(model::Transformer& model, const std::vector<int32_t>& ids, int64_t columns, int64_t bptt,
                   const torch::Device& device) {
  TORCH_CHECK(model->options.decoder_only(), "text_loss: needs a language model (task lm)");
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  const data::BpttBatches windows(ids, columns, bptt, "text");
  double nll = 0;
  int64_t tokens = 0;
  for (int64_t i = 0; i < windows.epoch_batches(); ++i) {
    const data::Batch b = windows.window(i).to(device);
    const torch::Tensor logits = model->project(model->lm_hidden(b.tgt_in));  // [columns, len, vocab]
    nll += torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}).to(torch::kFloat),
                                                b.tgt_out.reshape({-1}),
                                                torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
               .item<double>();
    tokens += b.tgt_tokens;
  }
  model->train(was_training);
  TextLoss s;
  s.tokens = tokens;
  s.loss = tokens ? nll / double(tokens) : 0.0;
  s.ppl = std::exp(std::min(s.loss, 700.0));
  return s;
}

void validate(const GenerateOptions& o) {
  if (o.max_tokens < 0) throw ConfigError(fmt::format("--max-tokens: must be >= 0, got {}", o.max_tokens));
  if (!(o.temperature >= 0) || !std::isfinite(o.temperature)) {
    throw ConfigError(fmt::format("--temperature: must be a finite number >= 0, got {}", o.temperature));
  }
  if (o.top_k < 0) throw ConfigError(fmt::format("--top-k: must be >= 0 (0 = all tokens), got {}", o.top_k));
  if (o.context < 2) throw ConfigError(fmt::format("generate context: must be >= 2, got {}", o.context));
}

namespace {

// Draws a token from logits [vocab] (CPU float): greedy at temperature 0, else softmax(logits / T) over the
// top k, sampled with `rng` (platform-independent, so a seed gives the same text anywhere).
int32_t sample(const torch::Tensor& logits, const GenerateOptions& o, Rng& rng) {
  if (o.temperature == 0) return int32_t(logits.argmax().item<int64_t>());
  torch::Tensor scaled = logits.to(torch::kDouble) / o.temperature;  // [vocab]
  torch::Tensor ids;
  if (o.top_k > 0 && o.top_k < scaled.size(0)) {
    auto top = scaled.topk(o.top_k);  // values, indices [k]
    scaled = std::get<0>(top);
    ids = std::get<1>(top);
  }
  const torch::Tensor probs = torch::softmax(scaled, 0).contiguous();  // [k or vocab]
  const double* p = probs.data_ptr<double>();
  // A uniform double in [0, 1) from 53 random bits, then the inverse of the cumulative distribution.
  const double u = double(rng.next() >> 11) * (1.0 / 9007199254740992.0);
  double acc = 0;
  int64_t pick = probs.size(0) - 1;
  for (int64_t i = 0; i < probs.size(0); ++i) {
    acc += p[i];
    if (u < acc) {
      pick = i;
      break;
    }
  }
  return int32_t(ids.defined() ? ids[pick].item<int64_t>() : pick);
}

}  // namespace

std::vector<int32_t> generate(model::Transformer& model, const std::vector<int32_t>& prompt, int32_t eos,
                              const GenerateOptions& o) {
  validate(o);
  TORCH_CHECK(model->options.decoder_only(), "generate: needs a language model (task lm)");
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  const auto device = model->parameters().front().device();
  const int64_t context = std::min<int64_t>(o.context, model->options.max_len());
  std::vector<int32_t> seen = prompt.empty() ? std::vector<int32_t>{eos} : prompt;  // the window the cache holds
  Rng rng(o.seed);
  model::DecoderCache cache;
  torch::Tensor logits;  // [1, vocab]: the next token's
  // Feeds tokens [from, seen.size()) through the incremental step.
  auto feed = [&](size_t from) {
    for (size_t i = from; i < seen.size(); ++i) {
      logits = model->decode_step(torch::tensor({int64_t(seen[i])}, torch::kLong).to(device), cache);  // [1, vocab]
    }
  };
  // The model sees a window of the last tokens: restart the cache from the last `keep` of them.
  auto restart = [&](int64_t keep) {
    if (int64_t(seen.size()) > keep) seen.erase(seen.begin(), seen.end() - keep);
    cache = model->start_generation();
    feed(0);
  };
  std::vector<int32_t> out;
  restart(context);
  for (int i = 0; i < o.max_tokens; ++i) {
    const int32_t next = sample(logits[0].to(torch::kCPU).to(torch::kFloat), o, rng);
    out.push_back(next);
    if (o.stop_at_eos && next == eos) break;
    seen.push_back(next);
    if (cache.steps >= context) {
      restart(std::max<int64_t>(1, context / 2));
    } else {
      feed(seen.size() - 1);
    }
  }
  model->train(was_training);
  return out;
}

}  // namespace mtx::decode
