// The search's strategies (search_parts.h): beam search, greedy search and sampling, each turning a step's choice
// into the next rows.
#include <torch/torch.h>

#include <algorithm>
#include <functional>

#include "search_parts.h"

namespace mtx::decode::search_parts {

namespace {

// Dynamic beam allocation for sentence `s` (active index a): `cands` (its best candidates) grows by each row's
// best token and every token that advances a row's constraints, and is put in the order in which the beam takes
// them: grouped into banks by the constraint tokens each would have met, best first within a bank; then the
// best of every bank (the fullest bank first), the second best of every bank, and so on.
void constrained_order(const SearchRun& run, int64_t a, int64_t s, const CandidatePicker& picker,
                       const std::vector<float>& prior, int64_t vocab, std::vector<Entry>& cands) {
  const Sentence& sentence = run.sentence(s);
  const Live& live = run.live();
  const int64_t first = live.row_start[size_t(a)];
  const auto add = [&](int64_t b, const Entry& e) {
    if (e.index < 0 || e.value == kNegInf) return;
    const float score = prior[size_t(first + b)] + e.value;
    if (score != kNegInf) cands.push_back({score, b * vocab + e.index});
  };
  for (int64_t b = 0; b < live.widths[size_t(a)]; ++b) {
    add(b, picker.best(first + b));
    for (const Entry& e : picker.wanted(first + b)) add(b, e);
  }
  std::sort(cands.begin(), cands.end(), better);
  // A row's token among both its best and its wanted ones: the same index and score, neighbours after the sort.
  cands.erase(
      std::unique(cands.begin(), cands.end(), [](const Entry& x, const Entry& y) { return x.index == y.index; }),
      cands.end());
  struct Ranked {
    Entry e;
    int64_t bank, rank;
  };
  std::vector<Ranked> ranked;
  for (const Entry& e : cands) {
    const int64_t b = e.index / vocab;
    const auto token = int32_t(e.index % vocab);
    const ConstraintState& from = live.rows[size_t(first + b)].constraints;
    ranked.push_back({e, token == run.eos() ? from.bank : sentence.advance(from, token).bank, 0});
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const Ranked& x, const Ranked& y) { return x.bank > y.bank; });
  for (size_t i = 0; i < ranked.size(); ++i) {
    ranked[i].rank = i > 0 && ranked[i].bank == ranked[i - 1].bank ? ranked[i - 1].rank + 1 : 0;
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const Ranked& x, const Ranked& y) {
    return x.rank < y.rank || (x.rank == y.rank && x.bank > y.bank);
  });
  cands.clear();
  for (const Ranked& r : ranked) cands.push_back(r.e);
}

// Beam search (beam k; greedy search is its k = 1): each sentence's candidates in the order they take the beam,
// the first k EOS among the k best end hypotheses, the k best others continue.
class BeamSearch : public Strategy {
 public:
  void choose(SearchRun& run, Scored& scored, Next& next) const override {
    const Live& live = run.live();
    std::vector<float> prior;
    for (const Row& row : live.rows) prior.push_back(row.score);
    TORCH_CHECK(scored.fused || std::all_of(live.widths.begin(), live.widths.end(),
                                            [&](int64_t w) { return w == live.widths.front(); }),
                "beam_search: the tensor path needs one width for every sentence");
    const Candidates top = scored.fused ? scored.picker.finish(prior)
                                        : best_candidates(torch::cat(scored.kept, 0), prior, run.k(), run.rules(),
                                                          false, live.widths.front());
    const auto sc = top.scores.accessor<float, 2>();  // [A, 2k]
    const auto ix = top.indices.accessor<int64_t, 2>();
    std::vector<Entry> cands;  // a sentence's candidates in the order they take the beam: (score, beam * V + token)
    for (int64_t a = 0; a < int64_t(live.active.size()); ++a) {
      const int64_t s = live.active[size_t(a)];
      cands.clear();
      for (int64_t c = 0; c < 2 * run.k() && sc[a][c] != kNegInf; ++c) cands.push_back({sc[a][c], ix[a][c]});
      const Sentence& sentence = run.sentence(s);
      if (!sentence.constraints.empty() && !sentence.unforced)
        constrained_order(run, a, s, scored.picker, prior, scored.vocab, cands);
      const std::vector<int64_t> chosen = sentence_step(run, a, s, cands, scored.vocab);
      if (chosen.empty()) continue;
      if (run.cut_at_limit() && run.at_limit(s)) {  // the hypotheses still open end here, without EOS
        for (const int64_t c : chosen) {
          const Entry& e = cands[size_t(c)];
          const int64_t r = live.row_start[size_t(a)] + e.index / scored.vocab;
          const Row row =
              run.continued(live.rows[size_t(r)], s, int32_t(e.index % scored.vocab), e.value, scored.attention, r);
          run.finished(s).push_back(run.ended(row, s, e.value, /*eos=*/false));
        }
        run.conclude(s);
        continue;
      }
      next.active.push_back(s);
      for (int64_t j = 0; j < run.k(); ++j) {
        // Fewer than k live candidates (tiny vocabularies, a forced token): repeat the last one as a dead row.
        const Entry& e = cands[size_t(chosen[size_t(std::min<int64_t>(j, int64_t(chosen.size()) - 1))])];
        const int64_t r = live.row_start[size_t(a)] + e.index / scored.vocab;
        const float score = run.raw() ? 0.0f : j < int64_t(chosen.size()) ? e.value : kNegInf;
        next.keep_rows.push_back(r);
        next.rows.push_back(
            run.continued(live.rows[size_t(r)], s, int32_t(e.index % scored.vocab), score, scored.attention, r));
      }
    }
  }

 protected:
  // Sentence s's step over its ordered candidates: the hypotheses that end, and the positions of the candidates
  // that continue; none when its search ends here (then concluded).
  virtual std::vector<int64_t> sentence_step(SearchRun& run, int64_t a, int64_t s, const std::vector<Entry>& cands,
                                             int64_t vocab) const {
    const int64_t k = run.k();
    auto& done = run.finished(s);
    std::vector<int64_t> chosen;  // candidate positions continuing
    for (int64_t c = 0; c < int64_t(cands.size()) && int64_t(chosen.size()) < k; ++c) {
      const float score = cands[size_t(c)].value;
      if (score == kNegInf) break;
      const int64_t beam = cands[size_t(c)].index / vocab, token = cands[size_t(c)].index % vocab;
      if (token == run.eos()) {
        // Like fairseq: an EOS counts only among the k best candidates.
        if (c < k) done.push_back(run.ended(run.live().rows[size_t(run.live().row_start[size_t(a)] + beam)], s, score));
      } else {
        chosen.push_back(c);
      }
    }
    if (chosen.empty() || ends(run, s, cands, chosen)) {  // nothing left alive, or enough hypotheses ended
      run.conclude(s);
      return {};
    }
    return chosen;
  }

  // Whether sentence s's search ends with `chosen` still alive: `beam` hypotheses ended (the first-k rule), or with
  // exact_stop, no live hypothesis can still beat the k-th best ended one (its score can only fall with more
  // tokens, the length penalty only grow up to the sentence's limit).
  static bool ends(const SearchRun& run, int64_t s, const std::vector<Entry>& cands,
                   const std::vector<int64_t>& chosen) {
    const int64_t k = run.k();
    const std::vector<Hypothesis>& done = run.finished(s);
    if (int64_t(done.size()) < k) return false;
    if (!run.options().exact_stop) return true;
    std::vector<double> ended_scores;
    for (const auto& h : done) ended_scores.push_back(h.score);
    std::nth_element(ended_scores.begin(), ended_scores.begin() + (k - 1), ended_scores.end(), std::greater<double>());
    const double kth = ended_scores[size_t(k - 1)];
    double best_live = kNegInf;  // constrained candidates need not come best first
    for (const int64_t c : chosen) best_live = std::max(best_live, double(cands[size_t(c)].value));
    const SearchOptions& o = run.options();
    const int64_t limit = run.sentence(s).limit;
    if (o.word_penalty == 0) return normalized_score(best_live, limit, o) <= kth;  // the penalty only grows
    // Per token, the word penalty may add as much as the length normalisation takes: the best of every length.
    double best = kNegInf;
    for (int64_t length = 1; length <= limit; ++length) best = std::max(best, normalized_score(best_live, length, o));
    return best <= kth;
  }
};

// Marian's beam search: a sentence's candidates are taken in order, as many as it has hypotheses under way; those
// that end with EOS leave the beam narrower, and the search goes on until every hypothesis ended (no first-k
// rule, no exact_stop). At beam 1 it is greedy search.
class ShrinkingBeam : public BeamSearch {
 protected:
  std::vector<int64_t> sentence_step(SearchRun& run, int64_t a, int64_t s, const std::vector<Entry>& cands,
                                     int64_t vocab) const override {
    Sentence& sentence = run.sentence(s);
    auto& done = run.finished(s);
    std::vector<int64_t> chosen;
    const int64_t taken = std::min<int64_t>(sentence.beam_left, int64_t(cands.size()));
    for (int64_t c = 0; c < taken && cands[size_t(c)].value != kNegInf; ++c) {
      const int64_t beam = cands[size_t(c)].index / vocab, token = cands[size_t(c)].index % vocab;
      if (token == run.eos()) {
        done.push_back(
            run.ended(run.live().rows[size_t(run.live().row_start[size_t(a)] + beam)], s, cands[size_t(c)].value));
      } else {
        chosen.push_back(c);
      }
    }
    sentence.beam_left = int64_t(chosen.size());
    if (chosen.empty()) run.conclude(s);
    return chosen;
  }
};

// Greedy search: beam search's rules at k = 1, each sentence one row. The first candidate continues unless it is
// EOS; then the hypothesis ends, and (exact_stop) the best other candidate may go on.
class GreedySearch : public BeamSearch {
 protected:
  std::vector<int64_t> sentence_step(SearchRun& run, int64_t a, int64_t s, const std::vector<Entry>& cands,
                                     int64_t vocab) const override {
    auto& done = run.finished(s);
    int64_t live = -1;
    for (int64_t c = 0; c < int64_t(cands.size()) && live < 0; ++c) {
      if (cands[size_t(c)].value == kNegInf) break;
      if (cands[size_t(c)].index % vocab != run.eos()) {
        live = c;
      } else if (c == 0) {
        done.push_back(run.ended(run.live().rows[size_t(run.live().row_start[size_t(a)])], s, cands[0].value));
      }
    }
    if (live < 0 || ends(run, s, cands, {live})) {
      run.conclude(s);
      return {};
    }
    return {live};
  }
};

// Sampling: each row continues its own sample: sample j of a sentence is row j (at its first step, draw j of its
// one row). A sample that draws EOS ends; its row stays as a dead one until the sentence's last sample ends.
class Sampling : public Strategy {
 public:
  void choose(SearchRun& run, Scored& scored, Next& next) const override {
    const Live& live = run.live();
    const int64_t k = run.k();
    for (int64_t a = 0; a < int64_t(live.active.size()); ++a) {
      const int64_t s = live.active[size_t(a)];
      auto& done = run.finished(s);
      bool any = false;
      std::vector<int64_t> rows_a;
      std::vector<Row> next_a;
      for (int64_t j = 0; j < k; ++j) {
        const int64_t w = live.widths[size_t(a)];
        const int64_t r = live.row_start[size_t(a)] + (w == 1 ? 0 : j);
        const Row& row = live.rows[size_t(r)];
        rows_a.push_back(r);
        const Entry& e = scored.picker.drawn(r, w == 1 ? j : 0);
        if (row.live && e.index != run.eos() && e.value != kNegInf) {
          any = true;
          next_a.push_back(run.continued(row, s, int32_t(e.index), row.score + e.value, scored.attention, r));
          continue;
        }
        if (row.live) {  // sample j's slot: the samples are returned in draw order, whichever ends first
          if (int64_t(done.size()) < k) done.resize(size_t(k));
          done[size_t(j)] = run.ended(row, s, row.score + e.value);
        }
        Row dead;
        dead.token = run.eos();
        dead.score = kNegInf;
        dead.live = false;
        dead.history = row.history;
        next_a.push_back(std::move(dead));
      }
      if (!any) {
        run.conclude(s);
        continue;
      }
      next.active.push_back(s);
      next.keep_rows.insert(next.keep_rows.end(), rows_a.begin(), rows_a.end());
      for (Row& row : next_a) next.rows.push_back(std::move(row));
    }
  }
};

}  // namespace

std::unique_ptr<Strategy> make_strategy(const SearchOptions& options) {
  if (config::sampling(options)) return std::make_unique<Sampling>();
  if (options.shrink_beam) return std::make_unique<ShrinkingBeam>();
  if (options.beam == 1) return std::make_unique<GreedySearch>();
  return std::make_unique<BeamSearch>();
}

}  // namespace mtx::decode::search_parts
