#include "mtx/decode/search.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "mtx/util/cpu_isa.h"
#include "mtx/util/errors.h"

using namespace mtx::decode;

namespace {

constexpr int32_t kBos = 2, kEos = 3;
constexpr int64_t kVocab = 10;

// A fake model: next-token probabilities as a function of the prefix generated so far (and of the
// sentence, so batched search can be checked against one sentence at a time).
using Table = std::function<std::vector<double>(int64_t sentence, const std::vector<int32_t>& prefix)>;

class FakeStep final : public StepFunction {
 public:
  FakeStep(Table table, int64_t sentences) : table_(std::move(table)) {
    for (int64_t s = 0; s < sentences; ++s) rows_.push_back({s, {}});
  }
  torch::Tensor step(const torch::Tensor& tokens) override {
    EXPECT_EQ(tokens.size(0), int64_t(rows_.size()));
    rows_scored.push_back(tokens.size(0));
    torch::Tensor out = torch::empty({int64_t(rows_.size()), kVocab});
    for (size_t r = 0; r < rows_.size(); ++r) {
      const auto tok = int32_t(tokens[int64_t(r)].item<int64_t>());
      if (tok != kBos || !rows_[r].second.empty()) rows_[r].second.push_back(tok);  // BOS: a row's first step
      const std::vector<double> p = table_(rows_[r].first, rows_[r].second);
      for (int64_t v = 0; v < kVocab; ++v) out[int64_t(r)][v] = float(std::log(p[size_t(v)]));
    }
    ++steps;
    return out;
  }
  // Sentences joining the search (beam_search's Admit): their fresh rows follow the state's in the next reorder.
  void join(const std::vector<int64_t>& sentences) { joining_ = sentences; }
  void reorder(const torch::Tensor& indices, bool same_sentences) override {
    std::vector<std::pair<int64_t, std::vector<int32_t>>> next;
    for (int64_t i = 0; i < indices.size(0); ++i) {
      const auto row = size_t(indices[i].item<int64_t>());
      next.push_back(row < rows_.size() ? rows_[row] : std::make_pair(joining_.at(row - rows_.size()), Prefix{}));
    }
    joining_.clear();
    if (same_sentences) {
      for (size_t i = 0; i < next.size(); ++i) EXPECT_EQ(next[i].first, rows_[i].first) << "rows changed sentence";
    }
    rows_ = std::move(next);
  }
  int steps = 0;
  std::vector<int64_t> rows_scored;  // per step

 private:
  using Prefix = std::vector<int32_t>;
  Table table_;
  std::vector<std::pair<int64_t, Prefix>> rows_;
  std::vector<int64_t> joining_;
};

// Probability mass p on each listed token, the rest spread evenly over the other non-special tokens.
std::vector<double> dist(std::map<int32_t, double> p) {
  double used = 0;
  for (const auto& kv : p) used += kv.second;
  std::vector<double> out(size_t(kVocab), 0);
  int free = 0;
  for (int32_t v = 4; v < kVocab; ++v) free += p.count(v) ? 0 : 1;
  for (int32_t v = 0; v < kVocab; ++v) {
    if (p.count(v))
      out[size_t(v)] = p[v];
    else if (v >= 4)
      out[size_t(v)] = (1 - used) / free;
    else
      out[size_t(v)] = 1e-9;  // pad, unk, bos; EOS when not listed
  }
  return out;
}

// Greedy takes 4 (0.5) and then can only end at 0.3; beam 2 also keeps 5 (0.4), which ends at 0.9.
std::vector<double> garden_path(int64_t, const std::vector<int32_t>& prefix) {
  if (prefix.empty()) return dist({{4, 0.5}, {5, 0.4}});
  if (prefix == std::vector<int32_t>{4}) return dist({{kEos, 0.3}, {6, 0.3}, {7, 0.3}});
  if (prefix == std::vector<int32_t>{5}) return dist({{kEos, 0.9}});
  return dist({{kEos, 0.95}});
}

SearchOptions opts(int beam, double alpha = 0, int nbest = 1) {
  SearchOptions o;
  o.beam = beam;
  o.alpha = alpha;
  o.nbest = nbest;
  return o;
}

}  // namespace

TEST(BeamSearch, FindsTheBestPathGreedyMisses) {
  FakeStep beam_fn(garden_path, 1);
  const auto beam = beam_search(beam_fn, {10}, kBos, kEos, opts(2));
  ASSERT_EQ(beam[0].size(), 1u);
  EXPECT_EQ(beam[0][0].tokens, std::vector<int32_t>({5}));
  EXPECT_NEAR(beam[0][0].log_prob, std::log(0.4 * 0.9), 1e-5);
  EXPECT_NEAR(beam[0][0].score, beam[0][0].log_prob, 1e-9) << "alpha 0: raw log-probability";

  FakeStep greedy_fn(garden_path, 1);
  const auto greedy = beam_search(greedy_fn, {10}, kBos, kEos, opts(1));
  ASSERT_EQ(greedy[0][0].tokens.size() >= 1, true);
  EXPECT_EQ(greedy[0][0].tokens[0], 4) << "greedy follows the locally best token";
  EXPECT_LT(greedy[0][0].log_prob, beam[0][0].log_prob);
}

// A search's first step scores one row per sentence (its k beams would all be that row: BOS on the same memory)
// and fills k rows each from its best candidates; each later step scores k rows per sentence still searching.
TEST(BeamSearch, TheFirstStepScoresOneRowPerSentence) {
  FakeStep fn(garden_path, 3);
  const auto found = beam_search(fn, {10, 10, 10}, kBos, kEos, opts(4, 0.6, 2));
  ASSERT_GE(fn.rows_scored.size(), size_t(2));
  EXPECT_EQ(fn.rows_scored[0], 3);
  EXPECT_EQ(fn.rows_scored[1], 12);
  FakeStep alone(garden_path, 1);
  const auto one = beam_search(alone, {10}, kBos, kEos, opts(4, 0.6, 2));
  for (const auto& sentence : found) {
    ASSERT_EQ(sentence.size(), one[0].size());
    for (size_t h = 0; h < one[0].size(); ++h) EXPECT_EQ(sentence[h].tokens, one[0][h].tokens);
  }
}

TEST(BeamSearch, StopsAtEosAndForcesItAtTheLengthLimit) {
  // A model that never wants to stop: every output hits the limit, ends with a forced EOS.
  auto chatty = [](int64_t, const std::vector<int32_t>&) { return dist({{6, 0.7}, {kEos, 1e-6}}); };
  for (const int beam : {1, 3}) {
    FakeStep fn(chatty, 2);
    const auto out = beam_search(fn, {4, 7}, kBos, kEos, opts(beam));
    EXPECT_EQ(out[0][0].tokens, std::vector<int32_t>(3, 6)) << "limit 4 = 3 tokens + EOS, beam " << beam;
    EXPECT_EQ(out[1][0].tokens, std::vector<int32_t>(6, 6)) << "limit 7 = 6 tokens + EOS, beam " << beam;
    EXPECT_EQ(fn.steps, 7) << "the search ends when the last sentence is done";
  }
  // A model that stops at once gives an empty hypothesis, and the search ends after one step.
  FakeStep quiet([](int64_t, const std::vector<int32_t>&) { return dist({{kEos, 0.99}}); }, 1);
  const auto out = beam_search(quiet, {50}, kBos, kEos, opts(4));
  EXPECT_TRUE(out[0][0].tokens.empty());
  EXPECT_LE(quiet.steps, 2);
}

// Each sentence is told of once, as soon as its search ends (the server answers its request then), with the
// hypotheses the search returns for it.
TEST(BeamSearch, EachSentenceIsToldOfOnceWhenItsSearchEnds) {
  auto chatty = [](int64_t, const std::vector<int32_t>&) { return dist({{6, 0.7}, {kEos, 1e-6}}); };
  for (const bool exact : {false, true}) {
    for (const int beam : {1, 3}) {
      FakeStep fn(chatty, 3);
      std::map<int64_t, int> told_at;  // sentence -> steps taken when told
      std::map<int64_t, std::vector<Hypothesis>> told;
      SearchOptions o = opts(beam, 0.6, beam);
      o.exact_stop = exact;
      const auto out =
          beam_search(fn, {4, 7, 2}, kBos, kEos, o, -1, -1, [&](int64_t s, const std::vector<Hypothesis>& h) {
            EXPECT_EQ(told_at.count(s), 0u) << "sentence " << s << " told twice";
            told_at[s] = fn.steps;
            told[s] = h;
          });
      EXPECT_EQ(told_at, (std::map<int64_t, int>{{0, 4}, {1, 7}, {2, 2}})) << "beam " << beam;
      for (int64_t s = 0; s < 3; ++s) {
        ASSERT_EQ(told[s].size(), out[size_t(s)].size());
        for (size_t h = 0; h < out[size_t(s)].size(); ++h) {
          EXPECT_EQ(told[s][h].tokens, out[size_t(s)][h].tokens);
          EXPECT_EQ(told[s][h].score, out[size_t(s)][h].score);
        }
      }
    }
  }
}

// Continuous batching: sentences admitted into a running search (at different steps, several at once, after all
// others ended) are searched exactly as alone -- their length limits and min_len count from their own start.
TEST(BeamSearch, SentencesAdmittedMidSearchAreSearchedAsIfAlone) {
  auto table = [](int64_t s, const std::vector<int32_t>& prefix) {
    if (s % 3 == 1) return prefix.empty() ? dist({{5, 0.6}}) : dist({{kEos, 0.9}});
    if (s % 3 == 2) return garden_path(s, prefix);
    return prefix.size() < 4 ? dist({{int32_t(4 + prefix.size()), 0.5}, {kEos, 0.05}}) : dist({{kEos, 0.8}});
  };
  // sentence -> its length limit; sentences 2-5 join after the steps listed, 6 and 7 once all others ended.
  const std::vector<int64_t> limit = {12, 3, 12, 12, 4, 12, 12, 2};
  const std::map<int64_t, std::vector<int64_t>> joins = {{1, {2}}, {2, {3, 4}}, {5, {5}}};
  for (const int beam : {1, 4}) {
    for (const int min_len : {0, 2}) {
      SearchOptions o = opts(beam, 0.6, beam > 1 ? 2 : 1);
      o.min_len = min_len;
      FakeStep fn(table, 2);
      int64_t searching_seen = -1;
      bool late = false;
      int late_step = -1;
      std::map<int64_t, std::vector<Hypothesis>> told;
      const auto all = beam_search(
          fn, {limit[0], limit[1]}, kBos, kEos, o, -1, -1,
          [&](int64_t s, const std::vector<Hypothesis>& h) { told[s] = h; },
          [&](int64_t searching) {
            searching_seen = searching;
            const auto it = joins.find(fn.steps);
            std::vector<int64_t> sentences;
            if (it != joins.end()) sentences = it->second;
            if (searching == 0 && !late) {
              late = true;
              late_step = fn.steps;
              sentences = {6, 7};
            }
            fn.join(sentences);
            std::vector<SearchSentence> joining;
            for (const int64_t s : sentences) {
              joining.emplace_back();
              joining.back().max_length = limit[size_t(s)];
            }
            return joining;
          });
      EXPECT_EQ(searching_seen, 0) << "the last call comes when nothing is left";
      ASSERT_GT(late_step, 0);
      EXPECT_EQ(fn.rows_scored[size_t(late_step)], 2) << "a joining sentence's first step scores one row";
      ASSERT_EQ(all.size(), limit.size());
      for (size_t s = 0; s < limit.size(); ++s) {
        FakeStep one_fn([&](int64_t, const std::vector<int32_t>& p) { return table(int64_t(s), p); }, 1);
        const auto one = beam_search(one_fn, {limit[s]}, kBos, kEos, o);
        const std::string where =
            "sentence " + std::to_string(s) + " beam " + std::to_string(beam) + " min_len " + std::to_string(min_len);
        ASSERT_EQ(all[s].size(), one[0].size()) << where;
        ASSERT_EQ(told[int64_t(s)].size(), one[0].size()) << where;
        for (size_t h = 0; h < one[0].size(); ++h) {
          EXPECT_EQ(all[s][h].tokens, one[0][h].tokens) << where;
          EXPECT_EQ(all[s][h].score, one[0][h].score) << where;
          EXPECT_EQ(told[int64_t(s)][h].tokens, one[0][h].tokens) << where;
        }
      }
    }
  }
}

TEST(BeamSearch, MinimumLengthDelaysEos) {
  FakeStep fn([](int64_t, const std::vector<int32_t>&) { return dist({{kEos, 0.9}}); }, 1);
  SearchOptions o = opts(2);
  o.min_len = 3;
  const auto out = beam_search(fn, {20}, kBos, kEos, o);
  EXPECT_EQ(out[0][0].tokens.size(), 3u);
}

TEST(BeamSearch, LengthPenaltyDecidesBetweenShortAndLong) {
  // Stop now (0.3) or say "6 6 6" (0.65 each) and then stop (0.65).
  auto table = [](int64_t, const std::vector<int32_t>& prefix) {
    if (prefix.empty()) return dist({{kEos, 0.3}, {6, 0.65}});
    if (prefix.size() < 3) return dist({{6, 0.65}, {kEos, 1e-6}});
    return dist({{kEos, 0.65}});
  };
  FakeStep raw_fn(table, 1);
  const auto raw = beam_search(raw_fn, {20}, kBos, kEos, opts(3, 0.0));
  EXPECT_TRUE(raw[0][0].tokens.empty()) << "log 0.3 = -1.20 beats 4 log 0.65 = -1.72";
  FakeStep norm_fn(table, 1);
  const auto norm = beam_search(norm_fn, {20}, kBos, kEos, opts(3, 1.0));
  EXPECT_EQ(norm[0][0].tokens, std::vector<int32_t>({6, 6, 6})) << "-1.72 / ((5+4)/6) = -1.15 beats -1.20 / 1";
  EXPECT_NEAR(norm[0][0].score, 4 * std::log(0.65) / length_penalty(4, 1.0), 1e-5);
  EXPECT_DOUBLE_EQ(length_penalty(7, 0.6), std::pow(12.0 / 6.0, 0.6));
}

// Marian's search (shrink_beam): at step 1, [4 EOS] (0.25) and [5 6] (0.2) are the beam's two best candidates;
// [4] ends and the beam narrows to [5 6], so [5 7] (0.18, then EOS at 0.99) is never continued. A fixed beam keeps
// [5 7], and with Marian's normalisation (log_prob / length, EOS counted) it wins: -0.575 against -0.693.
std::vector<double> narrowing(int64_t, const std::vector<int32_t>& prefix) {
  if (prefix.empty()) return dist({{4, 0.5}, {5, 0.4}});
  if (prefix == std::vector<int32_t>{4}) return dist({{kEos, 0.5}});
  if (prefix == std::vector<int32_t>{5}) return dist({{6, 0.5}, {7, 0.45}});
  if (prefix == std::vector<int32_t>{5, 6}) return dist({{kEos, 0.3}});
  if (prefix == std::vector<int32_t>{5, 7}) return dist({{kEos, 0.99}});
  return dist({{kEos, 0.95}});
}

TEST(BeamSearch, AShrinkingBeamNarrowsAsHypothesesEndAsMariansDoes) {
  SearchOptions o = opts(2, 0, 2);
  o.normalize = 1;
  FakeStep fixed_fn(narrowing, 1);
  const auto fixed = beam_search(fixed_fn, {10}, kBos, kEos, o);
  EXPECT_EQ(fixed[0][0].tokens, std::vector<int32_t>({5, 7}));
  EXPECT_NEAR(fixed[0][0].score, std::log(0.4 * 0.45 * 0.99) / 3, 1e-5) << "Marian's length counts EOS";
  o.shrink_beam = true;
  FakeStep shrink_fn(narrowing, 1);
  const auto shrunk = beam_search(shrink_fn, {10}, kBos, kEos, o);
  ASSERT_EQ(shrunk[0].size(), 2u) << "every hypothesis of the beam ends";
  EXPECT_EQ(shrunk[0][0].tokens, std::vector<int32_t>({4}));
  EXPECT_NEAR(shrunk[0][0].score, std::log(0.5 * 0.5) / 2, 1e-5);
  EXPECT_EQ(shrunk[0][1].tokens, std::vector<int32_t>({5, 6}));
  EXPECT_EQ(shrink_fn.steps, 3) << "the search goes on until the last hypothesis ended";
  // Batched, and with sentences that join later, each sentence is searched as if alone.
  FakeStep batch_fn(narrowing, 3);
  const auto batch = beam_search(batch_fn, {10, 2, 10}, kBos, kEos, o);
  EXPECT_EQ(batch[0][0].tokens, shrunk[0][0].tokens);
  EXPECT_EQ(batch[2][1].tokens, shrunk[0][1].tokens);
  // Beam 1 is greedy search.
  FakeStep greedy_fn(garden_path, 1);
  const auto greedy = beam_search(greedy_fn, {10}, kBos, kEos, opts(1));
  o = opts(1);
  o.shrink_beam = true;
  FakeStep shrink1_fn(garden_path, 1);
  EXPECT_EQ(beam_search(shrink1_fn, {10}, kBos, kEos, o)[0][0].tokens, greedy[0][0].tokens);
}

// Marian's score: (log_prob - word_penalty x length) / length^normalize, EOS counted; GNMT's alpha is left out.
TEST(BeamSearch, WordPenaltyAndPowerNormalisationScoreAsMariansHistory) {
  for (const double wp : {0.0, 0.5, -2.0}) {
    SearchOptions o = opts(3, /*alpha=*/0.6, 3);
    o.normalize = 0.8;
    o.word_penalty = wp;
    FakeStep fn(garden_path, 1);
    const auto out = beam_search(fn, {10}, kBos, kEos, o);
    for (const Hypothesis& h : out[0]) {
      const auto length = double(h.tokens.size() + 1);
      EXPECT_NEAR(h.score, (h.log_prob - wp * length) / std::pow(length, 0.8), 1e-6) << "word penalty " << wp;
    }
    for (size_t i = 1; i < out[0].size(); ++i) EXPECT_GE(out[0][i - 1].score, out[0][i].score);
  }
  // A large word penalty prefers the shorter hypothesis; a negative one (a bonus) the longer.
  SearchOptions o = opts(2, 0, 1);
  o.word_penalty = 5;
  FakeStep short_fn(narrowing, 1);
  EXPECT_EQ(beam_search(short_fn, {10}, kBos, kEos, o)[0][0].tokens, std::vector<int32_t>({4}));
  o.word_penalty = -5;
  FakeStep long_fn(narrowing, 1);
  EXPECT_EQ(beam_search(long_fn, {10}, kBos, kEos, o)[0][0].tokens.size(), 2u);
}

// Marian's limit (max_length_factor): a hypothesis still open at the limit ends there as it is, without EOS, its
// length the tokens it has.
TEST(BeamSearch, MariansLimitEndsOpenHypothesesWithoutEos) {
  auto chatty = [](int64_t, const std::vector<int32_t>&) { return dist({{6, 0.7}, {kEos, 1e-6}}); };
  for (const bool shrink : {false, true}) {
    for (const int beam : {1, 3}) {
      SearchOptions o = opts(beam, 0, 1);
      o.max_length_factor = 3;
      o.normalize = 1;
      o.shrink_beam = shrink;
      FakeStep fn(chatty, 2);
      const auto out = beam_search(fn, {4, 7}, kBos, kEos, o);
      EXPECT_EQ(out[0][0].tokens, std::vector<int32_t>(4, 6)) << "limit 4: 4 tokens, no EOS; beam " << beam;
      EXPECT_EQ(out[1][0].tokens, std::vector<int32_t>(7, 6));
      EXPECT_NEAR(out[0][0].log_prob, 4 * std::log(0.7), 1e-5);
      EXPECT_NEAR(out[0][0].score, 4 * std::log(0.7) / 4, 1e-5);
      EXPECT_EQ(fn.steps, 7);
    }
  }
}

TEST(BeamSearch, NbestListsAreSortedAndDistinct) {
  auto table = [](int64_t, const std::vector<int32_t>& prefix) {
    if (prefix.empty()) return dist({{4, 0.4}, {5, 0.3}, {6, 0.2}});
    return dist({{kEos, 0.9}});
  };
  FakeStep fn(table, 1);
  const auto out = beam_search(fn, {10}, kBos, kEos, opts(3, 0.6, 3));
  ASSERT_EQ(out[0].size(), 3u);
  EXPECT_EQ(out[0][0].tokens, std::vector<int32_t>({4}));
  EXPECT_EQ(out[0][1].tokens, std::vector<int32_t>({5}));
  EXPECT_EQ(out[0][2].tokens, std::vector<int32_t>({6}));
  EXPECT_GT(out[0][0].score, out[0][1].score);
  EXPECT_GT(out[0][1].score, out[0][2].score);
}

TEST(BeamSearch, EachSentenceIsSearchedAsIfAlone) {
  // Sentence-dependent tables; sentence 1 finishes early, so the batch shrinks mid-search.
  auto table = [](int64_t s, const std::vector<int32_t>& prefix) {
    if (s == 1) return prefix.empty() ? dist({{5, 0.6}}) : dist({{kEos, 0.9}});
    if (s == 2) return garden_path(s, prefix);
    return prefix.size() < 4 ? dist({{int32_t(4 + prefix.size()), 0.5}, {kEos, 0.05}}) : dist({{kEos, 0.8}});
  };
  for (const int beam : {1, 4}) {
    FakeStep all_fn(table, 3);
    const auto all = beam_search(all_fn, {12, 12, 12}, kBos, kEos, opts(beam, 0.6, beam > 1 ? 2 : 1));
    for (int64_t s = 0; s < 3; ++s) {
      FakeStep one_fn([&](int64_t, const std::vector<int32_t>& p) { return table(s, p); }, 1);
      const auto one = beam_search(one_fn, {12}, kBos, kEos, opts(beam, 0.6, beam > 1 ? 2 : 1));
      ASSERT_EQ(all[size_t(s)].size(), one[0].size());
      for (size_t h = 0; h < one[0].size(); ++h) {
        EXPECT_EQ(all[size_t(s)][h].tokens, one[0][h].tokens) << "sentence " << s << " beam " << beam;
        EXPECT_NEAR(all[size_t(s)][h].score, one[0][h].score, 1e-6);
      }
    }
  }
}

TEST(BeamSearch, RejectsBadOptions) {
  EXPECT_THROW(validate(opts(0)), mtx::ConfigError);
  EXPECT_THROW(validate(opts(2, 0.6, 3)), mtx::ConfigError);
  EXPECT_THROW(validate(opts(2, -1)), mtx::ConfigError);
  EXPECT_NO_THROW(validate(opts(5, 0.6, 5)));
}

// ---- Defects of issue #12 (each failed before its fix) ----

// Defect 4: the length limit wins over min_len; min_len past the limit gave an empty result silently.
TEST(BeamSearch, LengthLimitWinsOverMinimumLength) {
  for (const int beam : {1, 3}) {
    FakeStep fn([](int64_t, const std::vector<int32_t>&) { return dist({{kEos, 0.9}}); }, 1);
    SearchOptions o = opts(beam);
    o.min_len = 5;
    const auto out = beam_search(fn, {3}, kBos, kEos, o);
    ASSERT_EQ(out[0].size(), 1u) << "beam " << beam << ": a hypothesis, not an empty result";
    EXPECT_EQ(out[0][0].tokens.size(), 2u) << "limit 3 = 2 tokens + EOS";
  }
}

// Defect 4: a beam the vocabulary cannot feed is a ConfigError naming the beam, not a raw c10 error.
TEST(BeamSearch, BeamLargerThanHalfTheVocabularyIsAConfigError) {
  FakeStep fn(garden_path, 1);
  try {
    beam_search(fn, {10}, kBos, kEos, opts(6));  // 2 * 6 > 10 pieces
    FAIL() << "expected a ConfigError";
  } catch (const mtx::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("beam"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
  }
}

// Defect 7: BOS is never generated (pad is masked by the translator, which knows its id; see
// Translator.NeverGeneratesPadOrBos).
TEST(BeamSearch, NeverGeneratesBos) {
  auto table = [](int64_t, const std::vector<int32_t>& prefix) {
    std::vector<double> p = prefix.size() < 3 ? dist({{6, 0.3}}) : dist({{kEos, 0.9}});
    p[size_t(kBos)] = 0.6;  // a model that wants BOS most
    return p;
  };
  for (const int beam : {1, 3}) {
    FakeStep fn(table, 1);
    const auto out = beam_search(fn, {10}, kBos, kEos, opts(beam));
    for (const int32_t t : out[0][0].tokens) EXPECT_NE(t, kBos) << "beam " << beam;
  }
}

// Defect 7: by default a sentence ends once `beam` hypotheses have finished (fairseq's and CTranslate2's
// rule): under length normalisation a live hypothesis could still have won. exact_stop keeps searching
// until no live hypothesis can beat the beam-th finished one, and finds it.
TEST(BeamSearch, ExactStopFindsWhatTheFirstKRuleMisses) {
  auto table = [](int64_t, const std::vector<int32_t>& prefix) {
    if (prefix.empty()) return dist({{kEos, 0.31}, {4, 0.35}, {6, 0.29}});
    if (prefix == std::vector<int32_t>{4}) return dist({{kEos, 0.9}});
    if (prefix == std::vector<int32_t>{6}) return dist({{6, 0.9}, {kEos, 0.05}});
    if (prefix == std::vector<int32_t>{6, 6}) return dist({{kEos, 0.97}});
    return dist({{kEos, 0.95}});
  };
  SearchOptions o = opts(2, 2.0);
  FakeStep first_k(table, 1);
  const auto approx = beam_search(first_k, {10}, kBos, kEos, o);
  EXPECT_EQ(approx[0][0].tokens, std::vector<int32_t>({4})) << "what the first-k rule returns (documented)";
  o.exact_stop = true;
  FakeStep exact_fn(table, 1);
  const auto exact = beam_search(exact_fn, {10}, kBos, kEos, o);
  EXPECT_EQ(exact[0][0].tokens, std::vector<int32_t>({6, 6}));
  EXPECT_GT(exact[0][0].score, approx[0][0].score) << "a better hypothesis under the same scoring";
  EXPECT_NEAR(exact[0][0].score, std::log(0.29 * 0.9 * 0.97) / length_penalty(3, 2.0), 1e-5);
}

// The CPU's fused candidate choice (one pass per row: max, sum of exponentials, best 2k; then a merge per
// sentence) is the tensor path's log_softmax + masks + topk, on logits of any offset.
TEST(BeamSearch, FusedCandidatesMatchTheTensorPath) {
  torch::manual_seed(7);
  for (const int64_t k : {1, 2, 5}) {
    // k rows per sentence, or one (a search's first step), both of which give 2k candidates.
    for (const int64_t vocab : {int64_t(12), int64_t(1000), int64_t(8003)}) {
      for (const int64_t width : {k, int64_t(1)}) {
        const int64_t sentences = 4, rows = sentences * width;
        const torch::Tensor logits = torch::randn({rows, vocab}) * 3 + 40;  // unnormalised, far from 0
        logits[rows - 1][vocab - 1] = 90;  // a row's best in its very last column (past the last 16-wide chunk)
        std::vector<float> prior(static_cast<size_t>(rows));
        for (int64_t r = 0; r < rows; ++r) prior[size_t(r)] = r % width == 1 ? -INFINITY : -0.37f * float(r);
        StepRules rules;
        rules.bos = 2;
        rules.eos = 3;
        rules.pad = 0;
        for (const bool banned : {false, true}) {
          rules.eos_banned.assign(size_t(sentences), banned ? 1 : 0);
          rules.forced = {0, 1, 0, 0};
          // Make EOS attractive in sentence 0 so that the ban matters.
          logits.select(1, 3).narrow(0, 0, width).fill_(80);
          const Candidates fused = best_candidates(logits, prior, k, rules, true, width);
          const Candidates plain = best_candidates(logits, prior, k, rules, false, width);
          ASSERT_EQ(plain.scores.sizes(), (torch::IntArrayRef{sentences, 2 * k}));
          ASSERT_EQ(fused.scores.sizes(), plain.scores.sizes());
          const auto fs = fused.scores.accessor<float, 2>(), ps = plain.scores.accessor<float, 2>();
          const auto fi = fused.indices.accessor<int64_t, 2>(), pi = plain.indices.accessor<int64_t, 2>();
          for (int64_t a = 0; a < sentences; ++a) {
            for (int64_t c = 0; c < 2 * k; ++c) {
              const std::string where = "k " + std::to_string(k) + " width " + std::to_string(width) + " vocab " +
                                        std::to_string(vocab) + " sentence " + std::to_string(a) + " candidate " +
                                        std::to_string(c);
              if (std::isinf(ps[a][c])) {
                EXPECT_TRUE(std::isinf(fs[a][c]) && fs[a][c] < 0) << where;
                continue;
              }
              EXPECT_NEAR(fs[a][c], ps[a][c], 2e-5 * std::max(1.f, std::abs(ps[a][c]))) << where;
              EXPECT_EQ(fi[a][c], pi[a][c]) << where;
            }
          }
          EXPECT_EQ(fi[1][0] % vocab, 3) << "a sentence at its limit may only end";
          if (banned)
            EXPECT_NE(fi[0][0] % vocab, 3) << "EOS banned before min_len";
          else
            EXPECT_EQ(fi[0][0] % vocab, 3);
        }
      }
    }
  }
}

// The fused choice's row passes (the maximum, the sum of exponentials) are compiled per instruction set: every
// level this CPU runs gives the same candidates bit for bit, so a translation does not depend on the machine.
TEST(BeamSearch, FusedCandidatesAreTheSameAtEveryLevel) {
  torch::manual_seed(8);
  const int64_t k = 5, sentences = 3, vocab = 8003;
  torch::Tensor logits = torch::randn({sentences * k, vocab}) * 4;  // [rows, V]
  logits[0][5] = -200;                                              // below exp's clamp
  logits[1].fill_(7);                                               // a flat row: every exp is 1
  const std::vector<float> prior(static_cast<size_t>(sentences * k), -0.5f);
  StepRules rules;
  rules.bos = 2;
  rules.eos = 3;
  rules.pad = 0;
  rules.forced = {0, 0, 0};
  std::optional<Candidates> first;
  for (const mtx::cpu::Isa isa : mtx::cpu::runnable()) {
    mtx::cpu::ScopedIsa level(isa);
    const Candidates c = best_candidates(logits, prior, k, rules, true);
    if (!first) {
      first = c;
      continue;
    }
    EXPECT_TRUE(torch::equal(c.scores, first->scores))
        << mtx::cpu::name(isa) << ": max diff " << (c.scores - first->scores).abs().max().item<float>();
    EXPECT_TRUE(torch::equal(c.indices, first->indices)) << mtx::cpu::name(isa);
  }
}

// A step function may return logits: search normalises them, so a per-row offset changes nothing.
TEST(BeamSearch, LogitsAndLogProbabilitiesSearchAlike) {
  class Shifted final : public StepFunction {
   public:
    explicit Shifted(FakeStep& inner) : inner_(inner) {}
    torch::Tensor step(const torch::Tensor& tokens) override {
      const torch::Tensor logp = inner_.step(tokens);
      return logp + torch::arange(logp.size(0), torch::kFloat).unsqueeze(1) * 7 + 3;
    }
    void reorder(const torch::Tensor& indices, bool same) override { inner_.reorder(indices, same); }

   private:
    FakeStep& inner_;
  };
  FakeStep a(garden_path, 2), b(garden_path, 2);
  Shifted shifted(b);
  const auto plain = beam_search(a, {10, 10}, kBos, kEos, opts(3, 0.6, 2));
  const auto logits = beam_search(shifted, {10, 10}, kBos, kEos, opts(3, 0.6, 2));
  ASSERT_EQ(plain.size(), logits.size());
  for (size_t s = 0; s < plain.size(); ++s) {
    ASSERT_EQ(plain[s].size(), logits[s].size());
    for (size_t h = 0; h < plain[s].size(); ++h) {
      EXPECT_EQ(plain[s][h].tokens, logits[s][h].tokens);
      EXPECT_NEAR(plain[s][h].log_prob, logits[s][h].log_prob, 1e-5);
    }
  }
}

// Scores handed over in row blocks (a model projecting block by block) search exactly as one block.
TEST(BeamSearch, ScoresInRowBlocksSearchAsOneBlock) {
  class Blocks final : public StepFunction {
   public:
    explicit Blocks(FakeStep& inner) : inner_(inner) {}
    torch::Tensor step(const torch::Tensor& tokens) override { return inner_.step(tokens); }
    void step_blocks(const torch::Tensor& tokens, int64_t block_rows, const BlockConsumer& consume) override {
      EXPECT_GE(block_rows, 3);
      const torch::Tensor all = inner_.step(tokens);
      for (int64_t first = 0; first < all.size(0); first += 3)
        consume(first, all.narrow(0, first, std::min<int64_t>(3, all.size(0) - first)));
    }
    void reorder(const torch::Tensor& indices, bool same) override { inner_.reorder(indices, same); }

   private:
    FakeStep& inner_;
  };
  // Each sentence its own garden path: a sentence-dependent table, so rows read from the wrong block show.
  auto table = [](int64_t s, const std::vector<int32_t>& prefix) {
    if (prefix.empty()) return dist({{int32_t(4 + s % 4), 0.5}, {int32_t(4 + (s + 1) % 4), 0.4}});
    if (prefix.size() < size_t(1 + s % 3)) return dist({{int32_t(4 + (s + prefix.size()) % 5), 0.6}, {kEos, 0.1}});
    return dist({{kEos, 0.9}});
  };
  FakeStep a(table, 5), b(table, 5);
  Blocks blocks(b);
  const std::vector<int64_t> limits(5, 12);
  const auto one = beam_search(a, limits, kBos, kEos, opts(4, 0.6, 3));
  const auto split = beam_search(blocks, limits, kBos, kEos, opts(4, 0.6, 3));
  ASSERT_EQ(one.size(), split.size());
  for (size_t s = 0; s < one.size(); ++s) {
    ASSERT_EQ(one[s].size(), split[s].size()) << "sentence " << s;
    for (size_t h = 0; h < one[s].size(); ++h) {
      EXPECT_EQ(one[s][h].tokens, split[s][h].tokens) << "sentence " << s << " hypothesis " << h;
      EXPECT_EQ(one[s][h].log_prob, split[s][h].log_prob);
    }
  }
}

// Greedy search whose scores nobody reads (SearchOptions::scores false) chooses on the raw scores, without the
// log-softmax: the same tokens as with scores, under the same rules (min_len, length limits, banned <unk>), and
// NaN for the scores it skipped. Beam search and exact_stop keep their scores either way.
TEST(BeamSearch, GreedyWithoutScoresChoosesTheSameTokens) {
  constexpr int32_t kUnk = 1;
  // Unnormalised scores: a pseudo-random distribution per (sentence, prefix), <unk> often the likeliest, EOS
  // likelier as the prefix grows, and a per-row offset so that raw scores are not log-probabilities.
  auto table = [](int64_t s, const std::vector<int32_t>& prefix) {
    uint64_t h = 1469598103934665603ull ^ uint64_t(s);
    for (const int32_t t : prefix) h = (h ^ uint64_t(t + 1)) * 1099511628211ull;
    std::vector<double> p(static_cast<size_t>(kVocab));
    double total = 0;
    for (int64_t v = 0; v < kVocab; ++v) {
      h = h * 6364136223846793005ull + 1442695040888963407ull;
      p[size_t(v)] = 0.05 + double(h >> 40) / double(1ull << 24);
      if (v == kBos || v == 0) p[size_t(v)] = 1e-6;
      if (v == kUnk && s % 2 == 0) p[size_t(v)] = 3;
      if (v == kEos) p[size_t(v)] *= 0.2 * double(prefix.size());
      total += p[size_t(v)];
    }
    for (double& x : p) x /= total;
    return p;
  };
  class Shifted final : public StepFunction {
   public:
    explicit Shifted(FakeStep& inner) : inner_(inner) {}
    torch::Tensor step(const torch::Tensor& tokens) override {
      const torch::Tensor logp = inner_.step(tokens);  // [rows, V]
      return logp * 1.5 + torch::arange(logp.size(0), torch::kFloat).unsqueeze(1) * 3 - 20;
    }
    void reorder(const torch::Tensor& indices, bool same) override { inner_.reorder(indices, same); }

   private:
    FakeStep& inner_;
  };
  const int64_t sentences = 12;
  std::vector<int64_t> limits;
  for (int64_t s = 0; s < sentences; ++s) limits.push_back(2 + s % 9);
  auto run = [&](int beam, bool scores, bool exact_stop) {
    FakeStep inner(table, sentences);
    Shifted fn(inner);
    SearchOptions o = opts(beam, 0.6);
    o.min_len = 2;
    o.scores = scores;
    o.exact_stop = exact_stop;
    return beam_search(fn, limits, kBos, kEos, o, /*pad=*/0, kUnk);
  };
  for (const bool exact_stop : {false, true}) {
    const auto with = run(1, true, exact_stop), without = run(1, false, exact_stop);
    ASSERT_EQ(with.size(), without.size());
    int64_t tokens = 0;
    for (size_t s = 0; s < with.size(); ++s) {
      ASSERT_EQ(with[s].size(), 1u);
      ASSERT_EQ(without[s].size(), 1u);
      EXPECT_EQ(with[s][0].tokens, without[s][0].tokens) << "sentence " << s;
      for (const int32_t t : without[s][0].tokens) EXPECT_NE(t, kUnk) << "sentence " << s;
      tokens += int64_t(without[s][0].tokens.size());
      EXPECT_TRUE(std::isfinite(with[s][0].score));
      EXPECT_EQ(std::isnan(without[s][0].score), !exact_stop) << "sentence " << s;
      EXPECT_EQ(std::isnan(without[s][0].log_prob), !exact_stop) << "sentence " << s;
    }
    EXPECT_GT(tokens, 3 * sentences) << "the sentences should run past min_len";
  }
  const auto beam = run(3, false, false), beam_scored = run(3, true, false);
  for (size_t s = 0; s < beam.size(); ++s) {
    EXPECT_EQ(beam[s][0].tokens, beam_scored[s][0].tokens);
    EXPECT_EQ(beam[s][0].score, beam_scored[s][0].score) << "beam search keeps its scores";
  }
}

namespace {

SearchInput input_of(const std::vector<SearchSentence>& sentences) {
  SearchInput in;
  in.sentences = sentences;
  in.bos = kBos;
  in.eos = kEos;
  return in;
}

}  // namespace

// A target prefix is forced, its tokens' log-probabilities count, and the search goes on after it; a sentence
// with a prefix searches the same beside others as alone.
TEST(BeamSearch, TargetPrefixIsForcedThenTheSearchContinues) {
  for (const int beam : {1, 3}) {
    FakeStep fn(garden_path, 2);
    const auto out = beam_search(fn, opts(beam), input_of({{10, {5}, 0}, {10, {}, 0}}));
    ASSERT_FALSE(out[0].empty());
    EXPECT_EQ(out[0][0].tokens, (std::vector<int32_t>{5})) << "beam " << beam;
    EXPECT_NEAR(out[0][0].log_prob, std::log(0.4) + std::log(0.9), 1e-5);
    FakeStep alone(garden_path, 1);
    EXPECT_EQ(beam_search(alone, opts(beam), input_of({{10, {}, 0}}))[0][0].tokens, out[1][0].tokens);
    // A prefix the model finds unlikely, longer than the limit: all of it, then the search.
    FakeStep fn2(garden_path, 1);
    const auto forced = beam_search(fn2, opts(beam), input_of({{1, {6, 7, 6}, 0}}));
    ASSERT_FALSE(forced[0].empty());
    EXPECT_EQ(forced[0][0].tokens, (std::vector<int32_t>{6, 7, 6})) << "the limit grows to hold the prefix";
  }
}

// Repetition controls with transformers' definitions: the penalty divides a seen token's positive score and
// multiplies a negative one; no n-gram occurs twice. Worked by hand on a model that loves token 4.
TEST(BeamSearch, RepetitionPenaltyAndNoRepeatNgramsAsTransformersDefineThem) {
  const Table loops = [](int64_t, const std::vector<int32_t>&) { return dist({{4, 0.6}, {5, 0.3}, {kEos, 0.05}}); };
  FakeStep plain(loops, 1);
  EXPECT_EQ(beam_search(plain, {6}, kBos, kEos, opts(1))[0][0].tokens, (std::vector<int32_t>{4, 4, 4, 4, 4}));
  // Penalty 3 on log-probabilities: 4 -> 3 ln 0.6 = -1.53 < ln 0.3 = -1.20, then 5 -> 3 ln 0.3 = -3.61.
  SearchOptions o = opts(1);
  o.repetition_penalty = 3;
  FakeStep penalised(loops, 1);
  EXPECT_EQ(beam_search(penalised, {6}, kBos, kEos, o)[0][0].tokens, (std::vector<int32_t>{4, 5, 4, 4, 4}));
  // Penalty 1.5: 1.5 ln 0.6 = -0.77 still beats ln 0.3.
  o.repetition_penalty = 1.5;
  FakeStep mild(loops, 1);
  EXPECT_EQ(beam_search(mild, {6}, kBos, kEos, o)[0][0].tokens, (std::vector<int32_t>{4, 4, 4, 4, 4}));
  // No repeated bigram: 4 4, then 4 is banned after 4 (5), then 5 4 is new, then 4 after 4 again banned ...
  for (const int beam : {1, 2}) {
    SearchOptions n = opts(beam);
    n.no_repeat_ngram_size = 2;
    FakeStep ngram(loops, 1);
    const auto h = beam_search(ngram, {8}, kBos, kEos, n)[0][0].tokens;
    std::set<std::pair<int32_t, int32_t>> seen;
    for (size_t i = 0; i + 1 < h.size(); ++i) {
      EXPECT_TRUE(seen.insert({h[i], h[i + 1]}).second) << "bigram repeated at " << i << ", beam " << beam;
    }
    ASSERT_GE(h.size(), 3u);
    EXPECT_EQ(h[0], 4);
    EXPECT_EQ(h[1], 4);
    EXPECT_EQ(h[2], 5);
  }
  // Unigrams: no token twice.
  SearchOptions u = opts(1);
  u.no_repeat_ngram_size = 1;
  FakeStep once(loops, 1);
  const auto h = beam_search(once, {8}, kBos, kEos, u)[0][0].tokens;
  EXPECT_EQ(std::set<int32_t>(h.begin(), h.end()).size(), h.size());
}

namespace {

// Chi-square of counts against probabilities (categories with p = 0 must have count 0).
double chi_square(const std::vector<int64_t>& counts, const std::vector<double>& p) {
  int64_t n = 0;
  for (const int64_t c : counts) n += c;
  double x = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " was drawn outside the distribution";
      continue;
    }
    const double e = double(n) * p[i];
    x += (double(counts[i]) - e) * (double(counts[i]) - e) / e;
  }
  return x;
}

}  // namespace

// Samples follow the model's distribution after temperature, top-k and top-p (transformers' order and nucleus
// rule): 4000 sentences, each its own seed, their first tokens counted against the expected probabilities.
TEST(BeamSearch, SamplesFollowTheDistributionAfterTemperatureTopKAndTopP) {
  const std::vector<double> model = {0, 0, 0, 0, 0.4, 0.3, 0.2, 0.1, 0, 0};  // tokens 4..7
  const Table table = [&](int64_t, const std::vector<int32_t>& prefix) {
    if (!prefix.empty()) return dist({{kEos, 0.99}});
    std::vector<double> p = model;
    for (auto& v : p) v = std::max(v, 1e-12);
    return p;
  };
  struct Case {
    const char* name;
    int topk;
    double topp, temperature;
    std::vector<double> expect;
  };
  const double t2 = std::sqrt(0.4) + std::sqrt(0.3) + std::sqrt(0.2) + std::sqrt(0.1);
  const std::vector<Case> cases = {
      {"plain", 0, 1.0, 1.0, {0, 0, 0, 0, 0.4, 0.3, 0.2, 0.1, 0, 0}},
      {"top-k 2", 2, 1.0, 1.0, {0, 0, 0, 0, 0.4 / 0.7, 0.3 / 0.7, 0, 0, 0, 0}},
      // From the least likely up: 0.1 <= 1 - 0.75 goes, 0.1 + 0.2 does not: 4, 5, 6 stay.
      {"top-p 0.75", 0, 0.75, 1.0, {0, 0, 0, 0, 0.4 / 0.9, 0.3 / 0.9, 0.2 / 0.9, 0, 0, 0}},
      {"temperature 2",
       0,
       1.0,
       2.0,
       {0, 0, 0, 0, std::sqrt(0.4) / t2, std::sqrt(0.3) / t2, std::sqrt(0.2) / t2, std::sqrt(0.1) / t2, 0, 0}},
  };
  constexpr int64_t kSentences = 4000;
  for (const Case& c : cases) {
    SearchOptions o = opts(1);
    o.sampling_topk = c.topk;
    o.sampling_topp = c.topp;
    o.sampling_temperature = c.temperature;
    std::vector<SearchSentence> sentences;
    for (int64_t s = 0; s < kSentences; ++s) sentences.push_back({4, {}, uint64_t(s) * 7919 + 1});
    FakeStep fn(table, kSentences);
    const auto out = beam_search(fn, o, input_of(sentences));
    std::vector<int64_t> counts(size_t(kVocab), 0);
    for (const auto& h : out) {
      ASSERT_EQ(h.size(), 1u);
      ASSERT_FALSE(h[0].tokens.empty());
      ++counts[size_t(h[0].tokens[0])];
    }
    // 3 degrees of freedom at most: p = 0.001 at 16.27.
    const double x = chi_square(counts, c.expect);
    std::cout << "sampling " << c.name << ": chi-square " << x << " over " << kSentences << " draws\n";
    EXPECT_LT(x, 16.27) << c.name;
  }
}

// A sample depends on its sentence's seed alone: the same alone, in a batch (any position), joined mid-search,
// and each of nbest samples is its own draw.
TEST(BeamSearch, ASampleIsTheSameAloneInABatchAndJoined) {
  const Table table = [](int64_t s, const std::vector<int32_t>& prefix) {
    if (prefix.size() >= 5) return dist({{kEos, 0.5}});
    return dist({{int32_t(4 + (s + int64_t(prefix.size())) % 6), 0.3}, {kEos, 0.1}});
  };
  SearchOptions o = opts(1);
  o.sampling_topk = 0;
  o.nbest = 3;
  const auto alone = [&](int64_t s, uint64_t seed) {
    FakeStep fn([&](int64_t, const std::vector<int32_t>& p) { return table(s, p); }, 1);
    return beam_search(fn, o, input_of({{8, {}, seed}}))[0];
  };
  FakeStep fn(table, 3);
  const auto batch = beam_search(fn, o, input_of({{8, {}, 11}, {8, {}, 12}, {8, {}, 13}}));
  std::set<std::vector<int32_t>> distinct;
  for (int64_t s = 0; s < 3; ++s) {
    const auto one = alone(s, uint64_t(11 + s));
    ASSERT_EQ(batch[size_t(s)].size(), 3u);
    ASSERT_EQ(one.size(), 3u);
    for (size_t j = 0; j < 3; ++j) {
      EXPECT_EQ(batch[size_t(s)][j].tokens, one[j].tokens) << "sentence " << s << " sample " << j;
      EXPECT_EQ(batch[size_t(s)][j].log_prob, one[j].log_prob);
      distinct.insert(one[j].tokens);
    }
  }
  EXPECT_GT(distinct.size(), 3u) << "the samples are draws of their own";
  // Joined after two steps: the same samples.
  FakeStep late(table, 1);
  SearchInput in = input_of({{8, {}, 11}});
  bool joined = false;
  in.admit = [&](int64_t) {
    if (joined || late.steps < 2) return std::vector<SearchSentence>{};
    joined = true;
    late.join({2});
    return std::vector<SearchSentence>{{8, {}, 13}};
  };
  const auto with_late = beam_search(late, o, in);
  ASSERT_EQ(with_late.size(), 2u);
  const auto third = alone(2, 13);
  for (size_t j = 0; j < 3; ++j) EXPECT_EQ(with_late[1][j].tokens, third[j].tokens) << "joined sample " << j;
  // Another seed, other samples.
  const auto tokens_of = [](const std::vector<Hypothesis>& hs) {
    std::vector<std::vector<int32_t>> out;
    for (const auto& h : hs) out.push_back(h.tokens);
    return out;
  };
  EXPECT_NE(tokens_of(alone(0, 11)), tokens_of(alone(0, 99)));
}

namespace {

// A seeded random model: per sentence and history, weights over the tokens 4..9 (7, 8 and 9 made unlikely, so
// that constraints on them must be forced), EOS likelier as the hypothesis grows.
std::vector<double> random_model(int64_t s, const std::vector<int32_t>& h) {
  uint64_t seed = 0x9E3779B97F4A7C15ull * uint64_t(s + 1);
  for (const int32_t t : h) seed = (seed ^ uint64_t(t)) * 0x100000001b3ull;
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(0.05, 1.0);
  std::vector<double> p(size_t(kVocab), 1e-9);
  const double eos = std::min(0.9, 0.05 + 0.1 * double(h.size()));
  double total = 0;
  for (int32_t v = 4; v < kVocab; ++v) total += p[size_t(v)] = u(g) * (v >= 7 ? 0.1 : 1.0);
  for (int32_t v = 4; v < kVocab; ++v) p[size_t(v)] *= (1 - eos) / total;
  p[size_t(kEos)] = eos;
  return p;
}

bool holds(const std::vector<int32_t>& h, const std::vector<int32_t>& phrase) {
  return std::search(h.begin(), h.end(), phrase.begin(), phrase.end()) != h.end();
}

// Sentence s of a batch searched alone (random_model as its model) gives the hypotheses it got in the batch.
void expect_searched_as_alone(const SearchOptions& o, const SearchSentence& sentence, int64_t s,
                              const std::vector<Hypothesis>& batched) {
  const Table shifted = [s](int64_t, const std::vector<int32_t>& h) { return random_model(s, h); };
  FakeStep alone(shifted, 1);
  const auto single = beam_search(alone, o, input_of({sentence}));
  ASSERT_EQ(single[0].size(), batched.size()) << s;
  for (size_t j = 0; j < single[0].size(); ++j) {
    EXPECT_EQ(single[0][j].tokens, batched[j].tokens) << "sentence " << s << ", beam " << o.beam;
    EXPECT_EQ(single[0][j].score, batched[j].score);
  }
}

}  // namespace

// Lexically constrained beam search: every hypothesis that ends before its limit holds every phrase (multi-token
// ones whole, even as hypotheses move between rows at each reorder), a sentence searches the same alone as among
// others with and without constraints, and one without constraints is searched as before.
TEST(BeamSearch, EveryHypothesisHoldsItsConstraintsThroughReorders) {
  const std::vector<std::vector<std::vector<int32_t>>> sets = {{{8, 9}},      {{7}, {9, 8, 9}}, {},
                                                               {{9, 9}, {8}}, {{5, 8, 7}},      {}};
  constexpr int64_t kSentences = 24, kLimit = 14;
  for (const int beam : {1, 4}) {
    SearchOptions o = opts(beam, 0.6, beam);
    std::vector<SearchSentence> sentences;
    for (int64_t s = 0; s < kSentences; ++s) sentences.push_back({kLimit, {}, 0, sets[size_t(s) % sets.size()]});
    FakeStep fn(random_model, kSentences);
    const auto out = beam_search(fn, o, input_of(sentences));
    int64_t met = 0, plain_changed = 0;
    for (int64_t s = 0; s < kSentences; ++s) {
      ASSERT_FALSE(out[size_t(s)].empty()) << s;
      for (const auto& h : out[size_t(s)]) {
        if (int64_t(h.tokens.size()) + 1 >= kLimit) continue;  // forced to end at the limit
        for (const auto& phrase : sentences[size_t(s)].constraints) {
          EXPECT_TRUE(holds(h.tokens, phrase)) << "sentence " << s << ", beam " << beam;
        }
        ++met;
      }
      expect_searched_as_alone(o, sentences[size_t(s)], s, out[size_t(s)]);  // alone: the same hypotheses
      const Table shifted = [s](int64_t, const std::vector<int32_t>& h) { return random_model(s, h); };
      if (sentences[size_t(s)].constraints.empty()) {
        FakeStep unconstrained(shifted, 1);
        const auto before = beam_search(unconstrained, o, input_of({{kLimit, {}, 0}}));
        plain_changed += before[0][0].tokens != out[size_t(s)][0].tokens;
      }
    }
    EXPECT_GT(met, kSentences / 2) << "most hypotheses end before the limit";
    EXPECT_EQ(plain_changed, 0);
  }
  // The constraint's tokens are the model's: the log-probability sums them like any other.
  FakeStep fn(garden_path, 1);
  const auto out = beam_search(fn, opts(2), input_of({{10, {}, 0, {{6}}}}));
  ASSERT_FALSE(out[0].empty());
  EXPECT_EQ(out[0][0].tokens, (std::vector<int32_t>{4, 6}));
  EXPECT_NEAR(out[0][0].log_prob, std::log(0.5) + std::log(0.3) + std::log(0.95), 1e-4);
  // Not with sampling.
  SearchOptions sampled = opts(1);
  sampled.sampling_topk = 0;
  FakeStep fs(garden_path, 1);
  EXPECT_THROW(beam_search(fs, sampled, input_of({{10, {}, 0, {{6}}}})), mtx::ConfigError);
}

// A phrase stays whole words: right after it ends, no piece that continues its word (SearchInput::continues_word)
// is chosen, however likely -- here 7 after 6, the model's favourite.
TEST(BeamSearch, AConstraintIsNotGluedToTheWordAfterIt) {
  const Table glue = [](int64_t, const std::vector<int32_t>& h) {
    if (!h.empty() && h.back() == 6) return dist({{7, 0.9}, {kEos, 0.05}});
    if (!h.empty() && h.back() == 7) return dist({{kEos, 0.9}});
    return h.size() < 2 ? dist({{4, 0.6}, {6, 0.1}}) : dist({{kEos, 0.6}});
  };
  for (const int beam : {1, 3}) {
    SearchInput in = input_of({{10, {}, 0, {{6}}}});
    FakeStep loose(glue, 1);
    const auto glued = beam_search(loose, opts(beam), in)[0][0].tokens;
    EXPECT_TRUE(holds(glued, {6, 7})) << "without the rule the model glues 7 on, beam " << beam;
    in.continues_word.assign(size_t(kVocab), 0);
    in.continues_word[7] = 1;
    FakeStep fn(glue, 1);
    const auto h = beam_search(fn, opts(beam), in)[0][0].tokens;
    EXPECT_TRUE(holds(h, {6})) << "beam " << beam;
    EXPECT_FALSE(holds(h, {6, 7})) << "beam " << beam;
  }
}

// Negative constraints (SearchSentence::suppress): a suppressed sequence never appears in any hypothesis -- of beam
// search, greedy search or sampling -- and a sentence searches the same alone as in a batch with others, with and
// without sequences of their own. The model would write them: without the suppression most outputs hold one.
TEST(BeamSearch, ASuppressedSequenceIsNeverGeneratedAloneOrInAnyBatch) {
  const std::vector<std::vector<std::vector<int32_t>>> sets = {{{5}}, {{4, 6}, {6, 6}}, {}, {{4, 4}, {5, 6, 4}}};
  constexpr int64_t kSentences = 16, kLimit = 12;
  SearchOptions sampled = opts(1, 0.6, 3);
  sampled.sampling_topk = 0;
  for (const SearchOptions& o : {opts(1), opts(4, 0.6, 4), sampled}) {
    std::vector<SearchSentence> sentences, plain;
    for (int64_t s = 0; s < kSentences; ++s) {
      sentences.push_back({kLimit, {}, uint64_t(s), {}, sets[size_t(s) % sets.size()]});
      plain.push_back({kLimit, {}, uint64_t(s), {}});
    }
    FakeStep fn(random_model, kSentences), fp(random_model, kSentences);
    const auto out = beam_search(fn, o, input_of(sentences));
    const auto before = beam_search(fp, o, input_of(plain));
    int64_t would = 0;
    for (int64_t s = 0; s < kSentences; ++s) {
      const auto& suppressed = sentences[size_t(s)].suppress;
      ASSERT_FALSE(out[size_t(s)].empty()) << s;
      for (const auto& h : out[size_t(s)]) {
        for (const auto& q : suppressed) EXPECT_FALSE(holds(h.tokens, q)) << "sentence " << s << ", beam " << o.beam;
      }
      for (const auto& h : before[size_t(s)]) {
        would += std::any_of(suppressed.begin(), suppressed.end(), [&](const auto& q) { return holds(h.tokens, q); });
      }
      expect_searched_as_alone(o, sentences[size_t(s)], s, out[size_t(s)]);
      if (suppressed.empty()) {
        for (size_t j = 0; j < before[size_t(s)].size(); ++j) {
          EXPECT_EQ(before[size_t(s)][j].tokens, out[size_t(s)][j].tokens) << "no sequences: searched as before";
        }
      }
    }
    EXPECT_GE(would, kSentences / 8) << "the model writes the sequences when they are not suppressed, beam " << o.beam;
  }
}

namespace {

// A fake model whose attention over 3 source positions at its t-th step is weights(t): by default all on position
// t (the last from the third step on), the word it translates. With several sentences, sentence s's rows score
// table(s, history) and attend by weights(s, t); a sentence searched again (SearchInput::rejoin, join) gets a
// fresh row in the next reorder.
class AttendingStep final : public StepFunction {
 public:
  using Weights = std::function<std::vector<float>(size_t)>;
  using SentenceWeights = std::function<std::vector<float>(int64_t, size_t)>;
  explicit AttendingStep(Table table, Weights weights = {}) : table_(std::move(table)), rows_(1) {
    if (weights) weights_ = [weights](int64_t, size_t t) { return weights(t); };
  }
  AttendingStep(Table table, SentenceWeights weights, int64_t sentences)
      : table_(std::move(table)), weights_(std::move(weights)) {
    for (int64_t s = 0; s < sentences; ++s) rows_.push_back({s, {}});
  }
  torch::Tensor step(const torch::Tensor& tokens) override {
    torch::Tensor out = torch::empty({int64_t(rows_.size()), kVocab});
    attention_ = torch::zeros({int64_t(rows_.size()), 3});
    for (size_t r = 0; r < rows_.size(); ++r) {
      auto& [sentence, history] = rows_[r];
      const auto tok = int32_t(tokens[int64_t(r)].item<int64_t>());
      if (tok != kBos || !history.empty()) history.push_back(tok);
      const std::vector<double> p = table_(sentence, history);
      for (int64_t v = 0; v < kVocab; ++v) out[int64_t(r)][v] = float(std::log(p[size_t(v)]));
      const size_t t = history.size();
      std::vector<float> w = {0, 0, 0};
      if (weights_) {
        w = weights_(sentence, t);
      } else {
        w[std::min<size_t>(t, 2)] = 1;
      }
      for (int64_t p = 0; p < 3; ++p) attention_[int64_t(r)][p] = w[size_t(p)];
    }
    return out;
  }
  void reorder(const torch::Tensor& indices, bool) override {
    std::vector<std::pair<int64_t, std::vector<int32_t>>> next;
    for (int64_t i = 0; i < indices.size(0); ++i) {
      const auto row = size_t(indices[i].item<int64_t>());
      next.push_back(row < rows_.size() ? rows_[row]
                                        : std::make_pair(joining_.at(row - rows_.size()), std::vector<int32_t>{}));
    }
    rows_ = std::move(next);
    joining_.clear();
  }
  torch::Tensor attention() override { return attention_; }
  // Sentence s joins again (SearchInput::rejoin).
  void join(int64_t s) {
    joining_.push_back(s);
    joined.push_back(s);
  }
  std::vector<int64_t> joined;  // every join, in order

 private:
  Table table_;
  SentenceWeights weights_;
  std::vector<std::pair<int64_t, std::vector<int32_t>>> rows_;
  std::vector<int64_t> joining_;
  torch::Tensor attention_;
};

}  // namespace

// A term tied to its source word takes the place of the model's own word for it ("Ein Hund rennt" with Hund ->
// puppy: "A puppy runs", not "A dog puppy runs"): untied, the search keeps the model's word and adds the term.
// Here 4 is "A", 5 "dog", 8 "puppy", 6 "runs"; the model translates source word t at its step t.
TEST(BeamSearch, ATiedTermTakesThePlaceOfTheModelsOwnWord) {
  const Table model = [](int64_t, const std::vector<int32_t>& h) {
    if (h.empty()) return dist({{4, 0.9}});
    if (h.size() == 1) return dist({{5, 0.8}, {8, 0.01}});
    if (h.back() == 5 || h.back() == 8) return dist({{6, 0.5}, {8, 0.2}, {5, 0.2}});
    if (h.back() == 6 && h.size() == 3) return dist({{kEos, 0.5}, {8, 0.3}, {5, 0.1}});
    return dist({{kEos, 0.9}});
  };
  for (const int beam : {1, 4}) {
    SearchInput untied = input_of({{10, {}, 0, {{8}}}});
    AttendingStep plain(model);
    const auto dup = beam_search(plain, opts(beam), untied)[0][0].tokens;
    EXPECT_TRUE(holds(dup, {5}) && holds(dup, {8})) << "untied: the model's word and the term, beam " << beam;
    SearchInput tied = input_of({{10, {}, 0, {{8}}, {}, {{1, 2}}}});
    AttendingStep fn(model);
    const auto out = beam_search(fn, opts(beam), tied)[0][0].tokens;
    EXPECT_EQ(out, (std::vector<int32_t>{4, 8, 6})) << "beam " << beam;
  }
}

// A model that attends to the noun from its first step ("Ein Junge schaukelt" with Junge -> lad: the first step
// attends to Junge as it writes "A"). The term keeps the word before it, "A lad swings", not "lad boy swings";
// where the term does start the sentence (beam 1), the model's word that would follow it for the same source word
// is displaced too. 4 is "A", 5 "boy", 8 "lad", 6 "swings".
TEST(BeamSearch, ATiedTermKeepsTheWordBeforeItAndDisplacesTheOneAfter) {
  const Table model = [](int64_t, const std::vector<int32_t>& h) {
    if (h.empty()) return dist({{4, 0.9}, {8, 0.001}});
    if (h == std::vector<int32_t>{8}) return dist({{5, 0.7}, {6, 0.2}});
    if (h.size() == 1) return dist({{5, 0.8}, {8, 0.01}});
    if (h.back() == 5 || h.back() == 8) return dist({{6, 0.8}});
    return dist({{kEos, 0.9}});
  };
  const AttendingStep::Weights noun_first = [](size_t t) {
    return t < 2 ? std::vector<float>{0, 1, 0} : std::vector<float>{0, 0, 1};
  };
  for (const int beam : {1, 4}) {
    SearchInput tied = input_of({{10, {}, 0, {{8}}, {}, {{1, 2}}}});
    AttendingStep fn(model, noun_first);
    const auto out = beam_search(fn, opts(beam), tied)[0][0].tokens;
    EXPECT_TRUE(holds(out, {8}) && !holds(out, {5})) << "the term alone, beam " << beam;
    if (beam > 1) EXPECT_EQ(out, (std::vector<int32_t>{4, 8, 6}));
  }
}

// Where the attention is spread, the word written is not the focus's translation: a word before the term
// ("A small puppy runs", the model attending loosely to Hund as it writes "small") stays, and the term takes the
// place of "dog" where the attention is firm. 4 is "A", 7 "small", 5 "dog", 8 "puppy", 6 "runs".
TEST(BeamSearch, ATiedTermTakesThePlaceOnlyOfAWordItsSpanHoldsTheAttentionFor) {
  const Table model = [](int64_t, const std::vector<int32_t>& h) {
    if (h.empty()) return dist({{4, 0.9}});
    if (h.size() == 1) return dist({{7, 0.8}, {8, 0.001}});
    if (h.size() == 2 && h.back() == 7) return dist({{5, 0.8}, {8, 0.01}});
    if (h.back() == 5 || h.back() == 8) return dist({{6, 0.8}});
    return dist({{kEos, 0.9}});
  };
  const AttendingStep::Weights loose_then_firm = [](size_t t) {
    if (t == 0) return std::vector<float>{1, 0, 0};
    if (t == 1) return std::vector<float>{0.325f, 0.35f, 0.325f};
    return t == 2 ? std::vector<float>{0, 1, 0} : std::vector<float>{0, 0, 1};
  };
  for (const int beam : {1, 4}) {
    SearchInput tied = input_of({{10, {}, 0, {{8}}, {}, {{1, 2}}}});
    AttendingStep fn(model, loose_then_firm);
    const auto out = beam_search(fn, opts(beam), tied)[0][0].tokens;
    EXPECT_TRUE(holds(out, {8}) && !holds(out, {5})) << "the term alone, beam " << beam;
    if (beam > 1) EXPECT_EQ(out, (std::vector<int32_t>{4, 7, 8, 6}));
  }
}

namespace {

// "Ein Hund rennt": the model writes "A dog runs", and after "puppy", a word it would not write there, "small".
// 4 is "A", 5 "dog", 8 "puppy", 6 "runs", 7 "small".
std::vector<double> fed_own_word(int64_t, const std::vector<int32_t>& h) {
  if (h.empty()) return dist({{4, 0.9}});
  if (h.size() == 1) return dist({{5, 0.8}, {8, 0.01}});
  if (h.back() == 5) return dist({{6, 0.8}, {7, 0.05}});
  if (h.back() == 8) return dist({{7, 0.8}, {6, 0.1}});
  if (h.back() == 7) return dist({{6, 0.8}});
  return dist({{kEos, 0.9}});
}

}  // namespace

// Where a tied term takes the place of the model's word, the model is fed its own word and the term is shown: the
// sentence goes on as the model would go on after its word, not as it would after a word it would never have
// written there ("A puppy runs", not "A puppy small runs"), and the hypothesis scores what the model wrote.
// 4 is "A", 5 "dog", 8 "puppy", 6 "runs", 7 "small".
TEST(BeamSearch, ATiedTermIsShownWhereTheModelIsFedItsOwnWord) {
  const Table model = fed_own_word;
  for (const int beam : {1, 4}) {
    SearchInput tied = input_of({{10, {}, 0, {{8}}, {}, {{1, 2}}}});
    AttendingStep fn(model);
    const Hypothesis h = beam_search(fn, opts(beam), tied)[0][0];
    EXPECT_EQ(h.tokens, (std::vector<int32_t>{4, 8, 6})) << "beam " << beam;
    const auto p = [&](const std::vector<int32_t>& prefix, int32_t t) { return std::log(model(0, prefix)[size_t(t)]); };
    EXPECT_NEAR(h.log_prob, p({}, 4) + p({4}, 5) + p({4, 5}, 6) + p({4, 5, 6}, kEos), 1e-5)
        << "the model's own words, beam " << beam;
  }
}

// A step function whose tied terms read other attention than the one it returns (StepFunction::tie_attention,
// as the model gives every decoder layer's): the attention returned stays on the first source position.
class TieAttentionStep final : public StepFunction {
 public:
  explicit TieAttentionStep(Table table) : inner_(std::move(table)) {}
  torch::Tensor step(const torch::Tensor& tokens) override { return inner_.step(tokens); }
  void reorder(const torch::Tensor& indices, bool same) override { inner_.reorder(indices, same); }
  torch::Tensor attention() override {
    torch::Tensor a = torch::zeros_like(inner_.attention());
    a.select(1, 0).fill_(1);
    return a;
  }
  torch::Tensor tie_attention() override { return inner_.attention(); }

 private:
  AttendingStep inner_;
};

// Tied terms read StepFunction::tie_attention, and hypotheses return StepFunction::attention: "A puppy runs" where
// the tie attention holds "Hund" as the model writes "dog", though the returned attention never does.
TEST(BeamSearch, ATiedTermReadsTheTieAttentionAndHypothesesReturnTheirOwn) {
  for (const int beam : {1, 4}) {
    TieAttentionStep fn(fed_own_word);
    SearchOptions o = opts(beam);
    o.return_attention = true;
    const Hypothesis h = beam_search(fn, o, input_of({{10, {}, 0, {{8}}, {}, {{1, 2}}}}))[0][0];
    EXPECT_EQ(h.tokens, (std::vector<int32_t>{4, 8, 6})) << "beam " << beam;
    ASSERT_EQ(h.attention.size(), h.tokens.size()) << "beam " << beam;
    for (const auto& a : h.attention) EXPECT_EQ(a, (std::vector<float>{1, 0, 0})) << "beam " << beam;
  }
}

// The pieces that continue the model's word after a term took its place are fed and not shown, and the attention
// returned has one entry per shown token: "Hunde" with Hund|Hunde -> puppy|puppies gives "puppies", not
// "puppiess" for the model's "dog" "s". 4 is "A", 5 "dog", 9 "s" (it continues a word), 8 7 "pupp" "ies", 6 "run".
TEST(BeamSearch, TheModelsPiecesAfterATiedTermAreFedAndNotShown) {
  const Table model = [](int64_t, const std::vector<int32_t>& h) {
    if (h.empty()) return dist({{4, 0.9}});
    if (h.size() == 1) return dist({{5, 0.8}, {8, 0.01}});
    if (h.back() == 5) return dist({{9, 0.7}, {6, 0.2}});
    if (h.back() == 9 || h.back() == 7) return dist({{6, 0.8}});
    return dist({{kEos, 0.9}});
  };
  for (const int beam : {1, 4}) {
    SearchInput tied = input_of({{10, {}, 0, {{8, 7}}, {}, {{1, 2}}}});
    tied.continues_word.assign(size_t(kVocab), 0);
    tied.continues_word[9] = tied.continues_word[7] = 1;
    AttendingStep fn(model);
    SearchOptions o = opts(beam);
    o.return_attention = true;
    const Hypothesis h = beam_search(fn, o, tied)[0][0];
    EXPECT_EQ(h.tokens, (std::vector<int32_t>{4, 8, 7, 6})) << "beam " << beam;
    EXPECT_EQ(h.attention.size(), h.tokens.size()) << "beam " << beam;
  }
}

// A term for the line's first word takes the place of the model's first word, though the first step's attention
// does not tell which word that is: "Hunde rennen" gives "Puppies run", not "Puppies dogs run" or "Dogs run ...
// puppies". 5 is "Dogs", 8 "Puppies", 6 "run".
TEST(BeamSearch, ATiedTermForTheFirstWordTakesThePlaceOfTheModelsFirstWord) {
  const Table model = [](int64_t, const std::vector<int32_t>& h) {
    if (h.empty()) return dist({{5, 0.8}, {8, 0.01}});
    if (h == std::vector<int32_t>{8}) return dist({{5, 0.6}, {6, 0.3}});
    if (h.back() == 5) return dist({{6, 0.7}, {5, 0.2}});
    if (h.back() == 6) return dist({{kEos, 0.6}, {8, 0.1}});
    return dist({{kEos, 0.9}});
  };
  for (const int beam : {1, 4}) {
    SearchInput tied = input_of({{10, {}, 0, {{8}}, {}, {{0, 1}}}});
    AttendingStep fn(model);
    EXPECT_EQ(beam_search(fn, opts(beam), tied)[0][0].tokens, (std::vector<int32_t>{8, 6})) << "beam " << beam;
  }
}

// The source's </s> (and padding) holds no word: much of the attention rests there, and the focus and its share
// are taken over the source's words (SearchSentence::source_words). "Ein Hund" + </s>: as the model writes "dog"
// it gives </s> 60% and Hund 35%, which is most of the words' attention, so the term takes the place of "dog".
// 4 is "A", 5 "dog", 8 "puppy", 6 "runs", 7 "small".
TEST(BeamSearch, ATiedTermReadsTheAttentionOverTheSourcesWordsOnly) {
  const Table model = fed_own_word;
  const AttendingStep::Weights to_eos = [](size_t t) {
    if (t == 0) return std::vector<float>{0.7f, 0.1f, 0.2f};
    return t == 1 ? std::vector<float>{0.05f, 0.35f, 0.6f} : std::vector<float>{0.1f, 0.1f, 0.8f};
  };
  for (const int beam : {1, 4}) {
    SearchSentence sentence{10, {}, 0, {{8}}, {}, {{1, 2}}};
    sentence.source_words = 2;
    AttendingStep fn(model, to_eos);
    EXPECT_EQ(beam_search(fn, opts(beam), input_of({sentence}))[0][0].tokens, (std::vector<int32_t>{4, 8, 6}))
        << "beam " << beam;
  }
}

// A punctuation mark the model writes after its word for a term's source words, while it still attends to them,
// is no word of theirs: it is shown after the term and never banned ("Eine Familie mit ihrem Hund." -> "... with
// her puppy.", not "... with her puppy"), searched as the model writes it or forced. 4 is "A", 5 "dog", 8 "puppy",
// 9 "." (neither starts nor continues a word); the model attends to "Hund" (position 1) as it writes "dog" and ".".
TEST(BeamSearch, APunctuationMarkAfterATiedTermIsShownAndNeverBanned) {
  const Table model = [](int64_t, const std::vector<int32_t>& h) {
    if (h.empty()) return dist({{4, 0.9}});
    if (h.size() == 1) return dist({{5, 0.8}, {8, 0.01}});
    if (h.back() == 5 || h.back() == 8) return dist({{9, 0.8}, {kEos, 0.1}});
    return dist({{kEos, 0.9}});
  };
  const AttendingStep::SentenceWeights on_hund = [](int64_t, size_t t) {
    std::vector<float> w = {0, 0, 0};
    w[t == 0 ? 0 : t <= 2 ? 1 : 2] = 1;
    return w;
  };
  for (const bool rejoin : {false, true}) {
    for (const int beam : {1, 4}) {
      AttendingStep fn(model, on_hund, 1);
      SearchInput in = input_of({{10, {}, 0, {{8}}, {}, {{1, 2}}}});
      in.starts_word.assign(size_t(kVocab), 0);
      for (const int32_t t : {4, 5, 6, 7, 8}) in.starts_word[size_t(t)] = 1;
      if (rejoin) in.rejoin = [&](int64_t s) { fn.join(s); };
      EXPECT_EQ(beam_search(fn, opts(beam), in)[0][0].tokens, (std::vector<int32_t>{4, 8, 9}))
          << "beam " << beam << (rejoin ? ", as the model writes it" : ", forced");
    }
  }
}

// Given SearchInput::rejoin, a sentence whose terms are all tied is searched first as the model writes it: each
// term is shown where the model writes its own word for the term's span, nothing is forced, and the search is the
// model's own. Only a sentence where no hypothesis then holds its term is searched again (joins again), with the
// term forced, as it would be without rejoin. Sentence 0 attends to "Hund" as it writes "dog": "A puppy runs" at
// once. Sentence 1 never attends to its span: searched again, forced. Each the same alone as in the batch.
// 4 is "A", 5 "dog", 8 "puppy", 6 "runs", 7 "small".
// Where the model writes a second word while it still attends to the term's source words, the word the term took
// the place of came before the model's word for them: it is shown before the term, and that second word is fed and
// not shown ("ein kleines Kind" -> "a little youngster", not "a youngster"). 4 is "A", 7 "little", 5 "child",
// 8 "youngster", 6 "plays"; the model attends to "Kind" (position 1) as it writes "little" and "child".
TEST(BeamSearch, TheWordBeforeTheModelsWordForATiedTermIsShownBeforeTheTerm) {
  const Table model = [](int64_t, const std::vector<int32_t>& h) {
    if (h.empty()) return dist({{4, 0.9}});
    if (h.size() == 1) return dist({{7, 0.8}, {8, 0.01}});
    if (h.back() == 7) return dist({{5, 0.8}});
    if (h.back() == 5) return dist({{6, 0.8}});
    return dist({{kEos, 0.9}});
  };
  const AttendingStep::Weights on_kind = [](size_t t) {
    std::vector<float> w = {0, 0, 0};
    w[t == 0 ? 0 : t <= 2 ? 1 : 2] = 1;
    return w;
  };
  for (const bool known : {false, true}) {  // "child", the model's word for Kind alone, known or not
    for (const int beam : {1, 4}) {
      SearchInput tied = input_of({{10, {}, 0, {{8}}, {}, {{1, 2}}}});
      if (known) tied.sentences[0].span_words = {{5}};
      tied.starts_word.assign(size_t(kVocab), 0);
      for (const int32_t t : {4, 5, 6, 7, 8}) tied.starts_word[size_t(t)] = 1;
      AttendingStep fn(model, on_kind);
      SearchOptions o = opts(beam);
      o.return_attention = true;
      const Hypothesis h = beam_search(fn, o, tied)[0][0];
      EXPECT_EQ(h.tokens, (std::vector<int32_t>{4, 7, 8, 6})) << "beam " << beam << ", known " << known;
      EXPECT_EQ(h.attention.size(), h.tokens.size()) << "beam " << beam;
    }
  }
}

// Where the model's own word for a term's span alone is known (SearchSentence::span_words), a word the model
// writes after it while it still attends to the span is shown when it is not that word, and the word the term took
// the place of is not shown again: "Ein Mann mit einem Hut schaut" with Hut -> cap gives "A cap is looking", not
// "A hat cap looking". 4 is "A", 5 "hat", 8 "cap", 6 "is", 7 "looking"; the model attends to "Hut" (position 1) as
// it writes "hat" and "is".
TEST(BeamSearch, AWordThatIsNotTheModelsWordForTheSpanIsShownAfterATiedTerm) {
  const Table model = [](int64_t, const std::vector<int32_t>& h) {
    if (h.empty()) return dist({{4, 0.9}});
    if (h.size() == 1) return dist({{5, 0.8}, {8, 0.01}});
    if (h.back() == 5) return dist({{6, 0.8}});
    if (h.back() == 6) return dist({{7, 0.8}});
    return dist({{kEos, 0.9}});
  };
  const AttendingStep::Weights on_hut = [](size_t t) {
    std::vector<float> w = {0, 0, 0};
    w[t == 0 ? 0 : t <= 2 ? 1 : 2] = 1;
    return w;
  };
  for (const int beam : {1, 4}) {
    SearchInput tied = input_of({{10, {}, 0, {{8}}, {}, {{1, 2}}}});
    tied.sentences[0].span_words = {{5}};
    tied.starts_word.assign(size_t(kVocab), 0);
    for (const int32_t t : {4, 5, 6, 7, 8}) tied.starts_word[size_t(t)] = 1;
    AttendingStep fn(model, on_hut);
    SearchOptions o = opts(beam);
    o.return_attention = true;
    const Hypothesis h = beam_search(fn, o, tied)[0][0];
    EXPECT_EQ(h.tokens, (std::vector<int32_t>{4, 8, 6, 7})) << "beam " << beam;
    EXPECT_EQ(h.attention.size(), h.tokens.size()) << "beam " << beam;
  }
}

// Right after a tied term the model wrote itself, while it still attends to the term's source words, only the
// model's own word for them (SearchSentence::span_words, where known) is banned: another word it writes there is
// its next word. A glossary of the model's own words ("Hut" -> hat) leaves "A hat is looking" as it is, not "A hat
// looking". 4 is "A", 5 "hat", 6 "is", 7 "looking"; the model attends to "Hut" (position 1) as it writes "hat" and
// "is".
TEST(BeamSearch, OnlyTheModelsWordForTheSpanIsBannedAfterATermItWroteItself) {
  const Table model = [](int64_t, const std::vector<int32_t>& h) {
    if (h.empty()) return dist({{4, 0.9}});
    if (h.size() == 1) return dist({{5, 0.8}});
    if (h.back() == 5) return dist({{6, 0.7}, {7, 0.2}});
    if (h.back() == 6) return dist({{7, 0.8}});
    return dist({{kEos, 0.9}});
  };
  const AttendingStep::Weights on_hut = [](size_t t) {
    std::vector<float> w = {0, 0, 0};
    w[t == 0 ? 0 : t <= 2 ? 1 : 2] = 1;
    return w;
  };
  for (const int beam : {1, 4}) {
    SearchInput tied = input_of({{10, {}, 0, {{5}}, {}, {{1, 2}}}});
    tied.sentences[0].span_words = {{5}};
    tied.starts_word.assign(size_t(kVocab), 0);
    for (const int32_t t : {4, 5, 6, 7}) tied.starts_word[size_t(t)] = 1;
    AttendingStep fn(model, on_hut);
    EXPECT_EQ(beam_search(fn, opts(beam), tied)[0][0].tokens, (std::vector<int32_t>{4, 5, 6, 7})) << "beam " << beam;
  }
}

// The model's own word for a term's span alone (SearchSentence::span_words) is where the term goes where the span
// holds only part of the attention as the model writes it (10% or more): the first search holds the term, none
// again. "Ein Hund rennt": the model writes "dog" attending 20% to Hund and 80% to "Ein". 4 is "A", 5 "dog",
// 8 "puppy", 6 "runs".
TEST(BeamSearch, ATiedTermTakesThePlaceOfTheModelsWordForItsSpanAlone) {
  const Table model = [](int64_t, const std::vector<int32_t>& h) {
    if (h.empty()) return dist({{4, 0.9}});
    if (h.size() == 1) return dist({{5, 0.8}, {8, 0.0001}});
    if (h.back() == 5 || h.back() == 8) return dist({{6, 0.8}});
    return dist({{kEos, 0.8}, {8, 0.1}});
  };
  const AttendingStep::SentenceWeights loose = [](int64_t, size_t t) {
    if (t == 0) return std::vector<float>{1, 0, 0};
    return t == 1 ? std::vector<float>{0.8f, 0.2f, 0} : std::vector<float>{0, 0, 1};
  };
  for (const int beam : {1, 4}) {
    AttendingStep fn(model, loose, 1);
    SearchInput in = input_of({{10, {}, 0, {{8}}, {}, {{1, 2}}}});
    in.sentences[0].span_words = {{5}};
    in.starts_word.assign(size_t(kVocab), 0);
    for (const int32_t t : {4, 5, 6, 8}) in.starts_word[size_t(t)] = 1;
    in.rejoin = [&](int64_t s) { fn.join(s); };
    EXPECT_EQ(beam_search(fn, opts(beam), in)[0][0].tokens, (std::vector<int32_t>{4, 8, 6})) << "beam " << beam;
    EXPECT_TRUE(fn.joined.empty()) << "searched once, beam " << beam;
  }
}

// Searched as the model writes it, where the model's own word for a term's span is known, a word the model writes
// while its attention rests on the span is not taken for that word: the term waits for the model's own word.
// "Drei braune Hunde springen an der Frau hoch" with Frau -> lady: "Three brown dogs jump lady" for the model's
// "Three brown dogs jump woman", where the model attends to Frau as it writes "brown" -- not "Three lady dogs jump
// woman". 4 is "Three", 7 "brown", 6 "dogs", 9 "jump", 5 "woman", 8 "lady"; position 1 is Frau.
TEST(BeamSearch, AsTheModelWritesItATiedTermWaitsForTheModelsOwnWordForItsSpan) {
  const Table model = [](int64_t, const std::vector<int32_t>& h) {
    if (h.empty()) return dist({{4, 1}});
    if (h.size() == 1) return dist({{7, 0.999}, {8, 0.001}});
    if (h.back() == 7 || h.back() == 8) return dist({{6, 1}});
    if (h.back() == 6) return dist({{9, 1}});
    if (h.back() == 9) return dist({{5, 0.999}, {8, 0.001}});
    return dist({{kEos, 1}});
  };
  const AttendingStep::SentenceWeights on_frau = [](int64_t, size_t t) {
    return t == 1 || t == 4 ? std::vector<float>{0, 1, 0} : std::vector<float>{1, 0, 0};
  };
  for (const int beam : {1, 4}) {
    AttendingStep fn(model, on_frau, 1);
    SearchInput in = input_of({{10, {}, 0, {{8}}, {}, {{1, 2}}}});
    in.sentences[0].span_words = {{5}};
    in.starts_word.assign(size_t(kVocab), 0);
    for (const int32_t t : {4, 5, 6, 7, 8, 9}) in.starts_word[size_t(t)] = 1;
    in.rejoin = [&](int64_t s) { fn.join(s); };
    EXPECT_EQ(beam_search(fn, opts(beam), in)[0][0].tokens, (std::vector<int32_t>{4, 7, 6, 9, 8})) << "beam " << beam;
    EXPECT_TRUE(fn.joined.empty()) << "searched once, beam " << beam;
  }
}

// A tied term's other forms (SearchSentence::forms: a glossary entry's other target forms, with the model's own
// words for their source forms): searched as the model writes it, the form whose own word the model writes takes
// its place. "Ein Mann hält einen Jungen" with Junge|Jungen -> lad|lads: Jungen matched, so "lads", but the model
// writes "boy", its word for Junge: "lad" ("a lad", not "a lads"); where it writes "boys", "lads". Without the forms:
// "lads" either way. 4 is "A", 5 "boy", 6 "boys", 7 8 "la" "d", 9 "s" (it continues a word); Jungen is position 1.
TEST(BeamSearch, AsTheModelWritesItATiedTermsFormGoesWhereTheModelWritesThatFormsWord) {
  for (const int32_t word : {5, 6}) {
    const Table model = [word](int64_t, const std::vector<int32_t>& h) {
      if (h.empty()) return dist({{4, 1}});
      if (h.size() == 1) return dist({{word, 0.999}, {7, 0.001}});
      return dist({{kEos, 1}});
    };
    const AttendingStep::SentenceWeights on_jungen = [](int64_t, size_t t) {
      return t == 1 ? std::vector<float>{0, 1, 0} : std::vector<float>{1, 0, 0};
    };
    for (const bool forms : {false, true}) {
      for (const int beam : {1, 4}) {
        AttendingStep fn(model, on_jungen, 1);
        SearchInput in = input_of({{10, {}, 0, {{7, 8, 9}}, {}, {{1, 2}}}});
        in.sentences[0].span_words = {{6}};
        if (forms) in.sentences[0].forms = {{{{7, 8}, {5}}}};
        in.starts_word.assign(size_t(kVocab), 0);
        for (const int32_t t : {4, 5, 6, 7}) in.starts_word[size_t(t)] = 1;
        in.continues_word.assign(size_t(kVocab), 0);
        in.continues_word[8] = in.continues_word[9] = 1;
        in.rejoin = [&](int64_t s) { fn.join(s); };
        const std::vector<int32_t> want =
            forms && word == 5 ? std::vector<int32_t>{4, 7, 8} : std::vector<int32_t>{4, 7, 8, 9};
        EXPECT_EQ(beam_search(fn, opts(beam), in)[0][0].tokens, want)
            << "beam " << beam << ", forms " << forms << ", word " << word;
        // Where the model writes no word of the term's or its forms', it is searched again (forced): "lads".
        EXPECT_EQ(fn.joined.empty(), forms || word == 6) << "beam " << beam << ", forms " << forms << ", word " << word;
      }
    }
  }
}

TEST(BeamSearch, ATiedTermIsSearchedAsTheModelWritesItThenForcedWhereNoHypothesisHoldsIt) {
  const Table model = fed_own_word;
  const AttendingStep::SentenceWeights weights = [](int64_t s, size_t t) {
    std::vector<float> w = {0, 0, 0};
    w[s == 1 ? 0 : std::min<size_t>(t, 2)] = 1;
    return w;
  };
  const SearchSentence tied{10, {}, 0, {{8}}, {}, {{1, 2}}};
  for (const int beam : {1, 4}) {
    AttendingStep forced(model, weights, 2);  // no rejoin: forced from the start
    const auto expected = beam_search(forced, opts(beam), input_of({tied, tied}));
    AttendingStep fn(model, weights, 2);
    SearchInput in = input_of({tied, tied});
    in.rejoin = [&](int64_t s) { fn.join(s); };
    const auto out = beam_search(fn, opts(beam), in);
    EXPECT_EQ(fn.joined, std::vector<int64_t>{1}) << "only the sentence without its term is searched again";
    EXPECT_EQ(out[0][0].tokens, (std::vector<int32_t>{4, 8, 6})) << "beam " << beam;
    const auto p = [&](const std::vector<int32_t>& prefix, int32_t t) { return std::log(model(0, prefix)[size_t(t)]); };
    EXPECT_NEAR(out[0][0].log_prob, p({}, 4) + p({4}, 5) + p({4, 5}, 6) + p({4, 5, 6}, kEos), 1e-5)
        << "the model's own search, beam " << beam;
    ASSERT_EQ(out[1].size(), expected[1].size());
    EXPECT_EQ(out[1][0].tokens, expected[1][0].tokens) << "searched again as forced, beam " << beam;
    EXPECT_NE(std::find(out[1][0].tokens.begin(), out[1][0].tokens.end(), 8), out[1][0].tokens.end());
    for (int64_t s = 0; s < 2; ++s) {
      AttendingStep alone(
          model, [&](int64_t, size_t t) { return weights(s, t); }, 1);
      SearchInput one = input_of({tied});
      one.rejoin = [&](int64_t) { alone.join(0); };
      EXPECT_EQ(beam_search(alone, opts(beam), one)[0][0].tokens, out[size_t(s)][0].tokens)
          << "sentence " << s << " alone, beam " << beam;
    }
  }
}

// A span that never holds the focus but holds at least 30% of the attention is where its term may start: "A puppy
// runs", not "A dog runs" with the term forced in near the length limit. 4 is "A", 5 "dog", 8 "puppy", 6 "runs".
// Where the model's word for a term's source words never held the focus, the first search ends without the term;
// the word the span held the most attention for is the model's own word for it, and the search again puts the term
// in that word's place ("Ein am Strand geparktes Auto" -> "A automobile parked", not "A car parked automobile").
// 4 is "A", 5 "car", 8 "automobile", 6 "parked"; "Auto" is position 2, which holds 25% of the attention as the
// model writes "car" (the focus is elsewhere) and none after.
TEST(BeamSearch, ATiedTermTakesThePlaceOfTheWordItsSpanHeldTheMostAttentionFor) {
  const Table model = [](int64_t, const std::vector<int32_t>& h) {
    if (h.empty()) return dist({{4, 0.9}});
    if (h.size() == 1) return dist({{5, 0.8}, {8, 0.0001}});
    if (h.back() == 5 || h.back() == 8) return dist({{6, 0.8}});
    return dist({{kEos, 0.8}, {8, 0.1}});
  };
  const AttendingStep::SentenceWeights spread = [](int64_t, size_t t) {
    if (t == 0) return std::vector<float>{1, 0, 0};
    return t == 1 ? std::vector<float>{0.55f, 0.2f, 0.25f} : std::vector<float>{0, 1, 0};
  };
  const SearchSentence tied{10, {}, 0, {{8}}, {}, {{2, 3}}};
  for (const int beam : {1, 4}) {
    AttendingStep fn(model, spread, 1);
    SearchInput in = input_of({tied});
    in.starts_word.assign(size_t(kVocab), 0);
    for (const int32_t t : {4, 5, 6, 8}) in.starts_word[size_t(t)] = 1;
    in.rejoin = [&](int64_t s) { fn.join(s); };
    EXPECT_EQ(beam_search(fn, opts(beam), in)[0][0].tokens, (std::vector<int32_t>{4, 8, 6})) << "beam " << beam;
    EXPECT_EQ(fn.joined, std::vector<int64_t>{0}) << "searched twice, beam " << beam;
  }
}

TEST(BeamSearch, ATiedTermStartsWhereItsSpanHoldsPartOfTheAttention) {
  const Table model = [](int64_t, const std::vector<int32_t>& h) {
    if (h.empty()) return dist({{4, 0.9}});
    if (h.size() == 1) return dist({{5, 0.8}, {8, 0.01}});
    if (h.back() == 5 || h.back() == 8) return dist({{6, 0.8}});
    return dist({{kEos, 0.9}});
  };
  const AttendingStep::Weights beside = [](size_t t) {
    if (t == 0) return std::vector<float>{1, 0, 0};
    return t == 1 ? std::vector<float>{0.6f, 0.35f, 0.05f} : std::vector<float>{0, 0, 1};
  };
  for (const int beam : {1, 4}) {
    SearchInput tied = input_of({{10, {}, 0, {{8}}, {}, {{1, 2}}}});
    AttendingStep fn(model, beside);
    EXPECT_EQ(beam_search(fn, opts(beam), tied)[0][0].tokens, (std::vector<int32_t>{4, 8, 6})) << "beam " << beam;
  }
}
