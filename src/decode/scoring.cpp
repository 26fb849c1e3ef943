#include "mtx/decode/scoring.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "mtx/util/errors.h"

#include "mtx/data/batch.h"
#include "mtx/data/batch_sampler.h"
#include "mtx/model/autocast.h"

namespace mtx::decode {

LossEvaluation evaluate_loss(model::Transformer& model, const data::EncodedCorpus& corpus,
                             const tokenizer::SpecialIds& ids, int64_t max_tokens, const torch::Device& device,
                             bool bf16) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  data::BatchSamplerOptions o;
  o.max_tokens = max_tokens;
  o.shuffle = false;
  const data::BatchSampler sampler = data::BatchSampler::for_corpus(corpus, o);
  double nll = 0;
  int64_t tokens = 0;
  for (const auto& indices : sampler.plan(1)) {
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

std::vector<PairScore> score_pairs(std::vector<model::Transformer>& models, const tokenizer::SpecialIds& ids,
                                   const std::vector<std::vector<int32_t>>& sources,
                                   const std::vector<std::vector<int32_t>>& targets, int64_t batch_tokens,
                                   int64_t max_source_tokens) {
  TORCH_CHECK(sources.size() == targets.size(), "score_pairs: ", sources.size(), " sources, ", targets.size(),
              " targets");
  TORCH_CHECK(!models.empty(), "score_pairs: no model");
  torch::NoGradGuard no_grad;
  int64_t max_len = models.front()->options.max_len();
  for (auto& m : models) {
    m->eval();
    max_len = std::min(max_len, m->options.max_len());
  }
  const int64_t keep = max_source_tokens > 0 ? max_source_tokens : std::max<int64_t>(1, max_len - 1);
  const torch::Device device = models.front()->parameters().front().device();
  std::vector<PairScore> out(sources.size());
  // Pairs grouped by shape, each group in input order.
  std::map<std::pair<int64_t, int64_t>, std::vector<size_t>> groups;
  for (size_t i = 0; i < sources.size(); ++i) {
    if (int64_t(targets[i].size()) + 1 > max_len) {
      throw ConfigError("pair " + std::to_string(i + 1) + ": the target has " + std::to_string(targets[i].size()) +
                        " tokens; the model writes at most " + std::to_string(max_len - 1));
    }
    const int64_t s = std::min<int64_t>(int64_t(sources[i].size()), keep) + 1;
    groups[{s, int64_t(targets[i].size()) + 1}].push_back(i);
  }
  for (const auto& [shape, members] : groups) {
    const auto [src_len, tgt_len] = shape;
    const auto per_batch = size_t(std::max<int64_t>(1, batch_tokens / (src_len + tgt_len)));
    for (size_t begin = 0; begin < members.size(); begin += per_batch) {
      const size_t end = std::min(members.size(), begin + per_batch);
      const auto n = int64_t(end - begin);
      torch::Tensor src = torch::empty({n, src_len}, torch::kLong);      // [n, S]: ids + EOS
      torch::Tensor tgt_in = torch::empty({n, tgt_len}, torch::kLong);   // [n, T]: BOS + ids
      torch::Tensor tgt_out = torch::empty({n, tgt_len}, torch::kLong);  // [n, T]: ids + EOS
      auto sa = src.accessor<int64_t, 2>();
      auto ia = tgt_in.accessor<int64_t, 2>();
      auto oa = tgt_out.accessor<int64_t, 2>();
      for (int64_t r = 0; r < n; ++r) {
        const auto& s = sources[members[begin + size_t(r)]];
        const auto& t = targets[members[begin + size_t(r)]];
        for (int64_t j = 0; j + 1 < src_len; ++j) sa[r][j] = s[size_t(j)];
        sa[r][src_len - 1] = ids.eos;
        ia[r][0] = ids.bos;
        for (int64_t j = 0; j + 1 < tgt_len; ++j) {
          ia[r][j + 1] = t[size_t(j)];
          oa[r][j] = t[size_t(j)];
        }
        oa[r][tgt_len - 1] = ids.eos;
      }
      torch::Tensor log_probs;  // [n, T, V]
      for (auto& m : models) {
        const torch::Tensor lp =
            torch::log_softmax(m->forward(src.to(device), tgt_in.to(device)).to(torch::kFloat), -1);
        log_probs = log_probs.defined() ? log_probs.add_(lp) : lp;
      }
      if (models.size() > 1) log_probs = torch::log_softmax(log_probs.div_(double(models.size())), -1);
      const torch::Tensor picked =
          log_probs.gather(2, tgt_out.to(log_probs.device()).unsqueeze(2)).squeeze(2).to(torch::kCPU, torch::kDouble);
      const auto pa = picked.accessor<double, 2>();  // [n, T]
      for (int64_t r = 0; r < n; ++r) {
        PairScore& p = out[members[begin + size_t(r)]];
        for (int64_t j = 0; j < tgt_len; ++j) {
          p.tokens.push_back(int32_t(oa[r][j]));
          p.token_log_probs.push_back(pa[r][j]);
          p.log_prob += pa[r][j];
        }
      }
    }
  }
  return out;
}

}  // namespace mtx::decode
