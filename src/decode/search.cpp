#include "mtx/decode/search.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "mtx/util/errors.h"

namespace mtx::decode {

void validate(const SearchOptions& o) {
  if (o.beam < 1) throw ConfigError("beam: must be >= 1, got " + std::to_string(o.beam));
  if (o.nbest < 1 || o.nbest > o.beam) {
    throw ConfigError("nbest: must be between 1 and the beam size " + std::to_string(o.beam) + ", got " +
                      std::to_string(o.nbest));
  }
  if (!(o.alpha >= 0)) throw ConfigError("alpha: must be >= 0");
  if (o.min_len < 0) throw ConfigError("min_len: must be >= 0");
}

double length_penalty(int64_t length, double alpha) {
  return alpha == 0 ? 1.0 : std::pow((5.0 + double(length)) / 6.0, alpha);
}

std::vector<std::vector<Hypothesis>> beam_search(StepFunction& fn, const std::vector<int64_t>& max_lengths,
                                                 int32_t bos, int32_t eos, const SearchOptions& options,
                                                 int32_t pad) {
  validate(options);
  const int64_t k = options.beam;
  const auto batch = int64_t(max_lengths.size());
  std::vector<std::vector<Hypothesis>> finished(static_cast<size_t>(batch));
  if (batch == 0) return finished;
  for (const int64_t m : max_lengths) TORCH_CHECK(m >= 1, "beam_search: max length must be >= 1, got ", m);
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();

  // Live state: `active` sentences, k rows each (sentence-major). Row r's history and score.
  std::vector<int64_t> active(static_cast<size_t>(batch));
  std::iota(active.begin(), active.end(), 0);
  std::vector<std::vector<int32_t>> history(size_t(batch * k));
  std::vector<float> scores(size_t(batch * k), kNegInf);
  for (int64_t s = 0; s < batch; ++s) scores[size_t(s * k)] = 0;  // only beam 0 is live at the start
  std::vector<int64_t> tokens(size_t(batch * k), bos);
  {
    std::vector<int64_t> expand(size_t(batch * k));
    for (int64_t r = 0; r < batch * k; ++r) expand[size_t(r)] = r / k;
    fn.reorder(torch::tensor(expand, torch::kLong), false);
  }

  for (int64_t t = 0; !active.empty(); ++t) {
    const auto n_active = int64_t(active.size());
    const int64_t rows = n_active * k;
    torch::Tensor logp = fn.step(torch::tensor(tokens, torch::kLong));  // [rows, V]
    TORCH_CHECK(logp.dim() == 2 && logp.size(0) == rows, "beam_search: step returned ", logp.sizes(),
                " for ", rows, " rows");
    const int64_t vocab = logp.size(1);
    if (vocab < 2 * k) {
      throw ConfigError("beam " + std::to_string(k) + " needs a target vocabulary of at least " +
                        std::to_string(2 * k) + " pieces; this model has " + std::to_string(vocab) +
                        ": use a beam of at most " + std::to_string(vocab / 2));
    }
    logp = logp.to(torch::kFloat);
    // Never generated: BOS (and pad, when given), whatever mass the model (label smoothing) gives them.
    logp.select(1, bos).fill_(kNegInf);
    if (pad >= 0 && pad < vocab) logp.select(1, pad).fill_(kNegInf);
    // Sentences at their length limit may only end, min_len or not: the limit wins.
    std::vector<int64_t> forced;
    for (int64_t a = 0; a < n_active; ++a) {
      if (t + 1 >= max_lengths[size_t(active[size_t(a)])]) {
        for (int64_t b = 0; b < k; ++b) forced.push_back(a * k + b);
      }
    }
    if (!forced.empty()) {
      const torch::Tensor idx = torch::tensor(forced, torch::kLong).to(logp.device());
      const torch::Tensor eos_col = logp.index_select(0, idx).select(1, eos).clone();  // [forced]
      if (t < options.min_len) logp.select(1, eos).fill_(kNegInf);
      logp.index_fill_(0, idx, kNegInf);
      logp.select(1, eos).index_copy_(0, idx, eos_col);
    } else if (t < options.min_len) {
      logp.select(1, eos).fill_(kNegInf);
    }
    const torch::Tensor prior = torch::tensor(scores, torch::kFloat).to(logp.device()).unsqueeze(1);  // [rows, 1]
    const torch::Tensor cand = (prior + logp).view({n_active, k * vocab});                          // [A, k*V]
    const auto top = cand.topk(2 * k, 1);                                                          // [A, 2k]
    const torch::Tensor top_scores = std::get<0>(top).cpu().contiguous();
    const torch::Tensor top_index = std::get<1>(top).cpu().contiguous();
    const auto sc = top_scores.accessor<float, 2>();
    const auto ix = top_index.accessor<int64_t, 2>();

    std::vector<int64_t> next_active, keep_rows, next_tokens;
    std::vector<float> next_scores;
    std::vector<std::vector<int32_t>> next_history;
    for (int64_t a = 0; a < n_active; ++a) {
      const int64_t s = active[size_t(a)];
      auto& done = finished[size_t(s)];
      std::vector<int64_t> chosen;  // candidate positions continuing
      for (int64_t c = 0; c < 2 * k && int64_t(chosen.size()) < k; ++c) {
        const float score = sc[a][c];
        if (score == kNegInf) break;
        const int64_t beam = ix[a][c] / vocab, token = ix[a][c] % vocab;
        if (token == eos) {
          // Like fairseq: an EOS counts only among the k best candidates.
          if (c < k) {
            const auto& h = history[size_t(a * k + beam)];
            done.push_back({h, double(score) / length_penalty(int64_t(h.size()) + 1, options.alpha), double(score)});
          }
        } else {
          chosen.push_back(c);
        }
      }
      if (chosen.empty()) continue;  // sentence finished: nothing left alive
      if (int64_t(done.size()) >= k) {
        if (!options.exact_stop) continue;  // finished: `beam` hypotheses ended (the first-k rule)
        // Exact: finished unless a live hypothesis can still beat the k-th best finished one. Its score
        // can only fall with more tokens, the length penalty only grow up to the sentence's limit.
        std::vector<double> ended;
        for (const auto& h : done) ended.push_back(h.score);
        std::nth_element(ended.begin(), ended.begin() + (k - 1), ended.end(), std::greater<double>());
        const double kth = ended[size_t(k - 1)];
        const double best_live = double(sc[a][chosen.front()]);  // candidates come best first
        if (best_live / length_penalty(max_lengths[size_t(s)], options.alpha) <= kth) continue;
      }
      next_active.push_back(s);
      for (int64_t j = 0; j < k; ++j) {
        // Fewer than k live candidates (tiny vocabularies): repeat the last one as a dead row.
        const int64_t c = chosen[size_t(std::min<int64_t>(j, int64_t(chosen.size()) - 1))];
        const int64_t row = a * k + ix[a][c] / vocab;
        keep_rows.push_back(row);
        next_tokens.push_back(ix[a][c] % vocab);
        next_scores.push_back(j < int64_t(chosen.size()) ? sc[a][c] : kNegInf);
        next_history.push_back(history[size_t(row)]);
        next_history.back().push_back(int32_t(ix[a][c] % vocab));
      }
    }
    if (next_active.empty()) break;
    fn.reorder(torch::tensor(keep_rows, torch::kLong), next_active.size() == active.size());
    active = std::move(next_active);
    tokens = std::move(next_tokens);
    scores = std::move(next_scores);
    history = std::move(next_history);
  }

  for (auto& done : finished) {
    std::stable_sort(done.begin(), done.end(), [](const Hypothesis& x, const Hypothesis& y) { return x.score > y.score; });
    if (int64_t(done.size()) > options.nbest) done.resize(size_t(options.nbest));
  }
  return finished;
}

}  // namespace mtx::decode
