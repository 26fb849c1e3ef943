// TER as sacreBLEU computes it (its tercom re-implementation): beam-limited edit distance around the
// length-scaled diagonal, greedy block shifts ranked like tercom's, limits of 10 words per shift,
// 50 positions of shift distance and 1000 shift candidates per segment.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include "mtx/eval/internal.h"
#include "mtx/util/errors.h"

namespace mtx::eval {
namespace {

constexpr int kMaxShiftSize = 10, kMaxShiftDist = 50, kBeamWidth = 25, kMaxShiftCandidates = 1000;
constexpr int64_t kInf = int64_t(1e16);
enum Op : char { kNop = ' ', kSub = 's', kIns = 'i', kDel = 'd', kUndef = 'x' };

using Words = std::vector<int32_t>;

// Edit distance hypothesis -> reference, with its trace (ops from the start).
std::pair<int64_t, std::string> beam_edit_distance(const Words& h, const Words& r) {
  const size_t nh = h.size(), nr = r.size();
  std::vector<std::vector<std::pair<int64_t, char>>> dist(
      nh + 1, std::vector<std::pair<int64_t, char>>(nr + 1, {kInf, kUndef}));
  for (size_t j = 0; j <= nr; ++j) dist[0][j] = {int64_t(j), kIns};
  const double ratio = nh ? double(nr) / double(nh) : 1.0;
  const int64_t beam = kBeamWidth < ratio / 2 ? int64_t(std::ceil(ratio / 2 + kBeamWidth)) : kBeamWidth;
  for (size_t i = 1; i <= nh; ++i) {
    const auto diag = int64_t(std::floor(double(i) * ratio));
    const int64_t min_j = std::max<int64_t>(0, diag - beam);
    int64_t max_j = std::min<int64_t>(int64_t(nr) + 1, diag + beam);
    if (i == nh) max_j = int64_t(nr) + 1;
    for (int64_t jj = min_j; jj < max_j; ++jj) {
      const auto j = size_t(jj);
      if (j == 0) {
        dist[i][0] = {dist[i - 1][0].first + 1, kDel};
        continue;
      }
      const bool same = h[i - 1] == r[j - 1];
      const std::pair<int64_t, char> ops[3] = {{dist[i - 1][j - 1].first + (same ? 0 : 1), same ? kNop : kSub},
                                               {dist[i - 1][j].first + 1, kDel},
                                               {dist[i][j - 1].first + 1, kIns}};
      for (const auto& op : ops) {
        if (dist[i][j].first > op.first) dist[i][j] = op;
      }
    }
  }
  std::string trace;
  size_t i = nh, j = nr;
  while (i > 0 || j > 0) {
    const char op = dist[i][j].second;
    trace.push_back(op);
    if (op == kSub || op == kNop) {
      --i;
      --j;
    } else if (op == kIns) {
      --j;
    } else if (op == kDel) {
      --i;
    } else {
      throw Error("TER: edit distance left its beam (a pathological segment pair)");
    }
  }
  std::reverse(trace.begin(), trace.end());
  return {dist[nh][nr].first, trace};
}

Words perform_shift(const Words& w, int64_t start, int64_t length, int64_t target) {
  Words out;
  out.reserve(w.size());
  auto add = [&](int64_t a, int64_t b) {
    a = std::clamp<int64_t>(a, 0, int64_t(w.size()));
    b = std::clamp<int64_t>(b, 0, int64_t(w.size()));
    if (b > a) out.insert(out.end(), w.begin() + a, w.begin() + b);
  };
  const auto n = int64_t(w.size());
  if (target < start) {
    add(0, target);
    add(start, start + length);
    add(target, start);
    add(start + length, n);
  } else if (target > start + length) {
    add(0, start);
    add(start + length, target);
    add(start, start + length);
    add(target, n);
  } else {
    add(0, start);
    add(start + length, length + target);
    add(start, start + length);
    add(length + target, n);
  }
  return out;
}

struct ShiftResult {
  int64_t delta = 0;
  Words words;
};

ShiftResult best_shift(const Words& h, const Words& r, int& checked) {
  const auto [pre_score, inv_trace] = beam_edit_distance(h, r);
  // Alignment of reference positions to hypothesis positions, from the flipped trace.
  std::map<int64_t, int64_t> align;
  std::vector<int> ref_err, hyp_err;
  int64_t ph = -1, pr = -1;
  for (char op : inv_trace) {
    if (op == kIns)
      op = kDel;
    else if (op == kDel)
      op = kIns;
    if (op == kNop || op == kSub) {
      ++ph;
      ++pr;
      align[pr] = ph;
      hyp_err.push_back(op == kSub);
      ref_err.push_back(op == kSub);
    } else if (op == kIns) {
      ++ph;
      hyp_err.push_back(1);
    } else {
      ++pr;
      align[pr] = ph;
      ref_err.push_back(1);
    }
  }
  auto err_sum = [](const std::vector<int>& e, int64_t a, int64_t len) {
    int s = 0;
    for (int64_t k = a; k < std::min<int64_t>(a + len, int64_t(e.size())); ++k) s += e[size_t(k)];
    return s;
  };
  bool have = false;
  std::tuple<int64_t, int64_t, int64_t, int64_t> best{};
  Words best_words;
  const auto nh = int64_t(h.size()), nr = int64_t(r.size());
  for (int64_t sh = 0; sh < nh; ++sh) {
    for (int64_t sr = 0; sr < nr; ++sr) {
      if (std::llabs(sr - sh) > kMaxShiftDist) continue;
      int64_t length = 0;
      while (h[size_t(sh + length)] == r[size_t(sr + length)] && length < kMaxShiftSize) {
        ++length;
        // --- one candidate block (sh, sr, length) ---
        const bool skip = err_sum(hyp_err, sh, length) == 0 || err_sum(ref_err, sr, length) == 0 ||
                          (sh <= align[sr] && align[sr] < sh + length);
        if (!skip) {
          int64_t prev_idx = -1;
          for (int64_t offset = -1; offset < length; ++offset) {
            int64_t idx;
            if (sr + offset == -1) {
              idx = 0;
            } else if (align.count(sr + offset)) {
              idx = align[sr + offset] + 1;
            } else {
              break;
            }
            if (idx == prev_idx) continue;
            prev_idx = idx;
            Words shifted = perform_shift(h, sh, length, idx);
            const auto cand = std::make_tuple(pre_score - beam_edit_distance(shifted, r).first, length, -sh, -idx);
            ++checked;
            if (!have || cand > best) {
              have = true;
              best = cand;
              best_words = std::move(shifted);
            }
          }
        }
        if (checked >= kMaxShiftCandidates) goto done;
        if (nh == sh + length || nr == sr + length) break;
      }
    }
  }
done:
  if (!have) return {0, h};
  return {std::get<0>(best), std::move(best_words)};
}

// (edits, reference length) for one hypothesis/reference pair.
std::pair<int64_t, int64_t> translation_edit_rate(const Words& hyp, const Words& ref) {
  if (ref.empty()) return {int64_t(hyp.size()), 0};
  int checked = 0, shifts = 0;
  Words input = hyp;
  while (true) {
    ShiftResult s = best_shift(input, ref, checked);
    if (checked >= kMaxShiftCandidates) break;
    if (s.delta <= 0) break;
    ++shifts;
    input = std::move(s.words);
  }
  return {shifts + beam_edit_distance(input, ref).first, int64_t(ref.size())};
}

class Ter final : public Metric {
 public:
  explicit Ter(TerOptions o) : o_(o) {
    if (o_.asian_support) throw ConfigError("TER: asian support is not implemented in mtx");
  }

  std::vector<double> segment_stats(const std::string& hyp, const std::vector<std::string>& refs) const override {
    std::unordered_map<std::u32string, int32_t> ids;
    auto ids_of = [&](const std::vector<std::u32string>& tokens) {
      Words w;
      for (const auto& t : tokens) w.push_back(ids.emplace(t, int32_t(ids.size())).first->second);
      return w;
    };
    const Words h = ids_of(ter_tokens(rstrip(to_u32(hyp)), o_));
    int64_t best = -1;
    double ref_lengths = 0;
    for (const auto& ref : refs) {
      // sacreBLEU tokenizes each reference twice (Metric._cache_references, then TER._extract_reference_info);
      // tercom's normalisation is not idempotent ("it's\u00a0" only splits off "'s" the second time), so mtx
      // does the same to report the very same scores.
      const auto once = ter_tokens(rstrip(to_u32(ref)), o_);
      const Words r = ids_of(ter_tokens(join_words(once), o_));
      const auto [edits, len] = translation_edit_rate(h, r);
      ref_lengths += double(len);
      if (best < 0 || edits < best) best = edits;
    }
    return {double(best), ref_lengths / double(refs.size())};
  }

  Score score(const std::vector<double>& stats) const override {
    Score s;
    s.name = "TER";
    const double edits = stats[0], ref_len = stats[1];
    s.score = 100 * (ref_len > 0 ? edits / ref_len : edits > 0 ? 1.0 : 0.0);
    s.text = fmt::format("TER = {:.2f}", s.score);
    s.details = {{"edits", edits}, {"ref_len", ref_len}};
    return s;
  }

  std::string signature(size_t nrefs) const override {
    return fmt::format("nrefs:{}|case:{}|tok:tercom|norm:{}|punct:{}|asian:no|version:{}", nrefs,
                       o_.case_sensitive ? "mixed" : "lc", o_.normalized ? "yes" : "no", o_.no_punct ? "no" : "yes",
                       signature_version());
  }

  bool higher_is_better() const override { return false; }

 private:
  TerOptions o_;
};

}  // namespace

std::unique_ptr<Metric> make_ter(const TerOptions& options) { return std::make_unique<Ter>(options); }

}  // namespace mtx::eval
