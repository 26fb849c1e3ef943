#include <fmt/format.h>

#include <string>
#include <unordered_map>

#include "mtx/eval/internal.h"
#include "mtx/util/errors.h"

namespace mtx::eval {
namespace {

using Counts = std::unordered_map<std::u32string, int64_t>;

bool is_ascii_punct(char32_t c) {  // Python's string.punctuation
  return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
}

class Chrf final : public Metric {
 public:
  explicit Chrf(ChrfOptions o) : o_(o) {
    if (o_.char_order < 1 || o_.word_order < 0 || o_.beta < 0)
      throw ConfigError("chrF: orders must be >= 0 (chars >= 1)");
  }

  // Per order: character n-grams 1..char_order, then word n-grams 1..word_order.
  std::vector<Counts> extract(const std::string& text) const {
    std::u32string s = to_u32(text);
    if (o_.lowercase) s = lower(s);
    std::vector<Counts> out;
    std::u32string chars;
    if (o_.whitespace) {
      chars = s;
    } else {
      for (const auto& w : split(s)) chars += w;
    }
    for (int n = 1; n <= o_.char_order; ++n) {
      Counts c;
      for (size_t i = 0; i + size_t(n) <= chars.size(); ++i) ++c[chars.substr(i, size_t(n))];
      out.push_back(std::move(c));
    }
    if (o_.word_order > 0) {
      // chrF++'s word split: punctuation cut off the end (or else the start) of each word.
      std::vector<std::u32string> words;
      for (const auto& w : split(s)) {
        if (w.size() == 1) {
          words.push_back(w);
        } else if (is_ascii_punct(w.back())) {
          words.push_back(w.substr(0, w.size() - 1));
          words.push_back(w.substr(w.size() - 1));
        } else if (is_ascii_punct(w.front())) {
          words.push_back(w.substr(0, 1));
          words.push_back(w.substr(1));
        } else {
          words.push_back(w);
        }
      }
      for (int n = 1; n <= o_.word_order; ++n) {
        Counts c;
        for (size_t i = 0; i + size_t(n) <= words.size(); ++i) {
          std::u32string key = words[i];
          for (int k = 1; k < n; ++k) {
            key.push_back(U' ');
            key += words[i + size_t(k)];
          }
          ++c[key];
        }
        out.push_back(std::move(c));
      }
    }
    return out;
  }

  std::vector<double> segment_stats(const std::string& hyp, const std::vector<std::string>& refs) const override {
    const auto h = extract(hyp);
    std::vector<double> best;
    double best_f = -1;
    for (const auto& ref : refs) {
      const auto r = extract(ref);
      std::vector<double> stats;
      for (size_t k = 0; k < h.size(); ++k) {
        int64_t hyp_count = 0, match = 0, ref_count = 0;
        for (const auto& [g, c] : h[k]) {
          hyp_count += c;
          const auto it = r[k].find(g);
          if (it != r[k].end()) match += std::min(c, it->second);
        }
        for (const auto& kv : r[k]) ref_count += kv.second;
        stats.push_back(r[k].empty() ? 0.0 : double(hyp_count));  // no hits counted without reference n-grams
        stats.push_back(double(ref_count));
        stats.push_back(double(match));
      }
      const double f = f_score(stats);
      if (f > best_f) {
        best_f = f;
        best = std::move(stats);
      }
    }
    return best;
  }

  double f_score(const std::vector<double>& stats) const {
    const double eps = 1e-16, factor = double(o_.beta) * double(o_.beta);
    double score = 0, avg_prec = 0, avg_rec = 0;
    int effective = 0;
    const int order = o_.char_order + o_.word_order;
    for (int i = 0; i < order; ++i) {
      const double n_hyp = stats[size_t(3 * i)], n_ref = stats[size_t(3 * i + 1)], n_match = stats[size_t(3 * i + 2)];
      const double prec = n_hyp > 0 ? n_match / n_hyp : eps;
      const double rec = n_ref > 0 ? n_match / n_ref : eps;
      const double denom = factor * prec + rec;
      score += denom > 0 ? (1 + factor) * prec * rec / denom : eps;
      if (n_hyp > 0 && n_ref > 0) {
        avg_prec += prec;
        avg_rec += rec;
        ++effective;
      }
    }
    if (o_.eps_smoothing) return 100 * score / order;
    if (effective == 0) {
      avg_prec = avg_rec = 0;
    } else {
      avg_prec /= effective;
      avg_rec /= effective;
    }
    if (avg_prec + avg_rec == 0) return 0.0;
    return 100 * (1 + factor) * avg_prec * avg_rec / (factor * avg_prec + avg_rec);
  }

  Score score(const std::vector<double>& stats) const override {
    Score s;
    s.name = fmt::format("chrF{}", o_.beta) + std::string(size_t(o_.word_order), '+');
    s.score = f_score(stats);
    s.text = fmt::format("{} = {:.2f}", s.name, s.score);
    return s;
  }

  std::string signature(size_t nrefs) const override {
    return fmt::format("nrefs:{}|case:{}|eff:{}|nc:{}|nw:{}|space:{}|version:{}", nrefs, o_.lowercase ? "lc" : "mixed",
                       o_.eps_smoothing ? "no" : "yes", o_.char_order, o_.word_order, o_.whitespace ? "yes" : "no",
                       signature_version());
  }

 private:
  ChrfOptions o_;
};

}  // namespace

std::unique_ptr<Metric> make_chrf(const ChrfOptions& options) { return std::make_unique<Chrf>(options); }

}  // namespace mtx::eval
