#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <thread>

#include "mtx/eval/internal.h"
#include "mtx/util/cpus.h"
#include "mtx/util/errors.h"
#include "mtx/util/parallel.h"
#include "mtx/util/random.h"

namespace mtx::eval {

std::string signature_version() { return std::string("mtx-") + MTX_VERSION; }

namespace {

// fn(begin, end) over chunks on one thread per core (the metrics library stays free of torch).
template <class F>
void parallel_for(int64_t n, int64_t grain, F fn) {
  mtx::parallel_for(n, grain, usable_cpus(), fn);
}

// ROUGE-N / ROUGE-L F1 per segment (13a tokens, lowercased), averaged over segments.
class Rouge final : public Metric {
 public:
  explicit Rouge(int n) : n_(n) {
    if (n < 0 || n > 4) throw ConfigError("ROUGE: n must be 1..4 or 0 (ROUGE-L)");
  }
  std::vector<double> segment_stats(const std::string& hyp, const std::vector<std::string>& refs) const override {
    const auto h = bleu_words(hyp, BleuTokenizer::k13a, true);
    double best = 0;
    for (const auto& ref : refs) best = std::max(best, f1(h, bleu_words(ref, BleuTokenizer::k13a, true)));
    return {best, 1.0};
  }
  Score score(const std::vector<double>& stats) const override {
    Score s;
    s.name = n_ == 0 ? "ROUGE-L" : fmt::format("ROUGE-{}", n_);
    s.score = stats[1] > 0 ? 100 * stats[0] / stats[1] : 0.0;
    s.text = fmt::format("{} = {:.2f}", s.name, s.score);
    return s;
  }
  std::string signature(size_t nrefs) const override {
    return fmt::format("nrefs:{}|case:lc|tok:13a|f:1|avg:segment|version:{}", nrefs, signature_version());
  }

 private:
  double f1(const std::vector<std::u32string>& h, const std::vector<std::u32string>& r) const {
    double overlap = 0, nh = 0, nr = 0;
    if (n_ == 0) {  // longest common subsequence
      std::vector<std::vector<int>> L(h.size() + 1, std::vector<int>(r.size() + 1, 0));
      for (size_t i = 1; i <= h.size(); ++i)
        for (size_t j = 1; j <= r.size(); ++j)
          L[i][j] = h[i - 1] == r[j - 1] ? L[i - 1][j - 1] + 1 : std::max(L[i - 1][j], L[i][j - 1]);
      overlap = L[h.size()][r.size()];
      nh = double(h.size());
      nr = double(r.size());
    } else {
      std::map<std::u32string, int> ch, cr;
      auto grams = [&](const std::vector<std::u32string>& t, std::map<std::u32string, int>& c) {
        double total = 0;
        for (size_t i = 0; i + size_t(n_) <= t.size(); ++i) {
          std::u32string k = t[i];
          for (int m = 1; m < n_; ++m) k += U'\x01' + t[i + size_t(m)];
          ++c[k];
          ++total;
        }
        return total;
      };
      nh = grams(h, ch);
      nr = grams(r, cr);
      for (const auto& [k, c] : ch) {
        const auto it = cr.find(k);
        if (it != cr.end()) overlap += std::min(c, it->second);
      }
    }
    if (nh == 0 || nr == 0 || overlap == 0) return 0.0;
    const double p = overlap / nh, rec = overlap / nr;
    return 2 * p * rec / (p + rec);
  }
  int n_;
};

// Word error rate: Levenshtein distance over whitespace tokens / reference tokens (best reference).
class Wer final : public Metric {
 public:
  std::vector<double> segment_stats(const std::string& hyp, const std::vector<std::string>& refs) const override {
    const auto h = split(to_u32(hyp));
    double best_edits = -1, best_len = 0;
    for (const auto& ref : refs) {
      const auto r = split(to_u32(ref));
      std::vector<size_t> prev(r.size() + 1), cur(r.size() + 1);
      std::iota(prev.begin(), prev.end(), 0);
      for (size_t i = 1; i <= h.size(); ++i) {
        cur[0] = i;
        for (size_t j = 1; j <= r.size(); ++j) {
          cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (h[i - 1] == r[j - 1] ? 0 : 1)});
        }
        std::swap(prev, cur);
      }
      const auto edits = double(prev[r.size()]);
      if (best_edits < 0 || edits < best_edits) {
        best_edits = edits;
        best_len = double(r.size());
      }
    }
    return {best_edits, best_len};
  }
  Score score(const std::vector<double>& stats) const override {
    Score s;
    s.name = "WER";
    s.score = stats[1] > 0 ? 100 * stats[0] / stats[1] : (stats[0] > 0 ? 100.0 : 0.0);
    s.text = fmt::format("WER = {:.2f}", s.score);
    s.details = {{"edits", stats[0]}, {"ref_words", stats[1]}};
    return s;
  }
  std::string signature(size_t nrefs) const override {
    return fmt::format("nrefs:{}|case:mixed|tok:none|version:{}", nrefs, signature_version());
  }
  bool higher_is_better() const override { return false; }
};

}  // namespace

std::unique_ptr<Metric> make_rouge(int n) { return std::make_unique<Rouge>(n); }
std::unique_ptr<Metric> make_wer() { return std::make_unique<Wer>(); }

std::vector<std::vector<double>> corpus_stats(const Metric& metric, const std::vector<std::string>& hyps,
                                              const References& refs) {
  if (refs.empty()) throw DataError("no reference given");
  for (size_t k = 0; k < refs.size(); ++k) {
    if (refs[k].size() != hyps.size()) {
      throw DataError(
          fmt::format("reference {} has {} lines but the hypothesis has {}", k + 1, refs[k].size(), hyps.size()));
    }
  }
  std::vector<std::vector<double>> out(hyps.size());
  parallel_for(int64_t(hyps.size()), 256, [&](int64_t begin, int64_t end) {
    std::vector<std::string> seg_refs(refs.size());
    for (int64_t i = begin; i < end; ++i) {
      for (size_t k = 0; k < refs.size(); ++k) seg_refs[k] = refs[k][size_t(i)];
      out[size_t(i)] = metric.segment_stats(hyps[size_t(i)], seg_refs);
    }
  });
  return out;
}

std::vector<double> sum_stats(const std::vector<std::vector<double>>& stats) {
  std::vector<double> total;
  for (const auto& s : stats) {
    if (total.empty()) total.assign(s.size(), 0.0);
    for (size_t j = 0; j < s.size(); ++j) total[j] += s[j];
  }
  return total;
}

Score corpus_score(const Metric& metric, const std::vector<std::string>& hyps, const References& refs) {
  const auto stats = corpus_stats(metric, hyps, refs);
  std::vector<double> total = sum_stats(stats);
  if (total.empty()) total = metric.segment_stats("", std::vector<std::string>(refs.size()));  // no segments
  Score s = metric.score(total);
  s.signature = metric.signature(refs.size());
  return s;
}

std::vector<double> sentence_scores(const Metric& metric, const std::vector<std::string>& hyps,
                                    const References& refs) {
  const auto stats = corpus_stats(metric, hyps, refs);
  std::vector<double> out;
  out.reserve(stats.size());
  for (const auto& s : stats) out.push_back(metric.score(s).score);
  return out;
}

namespace {

// Resampled segment indices: samples x n, from one seeded generator.
std::vector<std::vector<uint32_t>> resamples(size_t n, int samples, uint64_t seed) {
  Rng rng(seed);
  std::vector<std::vector<uint32_t>> out(static_cast<size_t>(samples), std::vector<uint32_t>(n));
  for (auto& row : out)
    for (auto& i : row) i = uint32_t(rng.below(n));
  return out;
}

std::vector<double> resampled_scores(const Metric& metric, const std::vector<std::vector<double>>& stats,
                                     const std::vector<std::vector<uint32_t>>& idx) {
  std::vector<double> scores(idx.size());
  parallel_for(int64_t(idx.size()), 16, [&](int64_t begin, int64_t end) {
    for (int64_t s = begin; s < end; ++s) {
      std::vector<double> total(stats.front().size(), 0.0);
      for (const uint32_t i : idx[size_t(s)])
        for (size_t j = 0; j < total.size(); ++j) total[j] += stats[i][j];
      scores[size_t(s)] = metric.score(total).score;
    }
  });
  return scores;
}

Confidence estimate(std::vector<double> scores) {
  Confidence c;
  c.mean = std::accumulate(scores.begin(), scores.end(), 0.0) / double(scores.size());
  std::sort(scores.begin(), scores.end());
  const size_t lower = scores.size() / 40, upper = scores.size() - lower - 1;  // 95%
  c.ci = 0.5 * (scores[upper] - scores[lower]);
  return c;
}

}  // namespace

Confidence bootstrap(const Metric& metric, const std::vector<std::vector<double>>& stats, int samples, uint64_t seed) {
  if (stats.empty() || samples < 1) throw DataError("bootstrap: nothing to resample");
  return estimate(resampled_scores(metric, stats, resamples(stats.size(), samples, seed)));
}

PairedResult paired_bootstrap(const Metric& metric, const std::vector<std::vector<double>>& baseline,
                              const std::vector<std::vector<double>>& system, int samples, uint64_t seed) {
  if (baseline.size() != system.size() || baseline.empty()) {
    throw DataError(fmt::format("paired bootstrap: systems have {} and {} segments", baseline.size(), system.size()));
  }
  const auto idx = resamples(baseline.size(), samples, seed);
  const auto b = resampled_scores(metric, baseline, idx);
  const auto s = resampled_scores(metric, system, idx);
  PairedResult r;
  r.baseline = metric.score(sum_stats(baseline)).score;
  r.system = metric.score(sum_stats(system)).score;
  r.system_ci = estimate(s);
  std::vector<double> diff(b.size());
  for (size_t i = 0; i < b.size(); ++i) diff[i] = s[i] - b[i];
  const double mean = std::accumulate(diff.begin(), diff.end(), 0.0) / double(diff.size());
  const double real = std::abs(r.system - r.baseline);
  size_t extreme = 0;
  for (const double d : diff) extreme += std::abs(d - mean) >= real ? 1 : 0;
  r.p_value = double(extreme + 1) / double(diff.size() + 1);
  return r;
}

}  // namespace mtx::eval
