// The search's choice over the model's scores (search_parts.h's CandidatePicker, search.h's best_candidates): one
// fused pass per row on the CPU, split across threads with at::parallel_for (this file is built with OpenMP).
#include <torch/torch.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>

#include "mtx/util/cpu_isa.h"
#include "mtx/util/random.h"
#include "search_parts.h"

namespace mtx::decode {

namespace search_parts {

namespace {

// The row passes for the level the kernels run at (util/cpu_isa.h).
kernels::RowLoops row_loops() {
#if defined(__x86_64__)
  if (cpu::isa() >= cpu::Isa::avx512) return kernels::row_loops_avx512();
  if (cpu::isa() >= cpu::Isa::avx2) return kernels::row_loops_avx2();
#endif
  return kernels::row_loops_generic();
}

// A uniform number in [0, 1) for draw `j` of a sentence's seed at its own step `t`.
double uniform(uint64_t seed, int64_t t, int64_t j) {
  return double(Rng::from({seed, uint64_t(t), uint64_t(j)}).next() >> 11) * 0x1.0p-53;
}

float log_sum_exp(const kernels::RowLoops& loops, const float* row, int64_t vocab) {
  const float max = loops.max(row, vocab);
  if (max == kNegInf) return kNegInf;
  return max + std::log(loops.sum_exp(row, vocab, max));
}

}  // namespace

CandidatePicker::CandidatePicker(std::vector<int64_t> starts, int64_t k, const StepRules& rules, bool raw,
                                 const Steering* steer)
    : starts_(std::move(starts)), rows_(starts_.back()), k_(k), rules_(rules), raw_(raw), steer_(steer) {
  sentence_of_.resize(size_t(rows_));
  for (size_t a = 0; a + 1 < starts_.size(); ++a) {
    for (int64_t r = starts_[a]; r < starts_[a + 1]; ++r) sentence_of_[size_t(r)] = int64_t(a);
  }
  if (steer_ && steer_->sampling) {
    samples_.assign(size_t(rows_ * steer_->sampling->samples), Entry{kNegInf, -1});
  } else {
    top_.resize(size_t(rows_ * held_rows()));
  }
  if (steer_ && steer_->constraints) wanted_.resize(size_t(rows_));
}

const std::vector<Entry>& CandidatePicker::wanted(int64_t r) const {
  static const std::vector<Entry> kNone;
  return wanted_.empty() ? kNone : wanted_[size_t(r)];
}

int64_t CandidatePicker::draws(int64_t a) const {
  return steer_ && steer_->sampling && starts_[size_t(a) + 1] - starts_[size_t(a)] == 1 ? steer_->sampling->samples : 1;
}

void CandidatePicker::add(int64_t first_row, const torch::Tensor& block_in) {
  const torch::Tensor x = block_in.contiguous();  // [n, V]
  const int64_t n = x.size(0), vocab = x.size(1);
  TORCH_CHECK(first_row >= 0 && first_row + n <= rows_ && (vocab_ < 0 || vocab_ == vocab), "search: a block of ",
              x.sizes(), " at row ", first_row, " of ", rows_);
  vocab_ = vocab;
  float* base = x.data_ptr<float>();
  const kernels::RowLoops loops = row_loops();
  at::parallel_for(0, n, 2, [&](int64_t begin, int64_t end) {  // a row: passes over the vocabulary
    std::vector<int32_t> scratch;
    for (int64_t i = begin; i < end; ++i) pick_row(first_row + i, base + i * vocab, vocab, loops, scratch);
  });
  seen_ += n;
}

// Row r: its forced token, or its scores steered (processors, constraints), then its draws or its best tokens.
void CandidatePicker::pick_row(int64_t r, float* row, int64_t vocab, const kernels::RowLoops& loops,
                               std::vector<int32_t>& scratch) {
  const int64_t a = sentence_of_[size_t(r)];
  const bool sampling = steer_ && steer_->sampling;
  if (sampling && !(*steer_->rows)[size_t(r)].live) {  // a sample that ended
    for (int64_t j = 0; j < draws(a); ++j) samples_[size_t(r * steer_->sampling->samples + j)] = {kNegInf, rules_.eos};
    return;
  }
  const int32_t forced = rules_.forced[size_t(a)]      ? rules_.eos
                         : rules_.forced_token.empty() ? -1
                                                       : rules_.forced_token[size_t(a)];
  if (forced >= 0) {  // EOS at the limit, or the prefix's token: the model's own log-probability
    TORCH_CHECK(forced < vocab, "search: prefix token ", forced, " outside a vocabulary of ", vocab);
    const float lse = raw_ ? 0 : log_sum_exp(loops, row, vocab);
    put_forced(r, a, forced, row[forced] - lse);
    return;
  }
  const float lse = steer_row(r, row, vocab, loops, scratch);
  // Never chosen: BOS, pad, unk, EOS before min_len (or before the row's constraints are met).
  const bool eos_banned = (!rules_.eos_banned.empty() && rules_.eos_banned[size_t(a)]) ||
                          (steer_ && steer_->constraints && steer_->constraints->eos_banned[size_t(r)]);
  if (sampling) {
    for (const int32_t t : {rules_.bos, rules_.pad, rules_.unk, eos_banned ? rules_.eos : -1}) {
      if (t >= 0 && t < vocab) row[t] = kNegInf;
    }
    sample(r, row, vocab, lse, loops);
    return;
  }
  top_row(r, row, vocab, lse, eos_banned, loops);
}

// Row r's processors (on the logits, or on the log-probabilities) and its constraints' bans; returns its
// log-sum-exp (0 on the raw path), and keeps the log-probabilities of the tokens its constraints want.
float CandidatePicker::steer_row(int64_t r, float* row, int64_t vocab, const kernels::RowLoops& loops,
                                 std::vector<int32_t>& scratch) {
  float lse = 0;
  const bool process = steer_ && steer_->processes();
  if (process && !steer_->logits && !raw_) lse = log_sum_exp(loops, row, vocab);  // log-probability domain
  if (process) {
    const Row& hyp = (*steer_->rows)[size_t(r)];
    const Sentence& sentence = *steer_->sentences[size_t(sentence_of_[size_t(r)])];
    for (const auto& p : *steer_->processors) p->apply(hyp, sentence, row, vocab, lse, scratch);
  }
  if (!raw_ && (!process || steer_->logits)) lse = log_sum_exp(loops, row, vocab);
  if (steer_ && steer_->constraints) {
    ConstraintStep& c = *steer_->constraints;
    c.seal(r, row, vocab);
    if (c.attention.defined()) displace(r, row, vocab, loops);
    auto& w = wanted_[size_t(r)];  // the tokens that advance the row's constraints, before the bans
    w.clear();
    for (const int32_t t : c.wants[size_t(r)]) {
      if (t < 0 || t >= vocab || t == rules_.bos || t == rules_.pad || t == rules_.eos) continue;
      if (row[t] != kNegInf) w.push_back({raw_ ? row[t] : row[t] - lse, t});
    }
  }
  return lse;
}

// Row r's tied phrases (SearchSentence::spans). The tokens its hypothesis's phrases displaced stay banned. A tied
// phrase starts only where the row attends to its span (ConstraintStep::term_at; or where it would no longer fit
// after). Where its span holds the focus, past the first step and where the focus is firm
// (ConstraintStep::TermHere), or at the first step for a span that starts the line, the phrase takes the place of
// the model's own best token (not EOS, BOS, pad or unk): its first token scores as that token, which is banned,
// and stays banned for the continuation that starts the phrase; that continuation shows the whole phrase and feeds
// the model its own token (SearchRun::continued). Right after a tied phrase ends otherwise, while the row still
// attends to its span, the model's best token is banned for the rest of the hypothesis: it is the model's own
// word for that span (where the span's own words are known, Sentence::span_words: only when it is one of them).
void CandidatePicker::displace(int64_t r, float* row, int64_t vocab, const kernels::RowLoops& loops) {
  ConstraintStep& c = *steer_->constraints;
  const Row& hyp = (*steer_->rows)[size_t(r)];
  for (const int32_t t : hyp.displaced) {
    if (t >= 0 && t < vocab) row[t] = kNegInf;
  }
  const ConstraintStep::TermHere here = c.term_at(r);
  int64_t term = here.phrase;
  auto& wants = c.wants[size_t(r)];
  int32_t first = -1;
  const Sentence& sentence = *steer_->sentences[size_t(sentence_of_[size_t(r)])];
  if (term >= 0) {  // the phrase may start here (unforced: where the model writes it, or in its word's place)
    first = sentence.constraints[size_t(term)].front();
    if (!sentence.unforced && std::find(wants.begin(), wants.end(), first) == wants.end()) wants.push_back(first);
  }
  if (!c.held_first.empty()) {  // the tied phrases that may not start here (Hasler et al. 2018)
    for (const int32_t t : c.held_first[size_t(r)]) {
      if (t >= 0 && t < vocab && t != first && std::find(wants.begin(), wants.end(), t) == wants.end())
        row[t] = kNegInf;
    }
  }
  // The first step's attention does not tell the word it writes: there the phrase takes the model's first word's
  // place only where it translates the line's first word, else it only may start.
  const bool first_word = hyp.history.empty() && term >= 0 && sentence.spans[size_t(term)].first == 0;
  // Searched as the model writes it, where the model's own words for the span are known, they alone say where the
  // phrase takes a word's place (below); forced, the focus does too.
  const bool own_known_here = sentence.unforced && term >= 0 && size_t(term) < sentence.span_words.size() &&
                              !sentence.span_words[size_t(term)].empty();
  bool in_place = ((here.firm && !hyp.history.empty()) || first_word) && !own_known_here;
  Entry best[kHeldExtra + 1];
  loops.top(row, vocab, kHeldExtra + 1, best);
  // A phrase takes the place of the model's own word for its span where the model writes it: searched again, its
  // word from the first search (Sentence::own_words) wherever it comes; else its word for the span alone
  // (Sentence::span_words) where the span holds kOwnWordAttention of the attention, past the first step unless the
  // span starts the line.
  if (!in_place && hyp.constraints.progress.empty() && (!sentence.own_words.empty() || !sentence.span_words.empty())) {
    const Entry* top = std::find_if(best, best + kHeldExtra + 1, [&](const Entry& e) {
      return e.index < 0 ||
             (e.index != rules_.eos && e.index != rules_.bos && e.index != rules_.pad && e.index != rules_.unk);
    });
    float most = 0;
    for (size_t i = 0; top != best + kHeldExtra + 1 && top->index >= 0 && i < sentence.constraints.size(); ++i) {
      if (hyp.constraints.met[i] || sentence.spans[i].first < 0) continue;
      const auto t = int32_t(top->index);
      float share = 0;
      if (i < sentence.own_words.size() && sentence.own_words[i] == t) {
        share = 2;  // the first search's own word
      } else if (sentence.span_word(i, t) && (!hyp.history.empty() || sentence.spans[i].first == 0)) {
        share = c.share(r, int64_t(i));
        if (share < ConstraintStep::kOwnWordAttention) share = 0;
      }
      if (share <= most) continue;
      most = share;
      term = int64_t(i);
      first = sentence.constraints[i].front();
      in_place = true;
    }
  }
  const int64_t behind = in_place ? -1 : c.term_behind(r);
  if (!in_place && behind < 0) return;
  // Behind a phrase whose span's own words are known, only those are the model's word for the span.
  const bool own_known =
      behind >= 0 && size_t(behind) < sentence.span_words.size() && !sentence.span_words[size_t(behind)].empty();
  for (const Entry& e : best) {
    const int64_t t = e.index;
    if (t < 0 || e.value == kNegInf || (in_place && t == first)) return;  // the model's own choice is the phrase
    if (t == rules_.eos || t == rules_.bos || t == rules_.pad || t == rules_.unk) continue;
    if (!c.is_word(t)) return;  // punctuation is no word of the span's: nothing is displaced
    if (own_known && !sentence.span_word(size_t(behind), int32_t(t))) return;
    if (in_place) row[first] = e.value;  // the model's word is what the row feeds (SearchRun::continued)
    row[t] = kNegInf;
    c.displaced[size_t(r)] = int32_t(t);
    c.displaced_if[size_t(r)] = in_place ? first : -1;
    c.placed[size_t(r)] = in_place ? int32_t(term) : -1;
    return;
  }
}

// Row r's best allowed tokens as log-probabilities: banned tokens (at most 4) are filtered from its best 2k + 4.
void CandidatePicker::top_row(int64_t r, const float* row, int64_t vocab, float lse, bool eos_banned,
                              const kernels::RowLoops& loops) {
  const int64_t held = held_rows();
  Entry* out = top_.data() + r * held;
  loops.top(row, vocab, held, out);
  int64_t kept = 0;
  for (int64_t j = 0; j < held; ++j) {
    const int64_t t = out[j].index;
    if (t < 0 || out[j].value == kNegInf || t == rules_.bos || t == rules_.pad || t == rules_.unk ||
        (t == rules_.eos && eos_banned)) {
      continue;
    }
    out[kept++] = {out[j].value - lse, t};
  }
  for (int64_t j = kept; j < held; ++j) out[j] = {kNegInf, -1};
}

Candidates CandidatePicker::finish(const std::vector<float>& prior) {
  TORCH_CHECK(seen_ == rows_, "search: the step gave scores for ", seen_, " of ", rows_, " rows");
  const auto n_active = int64_t(starts_.size()) - 1;
  const int64_t want = 2 * k_, held = held_rows();
  Candidates c{torch::full({n_active, want}, kNegInf), torch::zeros({n_active, want}, torch::kLong)};
  float* cs = c.scores.data_ptr<float>();
  int64_t* ci = c.indices.data_ptr<int64_t>();
  std::vector<Entry> pool;
  for (int64_t a = 0; a < n_active; ++a) {
    pool.clear();
    for (int64_t b = 0; b < starts_[size_t(a) + 1] - starts_[size_t(a)]; ++b) {
      const int64_t r = starts_[size_t(a)] + b;
      for (int64_t j = 0; j < want; ++j) {
        const Entry& e = top_[size_t(r * held + j)];
        if (e.index < 0) break;
        pool.push_back({prior[size_t(r)] + e.value, b * vocab_ + e.index});  // as (prior + logp) in fp32
      }
    }
    const auto m = std::min<size_t>(pool.size(), size_t(want));
    std::partial_sort(pool.begin(), pool.begin() + m, pool.end(), better);
    for (size_t j = 0; j < m; ++j) {
      cs[a * want + int64_t(j)] = pool[j].value;
      ci[a * want + int64_t(j)] = pool[j].index;
    }
  }
  return c;
}

void CandidatePicker::put_forced(int64_t r, int64_t a, int32_t token, float logp) {
  if (steer_ && steer_->sampling) {
    for (int64_t j = 0; j < draws(a); ++j) samples_[size_t(r * steer_->sampling->samples + j)] = {logp, token};
    return;
  }
  Entry* out = top_.data() + r * held_rows();
  for (int64_t j = 0; j < held_rows(); ++j) out[j] = {kNegInf, -1};
  out[0] = {logp, token};
}

// A row's tokens that sampling draws from, best first: its top-k (all, when k is 0), those that may be drawn.
std::vector<Entry> CandidatePicker::sampling_candidates(const float* row, int64_t vocab,
                                                        const kernels::RowLoops& loops) const {
  const SearchOptions& o = *steer_->sampling->options;
  std::vector<Entry> cand;  // best first
  const int64_t keep_k = o.sampling_topk > 0 && o.sampling_topk < vocab ? o.sampling_topk : vocab;
  if (keep_k <= kTopLoopMax) {  // the row loop keeps a small sorted list: quadratic in k
    cand.resize(size_t(keep_k));
    loops.top(row, vocab, keep_k, cand.data());
  } else {
    cand.reserve(size_t(vocab));
    for (int64_t t = 0; t < vocab; ++t) {
      if (row[t] != kNegInf) cand.push_back({row[t], t});
    }
    const size_t m = std::min(cand.size(), size_t(keep_k));
    std::partial_sort(cand.begin(), cand.begin() + std::ptrdiff_t(m), cand.end(), better);  // a total order
    cand.resize(m);
  }
  while (!cand.empty() && (cand.back().index < 0 || cand.back().value == kNegInf)) cand.pop_back();
  return cand;
}

// Row r's draws: temperature, top-k, top-p (transformers' order and definitions), then the inverse of the
// cumulative distribution at the seed's uniform number. Each draw carries its token's log-probability at
// temperature 1 over the whole (processed) row.
void CandidatePicker::sample(int64_t r, const float* row, int64_t vocab, float lse, const kernels::RowLoops& loops) {
  const SamplingStep& s = *steer_->sampling;
  const SearchOptions& o = *s.options;
  const int64_t a = sentence_of_[size_t(r)];
  std::vector<Entry> cand = sampling_candidates(row, vocab, loops);
  Entry* out = samples_.data() + r * s.samples;
  if (cand.empty()) {  // nothing allowed: the row ends
    for (int64_t j = 0; j < draws(a); ++j) out[j] = {kNegInf, rules_.eos};
    return;
  }
  // Probabilities at the temperature, relative to the best.
  const double t = o.sampling_temperature;
  std::vector<double> p(cand.size());
  double total = 0;
  for (size_t i = 0; i < cand.size(); ++i) total += p[i] = std::exp((double(cand[i].value) - cand[0].value) / t);
  // Nucleus: transformers removes the tokens whose cumulative probability, summed from the least likely up,
  // is at most 1 - top_p; the likeliest always stays.
  if (o.sampling_topp < 1.0) {
    double below = 0;  // probability of the tokens less likely than i
    size_t keep = cand.size();
    for (size_t i = cand.size(); i-- > 1;) {
      below += p[i] / total;
      if (below <= 1.0 - o.sampling_topp)
        keep = i;
      else
        break;
    }
    cand.resize(keep);
    p.resize(keep);
    total = 0;
    for (const double v : p) total += v;
  }
  for (int64_t j = 0; j < draws(a); ++j) {
    const int64_t draw = draws(a) > 1 ? j : r - starts_[size_t(a)];
    const double u = uniform(s.seeds[size_t(a)], s.own_steps[size_t(a)], draw) * total;
    double cum = 0;
    size_t pick = cand.size() - 1;
    for (size_t i = 0; i < cand.size(); ++i) {
      cum += p[i];
      if (u < cum) {
        pick = i;
        break;
      }
    }
    out[j] = {raw_ ? cand[pick].value : cand[pick].value - lse, cand[pick].index};
  }
}

Candidates candidates_tensor(const torch::Tensor& scores, const std::vector<float>& prior, int64_t k, int64_t width,
                             const StepRules& rules) {
  torch::Tensor logp = torch::log_softmax(scores.to(torch::kFloat), -1);  // [rows, V]
  const int64_t rows = logp.size(0), vocab = logp.size(1), n_active = rows / width;
  logp.select(1, rules.bos).fill_(kNegInf);
  if (rules.pad >= 0 && rules.pad < vocab) logp.select(1, rules.pad).fill_(kNegInf);
  if (rules.unk >= 0 && rules.unk < vocab) logp.select(1, rules.unk).fill_(kNegInf);
  std::vector<int64_t> forced, banned;  // rows
  for (int64_t a = 0; a < n_active; ++a) {
    const bool force = rules.forced[size_t(a)] != 0;
    const bool ban = !force && !rules.eos_banned.empty() && rules.eos_banned[size_t(a)];
    for (int64_t b = 0; b < width && (force || ban); ++b) (force ? forced : banned).push_back(a * width + b);
  }
  if (!banned.empty()) {
    const torch::Tensor idx = torch::tensor(banned, torch::kLong).to(logp.device());
    logp.select(1, rules.eos).index_fill_(0, idx, kNegInf);
  }
  if (!forced.empty()) {
    const torch::Tensor idx = torch::tensor(forced, torch::kLong).to(logp.device());
    const torch::Tensor eos_col = logp.index_select(0, idx).select(1, rules.eos).clone();  // [forced]
    logp.index_fill_(0, idx, kNegInf);
    logp.select(1, rules.eos).index_copy_(0, idx, eos_col);
  }
  const torch::Tensor p = torch::tensor(prior, torch::kFloat).to(logp.device()).unsqueeze(1);  // [rows, 1]
  const auto top = (p + logp).view({n_active, width * vocab}).topk(2 * k, 1);                  // [A, 2k]
  return {std::get<0>(top).cpu().contiguous(), std::get<1>(top).cpu().contiguous()};
}

}  // namespace search_parts

Candidates best_candidates(const torch::Tensor& scores, const std::vector<float>& prior, int64_t k,
                           const StepRules& rules, bool fused, int64_t width) {
  if (width == 0) width = k;
  TORCH_CHECK(width >= 1 && scores.dim() == 2 && scores.size(0) % width == 0 &&
                  int64_t(prior.size()) == scores.size(0) && int64_t(rules.forced.size()) * width == scores.size(0),
              "best_candidates: scores ", scores.sizes(), ", ", prior.size(), " priors, ", rules.forced.size(),
              " sentences, beam ", k, ", ", width, " rows each");
  TORCH_CHECK(rules.eos_banned.empty() || rules.eos_banned.size() == rules.forced.size(),
              "best_candidates: EOS bans for ", rules.eos_banned.size(), " of ", rules.forced.size(), " sentences");
  TORCH_CHECK(rules.bos >= 0 && rules.bos < scores.size(1) && rules.eos >= 0 && rules.eos < scores.size(1),
              "best_candidates: BOS/EOS outside the vocabulary");
  if (fused && scores.device().is_cpu() && scores.scalar_type() == torch::kFloat) {
    std::vector<int64_t> starts;
    for (int64_t r = 0; r <= scores.size(0); r += width) starts.push_back(r);
    search_parts::CandidatePicker picker(std::move(starts), k, rules);
    picker.add(0, scores);
    return picker.finish(prior);
  }
  return search_parts::candidates_tensor(scores, prior, k, width, rules);
}

}  // namespace mtx::decode
