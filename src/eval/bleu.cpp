#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include "mtx/eval/internal.h"
#include "mtx/util/errors.h"

namespace mtx::eval {
namespace {

// n-gram -> count, keyed by the n-gram's tokens joined with U+0001 (never inside a token).
using Counts = std::unordered_map<std::u32string, int64_t>;

Counts ngrams(const std::vector<std::u32string>& tokens, int max_order) {
  Counts out;
  for (int n = 1; n <= max_order; ++n) {
    for (size_t i = 0; i + size_t(n) <= tokens.size(); ++i) {
      std::u32string key = tokens[i];
      for (int k = 1; k < n; ++k) {
        key.push_back(U'\x01');
        key += tokens[i + size_t(k)];
      }
      ++out[key];
    }
  }
  return out;
}

int order_of(const std::u32string& key) { return 1 + int(std::count(key.begin(), key.end(), U'\x01')); }

double my_log(double x) { return x == 0 ? -9999999999.0 : std::log(x); }

class Bleu final : public Metric {
 public:
  explicit Bleu(BleuOptions o) : o_(std::move(o)) {
    if (o_.smooth_method != "exp" && o_.smooth_method != "floor" && o_.smooth_method != "add-k" &&
        o_.smooth_method != "none") {
      throw ConfigError("--smooth-method: unknown '" + o_.smooth_method + "' (choose exp, floor, add-k or none)");
    }
    if (!o_.smooth_value) {
      if (o_.smooth_method == "floor") o_.smooth_value = 0.1;
      if (o_.smooth_method == "add-k") o_.smooth_value = 1.0;
    }
    if (o_.max_order < 1) throw ConfigError("BLEU max order must be >= 1");
  }

  std::vector<double> segment_stats(const std::string& hyp, const std::vector<std::string>& refs) const override {
    const int N = o_.max_order;
    auto prep = [&](const std::string& s) { return bleu_words(s, o_.tokenize, o_.lowercase); };
    const auto h = prep(hyp);
    std::vector<std::vector<std::u32string>> r;
    r.reserve(refs.size());
    for (const auto& ref : refs) r.push_back(prep(ref));

    std::vector<double> stats(size_t(2 + 2 * N), 0.0);  // hyp_len, ref_len, correct[N], total[N]
    const auto hyp_len = int64_t(h.size());
    int64_t closest_diff = -1, closest_len = 0;
    for (const auto& toks : r) {
      const auto len = int64_t(toks.size());
      const int64_t diff = std::llabs(hyp_len - len);
      if (closest_diff == -1 || diff < closest_diff) {
        closest_diff = diff;
        closest_len = len;
      } else if (diff == closest_diff) {
        closest_len = std::min(closest_len, len);
      }
    }
    stats[0] = double(hyp_len);
    stats[1] = double(closest_len);

    // Tokens as small integers, n-grams as one 64-bit key each: (order, up to four 15-bit ids).
    std::unordered_map<std::u32string, uint32_t> ids;
    auto to_ids = [&](const std::vector<std::u32string>& toks) {
      std::vector<uint32_t> out;
      out.reserve(toks.size());
      for (const auto& t : toks) out.push_back(ids.emplace(t, uint32_t(ids.size())).first->second);
      return out;
    };
    const auto hid = to_ids(h);
    std::vector<std::vector<uint32_t>> rid;
    for (const auto& toks : r) rid.push_back(to_ids(toks));
    if (ids.size() >= (1u << 15) || N > 4) return slow_stats(h, r, std::move(stats));
    auto keys = [&](const std::vector<uint32_t>& t) {
      std::vector<uint64_t> out;
      for (int n = 1; n <= N; ++n) {
        for (size_t i = 0; i + size_t(n) <= t.size(); ++i) {
          uint64_t k = uint64_t(n) << 60;
          for (int m = 0; m < n; ++m) k |= uint64_t(t[i + size_t(m)]) << (15 * m);
          out.push_back(k);
        }
      }
      std::sort(out.begin(), out.end());
      return out;
    };
    auto runs = [](const std::vector<uint64_t>& sorted) {
      std::vector<std::pair<uint64_t, int64_t>> out;
      for (const uint64_t k : sorted) {
        if (!out.empty() && out.back().first == k)
          ++out.back().second;
        else
          out.emplace_back(k, 1);
      }
      return out;
    };
    // Reference counts: the largest count of each n-gram in any one reference.
    std::vector<std::pair<uint64_t, int64_t>> ref_max;
    for (const auto& t : rid) {
      const auto cur = runs(keys(t));
      std::vector<std::pair<uint64_t, int64_t>> merged;
      merged.reserve(ref_max.size() + cur.size());
      size_t a = 0, b = 0;
      while (a < ref_max.size() || b < cur.size()) {
        if (b == cur.size() || (a < ref_max.size() && ref_max[a].first < cur[b].first)) {
          merged.push_back(ref_max[a++]);
        } else if (a == ref_max.size() || cur[b].first < ref_max[a].first) {
          merged.push_back(cur[b++]);
        } else {
          merged.emplace_back(cur[b].first, std::max(cur[b].second, ref_max[a].second));
          ++a;
          ++b;
        }
      }
      ref_max = std::move(merged);
    }
    size_t j = 0;
    for (const auto& [k, c] : runs(keys(hid))) {
      const auto n = size_t(k >> 60);
      while (j < ref_max.size() && ref_max[j].first < k) ++j;
      const int64_t rc = j < ref_max.size() && ref_max[j].first == k ? ref_max[j].second : 0;
      stats[1 + n] += double(std::min(c, rc));
      stats[1 + size_t(N) + n] += double(c);
    }
    return stats;
  }

  // The general path (orders above 4, or absurdly many distinct tokens in a segment).
  std::vector<double> slow_stats(const std::vector<std::u32string>& h,
                                 const std::vector<std::vector<std::u32string>>& refs,
                                 std::vector<double> stats) const {
    const int N = o_.max_order;
    Counts ref_max;
    for (const auto& toks : refs) {
      for (const auto& [k, c] : ngrams(toks, N)) {
        auto& m = ref_max[k];
        m = std::max(m, c);
      }
    }
    for (const auto& [k, c] : ngrams(h, N)) {
      const int n = order_of(k);
      const auto it = ref_max.find(k);
      stats[size_t(1 + n)] += double(std::min<int64_t>(c, it == ref_max.end() ? int64_t(0) : it->second));
      stats[size_t(1 + N + n)] += double(c);
    }
    return stats;
  }

  Score score(const std::vector<double>& stats) const override {
    const int N = o_.max_order;
    const double sys_len = stats[0], ref_len = stats[1];
    std::vector<double> correct(stats.begin() + 2, stats.begin() + 2 + N);
    std::vector<double> total(stats.begin() + 2 + N, stats.begin() + 2 + 2 * N);
    std::vector<double> precisions(size_t(N), 0.0);
    double bp = 1.0;
    if (sys_len < ref_len) bp = sys_len > 0 ? std::exp(1.0 - ref_len / sys_len) : 0.0;
    // No matching n-gram of any order: 0, whatever the smoothing would make of it (sacreBLEU #141).
    const bool no_match = std::all_of(correct.begin(), correct.end(), [](double c) { return c == 0; });
    double smooth_mteval = 1.0;
    int eff_order = N;
    for (int n = 1; n <= N && !no_match; ++n) {
      const size_t i = size_t(n - 1);
      if (o_.smooth_method == "add-k" && n > 1) {
        correct[i] += *o_.smooth_value;
        total[i] += *o_.smooth_value;
      }
      if (total[i] == 0) break;
      if (o_.effective_order) eff_order = n;
      if (correct[i] == 0) {
        if (o_.smooth_method == "exp") {
          smooth_mteval *= 2;
          precisions[i] = 100.0 / (smooth_mteval * total[i]);
        } else if (o_.smooth_method == "floor") {
          precisions[i] = 100.0 * *o_.smooth_value / total[i];
        }
      } else {
        precisions[i] = 100.0 * correct[i] / total[i];
      }
    }
    double log_sum = 0;
    for (int n = 0; n < eff_order; ++n) log_sum += my_log(precisions[size_t(n)]);
    Score s;
    s.name = "BLEU";
    s.score = no_match ? 0.0 : bp * std::exp(log_sum / eff_order);
    const double ratio = ref_len > 0 ? sys_len / ref_len : 0.0;
    std::string prec;
    for (int n = 0; n < N; ++n) prec += (n ? "/" : "") + fmt::format("{:.1f}", precisions[size_t(n)]);
    s.text = fmt::format("BLEU = {:.2f} {} (BP = {:.3f} ratio = {:.3f} hyp_len = {:d} ref_len = {:d})", s.score, prec,
                         bp, ratio, int64_t(sys_len), int64_t(ref_len));
    s.details = {{"precisions", precisions},
                 {"bp", bp},
                 {"ratio", ratio},
                 {"hyp_len", int64_t(sys_len)},
                 {"ref_len", int64_t(ref_len)}};
    return s;
  }

  std::string signature(size_t nrefs) const override {
    std::string smooth = o_.smooth_method;
    if (o_.smooth_value && (o_.smooth_method == "floor" || o_.smooth_method == "add-k")) {
      smooth += fmt::format("[{:.2f}]", *o_.smooth_value);
    }
    return fmt::format("nrefs:{}|case:{}|eff:{}|tok:{}|smooth:{}|version:{}", nrefs, o_.lowercase ? "lc" : "mixed",
                       o_.effective_order ? "yes" : "no", to_string(o_.tokenize), smooth, signature_version());
  }

 private:
  BleuOptions o_;
};

}  // namespace

std::unique_ptr<Metric> make_bleu(const BleuOptions& options) { return std::make_unique<Bleu>(options); }

}  // namespace mtx::eval
