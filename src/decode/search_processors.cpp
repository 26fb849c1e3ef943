// The search's state helpers (lexical constraints' progress, the live rows' layout) and its logits processors
// (search_parts.h).
#include <algorithm>

#include "search_parts.h"

namespace mtx::decode::search_parts {

bool ConstraintState::all_met() const {
  return std::all_of(met.begin(), met.end(), [](uint8_t m) { return m != 0; });
}

ConstraintState start_state(const Phrases& phrases) { return {std::vector<uint8_t>(phrases.size(), 0), {}, 0}; }

ConstraintState advance(const ConstraintState& s, const Phrases& phrases, int32_t token,
                        const std::vector<int64_t>& stands_for) {
  if (phrases.empty()) return s;
  ConstraintState n = s;
  n.sealed = false;
  n.just_met = -1;
  const auto extend = [&](const std::vector<int32_t>& under_way) {
    bool any = false;
    int64_t complete = -1;
    bool longer = false;  // an unmet phrase goes on past it
    for (size_t i = 0; i < phrases.size(); ++i) {
      const auto& p = phrases[i];
      if (s.met[i] || p.size() < under_way.size() || !std::equal(under_way.begin(), under_way.end(), p.begin()))
        continue;
      any = true;
      if (p.size() == under_way.size()) {
        if (complete < 0) complete = int64_t(i);
      } else {
        longer = true;
      }
    }
    if (!any) return false;
    if (complete >= 0) {
      n.met[size_t(complete)] = 1;
      n.just_met = complete;
      n.sealed = !longer;
      for (size_t j = 0; j < stands_for.size() && size_t(complete) < stands_for.size(); ++j) {
        if (stands_for[j] == stands_for[size_t(complete)]) n.met[j] = 1;  // its group: every form is met
      }
    }
    n.progress = complete >= 0 && !longer ? std::vector<int32_t>{} : under_way;
    return true;
  };
  std::vector<int32_t> under_way = s.progress;
  under_way.push_back(token);
  if (!extend(under_way)) {
    n.progress.clear();
    if (!s.progress.empty()) extend({token});
  }
  n.bank = int64_t(n.progress.size());
  for (size_t i = 0; i < phrases.size(); ++i) {
    if (n.met[i] && n.progress != phrases[i]) n.bank += int64_t(phrases[i].size());
  }
  return n;
}

void Sentence::drop_forms() {
  if (stands_for.empty()) return;
  constraints.resize(own);
  if (!spans.empty()) spans.resize(own);
  if (!span_words.empty()) span_words.resize(own);
  if (!own_words.empty()) own_words.resize(own);
  stands_for.clear();
}

void advancing_tokens(const ConstraintState& s, const Phrases& phrases, std::vector<int32_t>& out,
                      const std::vector<uint8_t>& held) {
  out.clear();
  for (size_t i = 0; i < phrases.size(); ++i) {
    const auto& p = phrases[i];
    if (s.met[i]) continue;
    if (held.empty() || !held[i]) out.push_back(p.front());
    if (!s.progress.empty() && p.size() > s.progress.size() &&
        std::equal(s.progress.begin(), s.progress.end(), p.begin())) {
      out.push_back(p[s.progress.size()]);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
}

void Live::lay_out() {
  row_start.assign(1, 0);
  for (const int64_t w : widths) row_start.push_back(row_start.back() + w);
}

int64_t Live::sentence_of_row(int64_t r) const {
  return int64_t(std::upper_bound(row_start.begin(), row_start.end(), r) - row_start.begin()) - 1;
}

namespace {

// CTRL's repetition penalty (transformers' definition): a token already in the hypothesis has its score divided
// by the penalty where positive and multiplied where negative.
class RepetitionPenalty : public LogitsProcessor {
 public:
  explicit RepetitionPenalty(double penalty) : penalty_(float(penalty)) {}
  void apply(const Row& row, const Sentence&, float* scores, int64_t vocab, float lse,
             std::vector<int32_t>& seen) const override {
    seen.assign(row.history.begin(), row.history.end());
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (const int32_t t : seen) {
      if (t < 0 || t >= vocab) continue;
      const float v = scores[t] - lse;
      scores[t] = (v < 0 ? v * penalty_ : v / penalty_) + lse;
    }
  }

 private:
  float penalty_;
};

// transformers' NoRepeatNGram: every token that followed an earlier occurrence of the hypothesis's last n - 1
// tokens is banned.
class NoRepeatNgram : public LogitsProcessor {
 public:
  explicit NoRepeatNgram(int64_t n) : n_(n) {}
  void apply(const Row& row, const Sentence&, float* scores, int64_t vocab, float,
             std::vector<int32_t>& bans) const override {
    const std::vector<int32_t>& h = row.history;
    bans.clear();
    const auto len = int64_t(h.size());
    if (len + 1 < n_) return;
    for (int64_t i = 0; i + n_ <= len; ++i) {
      bool match = true;
      for (int64_t j = 0; j + 1 < n_ && match; ++j) match = h[size_t(i + j)] == h[size_t(len - n_ + 1 + j)];
      if (match) bans.push_back(h[size_t(i + n_ - 1)]);
    }
    for (const int32_t t : bans) {
      if (t >= 0 && t < vocab) scores[t] = kNegInf;
    }
  }

 private:
  int64_t n_;
};

// The sentence's suppressed sequences (CTranslate2's suppress_sequences, transformers' NoBadWords): the last token
// of a sequence is banned wherever the hypothesis ends with the rest of it (a one-token sequence: always).
class SuppressSequences : public LogitsProcessor {
 public:
  void apply(const Row& row, const Sentence& sentence, float* scores, int64_t vocab, float,
             std::vector<int32_t>&) const override {
    const std::vector<int32_t>& h = row.history;
    for (const std::vector<int32_t>& q : sentence.suppress) {
      if (q.empty() || q.size() - 1 > h.size()) continue;
      if (!std::equal(q.begin(), q.end() - 1, h.end() - std::ptrdiff_t(q.size() - 1))) continue;
      if (q.back() >= 0 && q.back() < vocab) scores[q.back()] = kNegInf;
    }
  }
};

}  // namespace

Processors make_processors(const SearchOptions& options, bool any_suppress) {
  Processors p;
  if (options.repetition_penalty != 1.0) p.push_back(std::make_unique<RepetitionPenalty>(options.repetition_penalty));
  if (options.no_repeat_ngram_size > 0) p.push_back(std::make_unique<NoRepeatNgram>(options.no_repeat_ngram_size));
  if (any_suppress) p.push_back(std::make_unique<SuppressSequences>());
  return p;
}

ConstraintStep::ConstraintStep(const Live& live, const std::vector<Sentence>& sentences,
                               const std::vector<uint8_t>& continues, const std::vector<uint8_t>& starts, bool tie)
    : starts_word(&starts), live_(live), sentences_(sentences) {
  const auto rows = int64_t(live.rows.size());
  eos_banned.resize(size_t(rows));
  wants.resize(size_t(rows));
  if (!continues.empty()) {
    sealed.resize(size_t(rows));
    continues_word = &continues;
  }
  std::vector<uint8_t> held;
  for (int64_t r = 0; r < rows; ++r) {
    const Sentence& sentence = sentences[size_t(live.active[size_t(live.sentence_of_row(r))])];
    const Row& row = live.rows[size_t(r)];
    const ConstraintState& c = row.constraints;
    eos_banned[size_t(r)] = c.all_met() || sentence.unforced ? 0 : 1;
    if (!sealed.empty()) sealed[size_t(r)] = c.sealed ? 1 : 0;
    // A tied phrase starts where the row attends to its span (term_at), or where it would no longer fit after.
    held.assign(sentence.constraints.size(), 0);
    for (size_t i = 0; i < sentence.spans.size() && tie; ++i) {
      const auto room = sentence.limit - int64_t(row.history.size()) - 1;
      held[i] = !c.met[i] && sentence.spans[i].first >= 0 && int64_t(sentence.constraints[i].size()) < room ? 1 : 0;
    }
    if (!sentence.unforced) advancing_tokens(c, sentence.constraints, wants[size_t(r)], held);
    if (std::find(held.begin(), held.end(), 1) == held.end()) continue;
    if (held_first.empty()) held_first.resize(size_t(rows));
    for (size_t i = 0; i < held.size(); ++i) {
      if (held[i]) held_first[size_t(r)].push_back(sentence.constraints[i].front());
    }
  }
}

namespace {

bool holds(const std::pair<int64_t, int64_t>& span, int64_t position) {
  return position >= span.first && position < span.second;
}

}  // namespace

ConstraintStep::TermHere ConstraintStep::term_at(int64_t r) const {
  const Sentence& sentence = sentence_of(r);
  const ConstraintState& c = live_.rows[size_t(r)].constraints;
  if (sentence.spans.empty() || !c.progress.empty() || !attention.defined()) return {};
  const int64_t focus = focus_of(r);
  const float* a = attention_of(r);
  TermHere near;
  for (size_t i = 0; i < sentence.spans.size(); ++i) {
    if (c.met[i] || sentence.spans[i].first < 0) continue;
    if (holds(sentence.spans[i], focus)) return {int64_t(i), a[focus] >= kFirmAttention};
    if (near.phrase < 0 && share(r, int64_t(i)) >= kNearAttention) near.phrase = int64_t(i);
  }
  return near;
}

int64_t ConstraintStep::term_behind(int64_t r) const {
  const ConstraintState& c = live_.rows[size_t(r)].constraints;
  return c.just_met >= 0 && attends(r, c.just_met) ? c.just_met : -1;
}

bool ConstraintStep::attends(int64_t r, int64_t phrase) const {
  const auto& spans = sentence_of(r).spans;
  return attention.defined() && phrase >= 0 && size_t(phrase) < spans.size() &&
         holds(spans[size_t(phrase)], focus_of(r));
}

float ConstraintStep::share(int64_t r, int64_t phrase) const {
  const auto& [begin, end] = sentence_of(r).spans[size_t(phrase)];
  const float* a = attention_of(r);
  float mass = 0;
  for (int64_t p = std::max<int64_t>(begin, 0); p < std::min(end, positions()); ++p) mass += a[p];
  return mass;
}

const Sentence& ConstraintStep::sentence_of(int64_t r) const {
  return sentences_[size_t(live_.active[size_t(live_.sentence_of_row(r))])];
}

void ConstraintStep::set_attention(const torch::Tensor& a) {
  attention = a;
  words_ = a.clone();
  float* w = words_.data_ptr<float>();
  const int64_t n = a.size(1);
  for (int64_t r = 0; r < a.size(0); ++r) {
    const int64_t words = sentence_of(r).source_words;
    if (words < 0 || words >= n) continue;
    float* row = w + r * n;
    float sum = 0;
    for (int64_t p = 0; p < words; ++p) sum += row[p];
    for (int64_t p = 0; p < n; ++p) row[p] = p < words && sum > 0 ? row[p] / sum : 0.f;
  }
}

const float* ConstraintStep::attention_of(int64_t r) const { return words_.data_ptr<float>() + r * positions(); }

int64_t ConstraintStep::focus_of(int64_t r) const {
  const float* a = attention_of(r);
  return int64_t(std::max_element(a, a + positions()) - a);
}

void ConstraintStep::seal(int64_t r, float* scores, int64_t vocab) const {
  if (sealed.empty() || !sealed[size_t(r)] || !continues_word) return;
  const auto& glue = *continues_word;
  for (int64_t t = 0; t < std::min<int64_t>(vocab, int64_t(glue.size())); ++t) {
    if (glue[size_t(t)]) scores[t] = kNegInf;
  }
}

}  // namespace mtx::decode::search_parts
