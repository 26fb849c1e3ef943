#include "mtx/decode/search.h"

#include <torch/torch.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>

#include "cpu/softmax_kernels.h"
#include "mtx/util/cpu_isa.h"
#include "mtx/util/errors.h"
#include "mtx/util/random.h"
#include "mtx/util/system.h"

namespace mtx::decode {

namespace {

// Rows per block of the vocabulary projection (search.h, step_blocks): a 256 x 8k block is 8 MB.
constexpr int64_t kBlockRows = 256;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The row passes for the level the kernels run at (util/cpu_isa.h).
kernels::RowLoops row_loops() {
#if defined(__x86_64__)
  if (cpu::isa() >= cpu::Isa::avx512) return kernels::row_loops_avx512();
  if (cpu::isa() >= cpu::Isa::avx2) return kernels::row_loops_avx2();
#endif
  return kernels::row_loops_generic();
}

using Entry = kernels::TopEntry;
// Best first; equal values: the lower index first (a deterministic order).
inline bool better(const Entry& a, const Entry& b) {
  return a.value > b.value || (a.value == b.value && a.index < b.index);
}

struct Row;

// What a step does between the model's scores and the token choice besides the bans: processors (repetition
// penalty, no-repeat n-grams) and sampling. Null: none of them.
struct Steering {
  const SearchOptions* options = nullptr;
  bool logits = false;  // processors act on the logits (greedy, sampling), else on the log-probabilities
  bool sample = false;  // each row draws its next token(s)
  int64_t samples = 1;  // sampling: samples per sentence (a sentence's one row at its first step draws them all)
  const std::vector<Row>* rows = nullptr;  // the search's rows (their histories; sampling: which run)
  std::vector<uint64_t> seeds;             // per active sentence
  std::vector<int64_t> own_steps;          // per active sentence
  // Constraints, per row (empty: none): EOS banned (its constraints are not all met), and the tokens whose
  // log-probabilities the step keeps besides its best ones (those that advance its constraints).
  std::vector<uint8_t> eos_banned_rows;
  std::vector<std::vector<int32_t>> wants;
  std::vector<uint8_t> sealed_rows;                      // per row: a phrase just ended (or empty)
  const std::vector<uint8_t>* continues_word = nullptr;  // per token (SearchInput)
  bool processors() const { return options->repetition_penalty != 1.0 || options->no_repeat_ngram_size > 0; }
};

// Constraints of one sentence: target phrases, each a token sequence.
using Phrases = std::vector<std::vector<int32_t>>;

// A hypothesis's progress through its sentence's constraints (fairseq's UnorderedConstraintState, without the
// trie): which phrases it has met, and the tokens of an unmet one it is in the middle of.
struct ConstraintState {
  std::vector<uint8_t> met;       // per phrase
  std::vector<int32_t> progress;  // a prefix of at least one unmet phrase (empty: none under way)
  int64_t bank = 0;               // constraint tokens generated: the met phrases' lengths and the progress
  bool sealed = false;            // the last token ended a phrase: the next one may not continue its word
  bool all_met() const {
    return std::all_of(met.begin(), met.end(), [](uint8_t m) { return m != 0; });
  }
};

ConstraintState start_state(const Phrases& phrases) { return {std::vector<uint8_t>(phrases.size(), 0), {}, 0}; }

// One row of the search state: a beam's hypothesis under way (or a sample's), moved as a whole whenever the rows
// are reordered, as the step function's state is.
struct Row {
  int64_t token = -1;            // the token it feeds the next step (BOS first)
  float score = 0;               // its log-probability so far (0 on the raw greedy path; -inf: a dead row)
  std::vector<int32_t> history;  // the tokens it generated
  bool live = true;              // sampling: its sample still runs
  ConstraintState constraints;   // its progress through its sentence's phrases
  // return_attention: its last token's cross-attention, linked to the row it continued (no copy of the rest).
  struct Attended {
    std::vector<float> weights;
    std::shared_ptr<const Attended> before;
  };
  std::shared_ptr<const Attended> attention;
};

// The state after `token`: it extends the phrase under way, else it may start one (progress is lost when a token
// breaks a phrase, as in fairseq: the token is then tried from the root).
ConstraintState advance(const ConstraintState& s, const Phrases& phrases, int32_t token) {
  if (phrases.empty()) return s;
  ConstraintState n = s;
  n.sealed = false;
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
      n.sealed = !longer;
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

// The tokens that advance a state: the next token of each unmet phrase under way, and (when one is under way, or
// none) the first token of each unmet phrase.
void advancing_tokens(const ConstraintState& s, const Phrases& phrases, std::vector<int32_t>& out) {
  out.clear();
  for (size_t i = 0; i < phrases.size(); ++i) {
    const auto& p = phrases[i];
    if (s.met[i]) continue;
    out.push_back(p.front());
    if (!s.progress.empty() && p.size() > s.progress.size() &&
        std::equal(s.progress.begin(), s.progress.end(), p.begin())) {
      out.push_back(p[s.progress.size()]);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
}

// The tokens a hypothesis may not take next under the no-repeat n-gram rule (transformers' NoRepeatNGram): every
// token that followed an earlier occurrence of its last n - 1 tokens.
void ngram_bans(const std::vector<int32_t>& h, int64_t n, std::vector<int32_t>& out) {
  out.clear();
  const auto len = int64_t(h.size());
  if (n <= 0 || len + 1 < n) return;
  for (int64_t i = 0; i + n <= len; ++i) {
    bool match = true;
    for (int64_t j = 0; j + 1 < n && match; ++j) match = h[size_t(i + j)] == h[size_t(len - n + 1 + j)];
    if (match) out.push_back(h[size_t(i + n - 1)]);
  }
}

// A uniform number in [0, 1) for draw `j` of a sentence's seed at its own step `t`.
double uniform(uint64_t seed, int64_t t, int64_t j) {
  return double(Rng::from({seed, uint64_t(t), uint64_t(j)}).next() >> 11) * 0x1.0p-53;
}

// The fused CPU choice, fed row blocks as the step produces them: per row its best allowed tokens as
// log-probabilities (max, sum of exponentials and the best few in passes over the row while it is in cache),
// then a merge per sentence; or, when sampling, each row's draws.
class CandidatePicker {
 public:
  // starts: sentence a's rows are starts[a] .. starts[a + 1] - 1 (sentence-major; one row at a sentence's first
  // step, else k); k: the beam (2k candidates per sentence). raw: candidates carry the raw scores, not
  // log-probabilities (no normalisation pass; the order within a row is the same).
  CandidatePicker(std::vector<int64_t> starts, int64_t k, const StepRules& rules, bool raw = false,
                  const Steering* steer = nullptr)
      : starts_(std::move(starts)), rows_(starts_.back()), k_(k), rules_(rules), raw_(raw), steer_(steer) {
    sentence_of_.resize(size_t(rows_));
    for (size_t a = 0; a + 1 < starts_.size(); ++a) {
      for (int64_t r = starts_[a]; r < starts_[a + 1]; ++r) sentence_of_[size_t(r)] = int64_t(a);
    }
    if (steer_ && steer_->sample) {
      samples_.assign(size_t(rows_ * steer_->samples), Entry{kNegInf, -1});
    } else {
      top_.resize(size_t(rows_ * held_rows()));
    }
    if (steer_ && !steer_->wants.empty()) wanted_.resize(size_t(rows_));
  }

  // block [n, V] float on the CPU: rows first_row .. first_row + n. Steering changes the block's rows in place.
  void add(int64_t first_row, const torch::Tensor& block_in) {
    const torch::Tensor x = block_in.contiguous();  // [n, V]
    const int64_t n = x.size(0), vocab = x.size(1), held = held_rows();
    TORCH_CHECK(first_row >= 0 && first_row + n <= rows_ && (vocab_ < 0 || vocab_ == vocab), "search: a block of ",
                x.sizes(), " at row ", first_row, " of ", rows_);
    vocab_ = vocab;
    float* base = x.data_ptr<float>();
    const kernels::RowLoops loops = row_loops();
    at::parallel_for(0, n, 2, [&](int64_t begin, int64_t end) {  // a row: passes over the vocabulary
      std::vector<int32_t> bans;
      for (int64_t i = begin; i < end; ++i) {
        const int64_t r = first_row + i;
        const int64_t a = sentence_of_[size_t(r)];
        float* row = base + i * vocab;
        if (steer_ && steer_->sample && !(*steer_->rows)[size_t(r)].live) {  // a sample that ended
          for (int64_t j = 0; j < draws(a); ++j) samples_[size_t(r * steer_->samples + j)] = {kNegInf, rules_.eos};
          continue;
        }
        const int32_t forced = rules_.forced[size_t(a)]      ? rules_.eos
                               : rules_.forced_token.empty() ? -1
                                                             : rules_.forced_token[size_t(a)];
        float lse = 0;
        if (forced >= 0) {  // EOS at the limit, or the prefix's token: the model's own log-probability
          TORCH_CHECK(forced < vocab, "search: prefix token ", forced, " outside a vocabulary of ", vocab);
          if (!raw_) lse = log_sum_exp(loops, row, vocab);
          put_forced(r, a, forced, row[forced] - lse);
          continue;
        }
        const bool steer = steer_ && steer_->processors();
        if (steer && !steer_->logits && !raw_) lse = log_sum_exp(loops, row, vocab);  // log-probability domain
        if (steer) process(r, row, vocab, lse, bans);
        if (!raw_ && (!steer || steer_->logits)) lse = log_sum_exp(loops, row, vocab);
        // Never chosen: BOS, pad, unk, EOS before min_len (or before the row's constraints are met).
        const bool eos_banned = (!rules_.eos_banned.empty() && rules_.eos_banned[size_t(a)]) ||
                                (steer_ && !steer_->eos_banned_rows.empty() && steer_->eos_banned_rows[size_t(r)]);
        if (steer_ && !steer_->sealed_rows.empty() && steer_->sealed_rows[size_t(r)] && steer_->continues_word) {
          const auto& glue = *steer_->continues_word;  // a phrase just ended: no piece that continues its word
          for (int64_t t = 0; t < std::min<int64_t>(vocab, int64_t(glue.size())); ++t) {
            if (glue[size_t(t)]) row[t] = kNegInf;
          }
        }
        if (steer_ && !steer_->wants.empty()) {  // the tokens that advance the row's constraints, before the bans
          auto& w = wanted_[size_t(r)];
          w.clear();
          for (const int32_t t : steer_->wants[size_t(r)]) {
            if (t < 0 || t >= vocab || t == rules_.bos || t == rules_.pad || t == rules_.eos) continue;
            if (row[t] != kNegInf) w.push_back({raw_ ? row[t] : row[t] - lse, t});
          }
        }
        if (steer_ && steer_->sample) {
          for (const int32_t t : {rules_.bos, rules_.pad, rules_.unk, eos_banned ? rules_.eos : -1}) {
            if (t >= 0 && t < vocab) row[t] = kNegInf;
          }
          sample(r, row, vocab, lse, loops);
          continue;
        }
        // Banned tokens (at most 4) are filtered from the row's best want + 4.
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
    });
    seen_ += n;
  }

  Candidates finish(const std::vector<float>& prior) {
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

  // Sampling: row r's draw j (its token and log-probability), after every block was added.
  const Entry& drawn(int64_t r, int64_t j) const { return samples_[size_t(r * steer_->samples + j)]; }
  // Row r's best allowed token (index -1: none), and the log-probabilities of the tokens it wants (Steering).
  const Entry& best(int64_t r) const { return top_[size_t(r * held_rows())]; }
  const std::vector<Entry>& wanted(int64_t r) const {
    static const std::vector<Entry> kNone;
    return wanted_.empty() ? kNone : wanted_[size_t(r)];
  }
  int64_t vocab() const { return vocab_; }

 private:
  static constexpr int64_t kHeldExtra = 4;    // BOS, pad, unk, EOS
  static constexpr int64_t kTopLoopMax = 64;  // sampling's top-k through the row loop up to this k
  int64_t held_rows() const { return 2 * k_ + kHeldExtra; }
  // Sampling: the draws of sentence a's rows (all its samples from its one row at its first step, else one each).
  int64_t draws(int64_t a) const {
    return steer_ && steer_->sample && starts_[size_t(a) + 1] - starts_[size_t(a)] == 1 ? steer_->samples : 1;
  }

  static float log_sum_exp(const kernels::RowLoops& loops, const float* row, int64_t vocab) {
    const float max = loops.max(row, vocab);
    if (max == kNegInf) return kNegInf;
    return max + std::log(loops.sum_exp(row, vocab, max));
  }

  void put_forced(int64_t r, int64_t a, int32_t token, float logp) {
    if (steer_ && steer_->sample) {
      for (int64_t j = 0; j < draws(a); ++j) samples_[size_t(r * steer_->samples + j)] = {logp, token};
      return;
    }
    Entry* out = top_.data() + r * held_rows();
    for (int64_t j = 0; j < held_rows(); ++j) out[j] = {kNegInf, -1};
    out[0] = {logp, token};
  }

  // The repetition penalty and the no-repeat n-gram ban on row r: on its logits, or (lse given) on its
  // log-probabilities, written back as the raw scores that give them.
  void process(int64_t r, float* row, int64_t vocab, float lse, std::vector<int32_t>& bans) const {
    const SearchOptions& o = *steer_->options;
    const std::vector<int32_t>& h = (*steer_->rows)[size_t(r)].history;
    if (o.repetition_penalty != 1.0) {
      const auto p = float(o.repetition_penalty);
      std::vector<int32_t> seen(h.begin(), h.end());
      std::sort(seen.begin(), seen.end());
      seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
      for (const int32_t t : seen) {
        if (t < 0 || t >= vocab) continue;
        const float v = row[t] - lse;
        row[t] = (v < 0 ? v * p : v / p) + lse;
      }
    }
    if (o.no_repeat_ngram_size > 0) {
      ngram_bans(h, o.no_repeat_ngram_size, bans);
      for (const int32_t t : bans) {
        if (t >= 0 && t < vocab) row[t] = kNegInf;
      }
    }
  }

  // Row r's draws: temperature, top-k, top-p (transformers' order and definitions), then the inverse of the
  // cumulative distribution at the seed's uniform number. Each draw carries its token's log-probability at
  // temperature 1 over the whole (processed) row.
  void sample(int64_t r, const float* row, int64_t vocab, float lse, const kernels::RowLoops& loops) {
    const SearchOptions& o = *steer_->options;
    const int64_t a = sentence_of_[size_t(r)];
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
    Entry* out = samples_.data() + r * steer_->samples;
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
      const double u = uniform(steer_->seeds[size_t(a)], steer_->own_steps[size_t(a)], draw) * total;
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

  std::vector<int64_t> starts_;       // per sentence, its first row; then the number of rows
  std::vector<int64_t> sentence_of_;  // per row
  int64_t rows_, k_;
  const StepRules& rules_;
  bool raw_;
  const Steering* steer_;
  std::vector<Entry> top_;                  // [rows, held]
  std::vector<Entry> samples_;              // [rows, draws]
  std::vector<std::vector<Entry>> wanted_;  // per row: (log-probability, token) of its wanted tokens
  int64_t vocab_ = -1;
  int64_t seen_ = 0;
};

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

}  // namespace

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
    CandidatePicker picker(std::move(starts), k, rules);
    picker.add(0, scores);
    return picker.finish(prior);
  }
  return candidates_tensor(scores, prior, k, width, rules);
}

void validate(const SearchOptions& o) { config::validate(o); }

bool scores_wanted(bool asked, const config::DecodeConfig& d) {
  return asked || d.nbest > 1 || d.beam > 1 || config::sampling(d);
}

double length_penalty(int64_t length, double alpha) {
  return alpha == 0 ? 1.0 : std::pow((5.0 + double(length)) / 6.0, alpha);
}

std::vector<std::vector<Hypothesis>> beam_search(StepFunction& fn, const std::vector<int64_t>& max_lengths, int32_t bos,
                                                 int32_t eos, const SearchOptions& options, int32_t pad, int32_t unk,
                                                 const SentenceDone& on_done, const Admit& admit,
                                                 const Abandoned& abandoned) {
  SearchInput in;
  for (const int64_t m : max_lengths) in.sentences.push_back({m, {}, 0, {}});
  in.bos = bos;
  in.eos = eos;
  in.pad = pad;
  in.unk = unk;
  in.on_done = on_done;
  in.abandoned = abandoned;
  in.admit = admit;
  return beam_search(fn, options, in);
}

std::vector<std::vector<Hypothesis>> beam_search(StepFunction& fn, const SearchOptions& options,
                                                 const SearchInput& input) {
  validate(options);
  const int32_t bos = input.bos, eos = input.eos, pad = input.pad, unk = input.unk;
  const SentenceDone& on_done = input.on_done;
  const bool sampling = config::sampling(options);
  // Rows per sentence: the beam, or one per sample.
  const int64_t k = sampling ? options.nbest : options.beam;
  const auto batch = int64_t(input.sentences.size());
  std::vector<int64_t> limits;                    // per sentence, admitted ones included
  std::vector<std::vector<int32_t>> prefixes;     // per sentence
  std::vector<uint64_t> seeds;                    // per sentence
  std::vector<Phrases> constraints;               // per sentence
  std::vector<int64_t> starts(size_t(batch), 0);  // per sentence: the step it started at
  bool any_constraints = false;
  const auto add_sentence = [&](const SearchSentence& s) {
    TORCH_CHECK(s.max_length >= 1, "beam_search: max length must be >= 1, got ", s.max_length);
    for (const int32_t t : s.prefix) TORCH_CHECK(t >= 0 && t != eos && t != bos, "beam_search: prefix token ", t);
    Phrases phrases;
    int64_t phrase_tokens = 0;
    for (const auto& p : s.constraints) {
      if (p.empty()) continue;
      for (const int32_t t : p) {
        TORCH_CHECK(t >= 0 && t != eos && t != bos && t != pad, "beam_search: constraint token ", t);
      }
      phrases.push_back(p);
      phrase_tokens += int64_t(p.size());
    }
    if (!phrases.empty() && sampling) {
      throw ConfigError("constraints need beam or greedy search, not sampling (decode.sampling_topk 1)");
    }
    any_constraints = any_constraints || !phrases.empty();
    limits.push_back(std::max<int64_t>(s.max_length, int64_t(s.prefix.size()) + phrase_tokens + 1));
    prefixes.push_back(s.prefix);
    seeds.push_back(s.seed);
    constraints.push_back(std::move(phrases));
  };
  for (const auto& s : input.sentences) add_sentence(s);
  std::vector<std::vector<Hypothesis>> finished(static_cast<size_t>(batch));
  if (batch == 0) return finished;
  // A sentence's search has ended: its hypotheses best first (samples: in draw order), the n best kept.
  const auto conclude = [&](int64_t s) {
    auto& done = finished[size_t(s)];
    if (!sampling) {
      std::stable_sort(done.begin(), done.end(),
                       [](const Hypothesis& x, const Hypothesis& y) { return x.score > y.score; });
    }
    if (!constraints[size_t(s)].empty()) {
      // Hypotheses forced to end at the limit without their phrases come after every one that holds them.
      const Phrases& phrases = constraints[size_t(s)];
      std::stable_partition(done.begin(), done.end(), [&](const Hypothesis& h) {
        ConstraintState c = start_state(phrases);
        for (const int32_t t : h.tokens) c = advance(c, phrases, t);
        return c.all_met();
      });
    }
    if (int64_t(done.size()) > options.nbest) done.resize(size_t(options.nbest));
    if (on_done) on_done(s, done);
  };
  const bool processors = options.repetition_penalty != 1.0 || options.no_repeat_ngram_size > 0;
  bool any_prefix = false;
  for (const auto& p : prefixes) any_prefix = any_prefix || !p.empty();
  // Greedy with nobody reading scores: tokens chosen on the raw scores, every prior 0, hypotheses' scores NaN.
  const bool raw = k == 1 && !sampling && !options.scores && !options.exact_stop;
  constexpr double kNoScore = std::numeric_limits<double>::quiet_NaN();
  // Live state: `active` sentences, widths[a] rows each (sentence-major; row_start[a] is sentence a's first).
  // A sentence's first step scores one row (its k beams would all be that row); its best candidates then fill k
  // rows. Sentences that join later start with one fresh row too, where the step's scores are chosen from on the
  // CPU (the fused path); on the tensor path, which takes one width for all, with k rows, beam 0 live.
  std::vector<int64_t> active(static_cast<size_t>(batch));
  std::iota(active.begin(), active.end(), 0);
  std::vector<int64_t> widths(static_cast<size_t>(batch), 1);
  std::vector<int64_t> row_start;
  const auto lay_out = [&] {
    row_start.assign(1, 0);
    for (const int64_t w : widths) row_start.push_back(row_start.back() + w);
  };
  bool tensor_path = false;  // the last step chose on the tensor path
  // A fresh row of sentence s, from BOS.
  const auto fresh_row = [&](int64_t s, float score) {
    Row row;
    row.token = bos;
    row.score = score;
    row.constraints = start_state(constraints[size_t(s)]);
    return row;
  };
  std::vector<Row> rows_now;
  for (int64_t s = 0; s < batch; ++s) rows_now.push_back(fresh_row(s, 0.0f));
  // Row `row` continued by `token` (its step's attention kept when asked for).
  const auto continued = [&](const Row& row, int64_t s, int32_t token, float score, const torch::Tensor& attn,
                             int64_t r) {
    Row next;
    next.token = token;
    next.score = score;
    next.history = row.history;
    next.history.push_back(token);
    next.constraints = advance(row.constraints, constraints[size_t(s)], token);
    if (attn.defined()) {
      const float* a = attn.data_ptr<float>() + r * attn.size(1);
      next.attention =
          std::make_shared<const Row::Attended>(Row::Attended{std::vector<float>(a, a + attn.size(1)), row.attention});
    }
    return next;
  };
  // A hypothesis ending row `row` (EOS at score `score`).
  const auto ended = [&](const Row& row, float score) {
    Hypothesis h;
    h.tokens = row.history;
    h.score = raw ? kNoScore : double(score) / length_penalty(int64_t(row.history.size()) + 1, options.alpha);
    h.log_prob = raw ? kNoScore : double(score);
    for (const Row::Attended* a = row.attention.get(); a; a = a->before.get()) h.attention.push_back(a->weights);
    std::reverse(h.attention.begin(), h.attention.end());
    return h;
  };
  // Dynamic beam allocation for sentence `s` (active index a): `cands` (its best candidates) grows by each row's
  // best token and every token that advances a row's constraints, and is put in the order in which the beam takes
  // them: grouped into banks by the constraint tokens each would have met, best first within a bank; then the
  // best of every bank (the fullest bank first), the second best of every bank, and so on.
  const auto constrained_order = [&](int64_t a, int64_t s, const CandidatePicker& picker,
                                     const std::vector<float>& prior, int64_t vocab, std::vector<Entry>& cands) {
    const Phrases& phrases = constraints[size_t(s)];
    const auto add = [&](int64_t b, const Entry& e) {
      if (e.index < 0 || e.value == kNegInf) return;
      const float score = prior[size_t(row_start[size_t(a)] + b)] + e.value;
      if (score != kNegInf) cands.push_back({score, b * vocab + e.index});
    };
    for (int64_t b = 0; b < widths[size_t(a)]; ++b) {
      add(b, picker.best(row_start[size_t(a)] + b));
      for (const Entry& e : picker.wanted(row_start[size_t(a)] + b)) add(b, e);
    }
    std::sort(cands.begin(), cands.end(), better);
    cands.erase(
        std::unique(cands.begin(), cands.end(), [](const Entry& x, const Entry& y) { return x.index == y.index; }),
        cands.end());
    // A row's token among both its best and its wanted ones: the same index and score, neighbours after the sort.
    struct Ranked {
      Entry e;
      int64_t bank, rank;
    };
    std::vector<Ranked> ranked;
    for (const Entry& e : cands) {
      const int64_t b = e.index / vocab;
      const auto token = int32_t(e.index % vocab);
      const ConstraintState& from = rows_now[size_t(row_start[size_t(a)] + b)].constraints;
      ranked.push_back({e, token == eos ? from.bank : advance(from, phrases, token).bank, 0});
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
  };

  for (int64_t t = 0; !active.empty(); ++t) {
    if (input.abandoned && t > 0) {
      // Sentences given up on leave the state before this step (from the second on: the first has no rows of
      // its own to drop yet): their rows are dropped, nothing more is computed for them.
      std::vector<int64_t> kept_active, kept_rows, kept_widths;
      lay_out();
      for (size_t a = 0; a < active.size(); ++a) {
        const int64_t s = active[a];
        if (input.abandoned(s)) {
          finished[size_t(s)].clear();
          if (on_done) on_done(s, finished[size_t(s)]);
          continue;
        }
        kept_active.push_back(s);
        kept_widths.push_back(widths[a]);
        for (int64_t j = 0; j < widths[a]; ++j) kept_rows.push_back(row_start[a] + j);
      }
      if (kept_active.empty()) break;
      if (kept_active.size() < active.size()) {
        std::vector<Row> kept;
        for (const int64_t r : kept_rows) kept.push_back(std::move(rows_now[size_t(r)]));
        fn.reorder(torch::tensor(kept_rows, torch::kLong), false);
        active = std::move(kept_active);
        widths = std::move(kept_widths);
        rows_now = std::move(kept);
      }
    }
    const auto n_active = int64_t(active.size());
    lay_out();
    const int64_t rows = row_start.back();
    // Never generated: BOS (and pad and unk, when given), whatever mass the model (label smoothing) gives them.
    // Sentences at their length limit may only end, min_len or not: the limit wins. A prefix forces its tokens.
    StepRules rules;
    rules.bos = bos;
    rules.eos = eos;
    rules.pad = pad;
    rules.unk = unk;
    Steering steer;
    steer.options = &options;
    steer.logits = k == 1 || sampling;
    steer.sample = sampling;
    steer.samples = k;
    steer.rows = &rows_now;
    for (int64_t a = 0; a < n_active; ++a) {
      const auto s = size_t(active[size_t(a)]);
      const int64_t own = t - starts[s];  // the sentence's own step
      rules.forced.push_back(own + 1 >= limits[s] ? 1 : 0);
      if (options.min_len > 0) rules.eos_banned.push_back(own < options.min_len ? 1 : 0);
      if (any_prefix) rules.forced_token.push_back(own < int64_t(prefixes[s].size()) ? prefixes[s][size_t(own)] : -1);
      if (sampling) {
        steer.seeds.push_back(seeds[s]);
        steer.own_steps.push_back(own);
      }
    }
    if (any_constraints) {
      // Per row: EOS until its phrases are met, and the log-probabilities of the tokens that advance them.
      steer.eos_banned_rows.resize(size_t(rows));
      steer.wants.resize(size_t(rows));
      if (!input.continues_word.empty()) {
        steer.sealed_rows.resize(size_t(rows));
        steer.continues_word = &input.continues_word;
      }
      for (int64_t r = 0; r < rows; ++r) {
        const auto a = size_t(std::upper_bound(row_start.begin(), row_start.end(), r) - row_start.begin()) - 1;
        const Phrases& phrases = constraints[size_t(active[a])];
        const ConstraintState& c = rows_now[size_t(r)].constraints;
        steer.eos_banned_rows[size_t(r)] = c.all_met() ? 0 : 1;
        if (!steer.sealed_rows.empty()) steer.sealed_rows[size_t(r)] = c.sealed ? 1 : 0;
        advancing_tokens(c, phrases, steer.wants[size_t(r)]);
      }
    }
    // CPU float scores are reduced block by block as they come; others (GPU, half) are kept for the tensor path,
    // unless the step is steered (prefixes, processors, sampling, constraints): those blocks are brought to the CPU
    // in float.
    const bool steered = sampling || processors || any_prefix || any_constraints;
    CandidatePicker picker(row_start, k, rules, raw, steered ? &steer : nullptr);
    std::vector<torch::Tensor> kept;  // [n, V] blocks off the fused path
    int64_t vocab = -1, covered = 0;
    bool fused = true;
    std::vector<int64_t> tokens;
    for (const Row& row : rows_now) tokens.push_back(row.token);
    fn.step_blocks(torch::tensor(tokens, torch::kLong), kBlockRows, [&](int64_t first, const torch::Tensor& block) {
      TORCH_CHECK(block.dim() == 2 && first == covered && first + block.size(0) <= rows &&
                      (vocab < 0 || vocab == block.size(1)),
                  "beam_search: step returned ", block.sizes(), " at row ", first, " for ", rows, " rows");
      vocab = block.size(1);
      if (!sampling && vocab < 2 * k) {
        throw ConfigError("beam " + std::to_string(k) + " needs a target vocabulary of at least " +
                          std::to_string(2 * k) + " pieces; this model has " + std::to_string(vocab) +
                          ": use a beam of at most " + std::to_string(vocab / 2));
      }
      TORCH_CHECK(bos < vocab && eos < vocab, "beam_search: BOS/EOS outside a vocabulary of ", vocab);
      if (first == 0) fused = steered || (block.device().is_cpu() && block.scalar_type() == torch::kFloat);
      covered += block.size(0);
      if (fused) {
        // A copy when steered and the block is already CPU float: steering writes into the rows.
        torch::Tensor cpu = block.to(torch::kCPU, torch::kFloat);
        if (steered && cpu.data_ptr() == block.data_ptr()) cpu = cpu.clone();
        picker.add(first, cpu);
      } else {
        kept.push_back(block);
      }
    });
    TORCH_CHECK(covered == rows, "beam_search: step returned scores for ", covered, " of ", rows, " rows");
    // The step's cross-attention, [rows, source positions] on the CPU in float, when asked for.
    torch::Tensor attn;
    if (options.return_attention) {
      attn = fn.attention();
      TORCH_CHECK(attn.defined() && attn.dim() == 2 && attn.size(0) == rows,
                  "beam_search: return_attention, but the step function gave no attention for its ", rows, " rows");
      attn = attn.to(torch::kCPU, torch::kFloat).contiguous();
    }

    std::vector<int64_t> next_active, keep_rows;
    std::vector<Row> next_rows;
    if (sampling) {
      // Each row continues its own sample: sample j of a sentence is row j (at its first step, draw j of its one
      // row). A sample that draws EOS ends; its row stays as a dead one until the sentence's last sample ends.
      for (int64_t a = 0; a < n_active; ++a) {
        const int64_t s = active[size_t(a)];
        auto& done = finished[size_t(s)];
        bool any = false;
        std::vector<int64_t> rows_a;
        std::vector<Row> next_a;
        for (int64_t j = 0; j < k; ++j) {
          const int64_t w = widths[size_t(a)];
          const int64_t r = row_start[size_t(a)] + (w == 1 ? 0 : j);
          const int64_t draw = w == 1 ? j : 0;
          const Row& row = rows_now[size_t(r)];
          Row dead;
          dead.token = eos;
          dead.score = kNegInf;
          dead.live = false;
          dead.history = row.history;
          rows_a.push_back(r);
          if (!row.live) {
            next_a.push_back(std::move(dead));
            continue;
          }
          const Entry& e = picker.drawn(r, draw);
          const float score = row.score + e.value;
          if (e.index == eos || e.value == kNegInf) {
            // Sample j's slot: the samples are returned in draw order, whichever ends first.
            if (int64_t(done.size()) < k) done.resize(size_t(k));
            done[size_t(j)] = ended(row, score);
            next_a.push_back(std::move(dead));
            continue;
          }
          any = true;
          next_a.push_back(continued(row, s, int32_t(e.index), score, attn, r));
        }
        if (!any) {
          conclude(s);
          continue;
        }
        next_active.push_back(s);
        keep_rows.insert(keep_rows.end(), rows_a.begin(), rows_a.end());
        for (Row& row : next_a) next_rows.push_back(std::move(row));
      }
    } else {
      TORCH_CHECK(fused || std::all_of(widths.begin(), widths.end(), [&](int64_t w) { return w == widths.front(); }),
                  "beam_search: the tensor path needs one width for every sentence");
      std::vector<float> prior;
      for (const Row& row : rows_now) prior.push_back(row.score);
      const Candidates top =
          fused ? picker.finish(prior) : best_candidates(torch::cat(kept, 0), prior, k, rules, false, widths.front());
      const auto sc = top.scores.accessor<float, 2>();  // [A, 2k]
      const auto ix = top.indices.accessor<int64_t, 2>();
      std::vector<Entry> cands;  // a sentence's candidates in the order they take the beam: (score, beam * V + token)
      for (int64_t a = 0; a < n_active; ++a) {
        const int64_t s = active[size_t(a)];
        auto& done = finished[size_t(s)];
        cands.clear();
        for (int64_t c = 0; c < 2 * k && sc[a][c] != kNegInf; ++c) cands.push_back({sc[a][c], ix[a][c]});
        if (any_constraints && !constraints[size_t(s)].empty()) {
          constrained_order(a, s, picker, prior, vocab, cands);
        }
        std::vector<int64_t> chosen;  // candidate positions continuing
        for (int64_t c = 0; c < int64_t(cands.size()) && int64_t(chosen.size()) < k; ++c) {
          const float score = cands[size_t(c)].value;
          if (score == kNegInf) break;
          const int64_t beam = cands[size_t(c)].index / vocab, token = cands[size_t(c)].index % vocab;
          if (token == eos) {
            // Like fairseq: an EOS counts only among the k best candidates.
            if (c < k) done.push_back(ended(rows_now[size_t(row_start[size_t(a)] + beam)], score));
          } else {
            chosen.push_back(c);
          }
        }
        if (chosen.empty()) {  // sentence finished: nothing left alive
          conclude(s);
          continue;
        }
        if (int64_t(done.size()) >= k) {
          if (!options.exact_stop) {  // finished: `beam` hypotheses ended (the first-k rule)
            conclude(s);
            continue;
          }
          // Exact: finished unless a live hypothesis can still beat the k-th best finished one. Its score
          // can only fall with more tokens, the length penalty only grow up to the sentence's limit.
          std::vector<double> ended_scores;
          for (const auto& h : done) ended_scores.push_back(h.score);
          std::nth_element(ended_scores.begin(), ended_scores.begin() + (k - 1), ended_scores.end(),
                           std::greater<double>());
          const double kth = ended_scores[size_t(k - 1)];
          double best_live = kNegInf;  // constrained candidates need not come best first
          for (const int64_t c : chosen) best_live = std::max(best_live, double(cands[size_t(c)].value));
          if (best_live / length_penalty(limits[size_t(s)], options.alpha) <= kth) {
            conclude(s);
            continue;
          }
        }
        next_active.push_back(s);
        for (int64_t j = 0; j < k; ++j) {
          // Fewer than k live candidates (tiny vocabularies, a forced token): repeat the last one as a dead row.
          const Entry& e = cands[size_t(chosen[size_t(std::min<int64_t>(j, int64_t(chosen.size()) - 1))])];
          const int64_t r = row_start[size_t(a)] + e.index / vocab;
          const float score = raw ? 0.0f : j < int64_t(chosen.size()) ? e.value : kNegInf;
          keep_rows.push_back(r);
          next_rows.push_back(continued(rows_now[size_t(r)], s, int32_t(e.index % vocab), score, attn, r));
        }
      }
    }
    // Sentences joining: each one fresh row (rows + i in the reorder) from BOS; on the tensor path k of it, beam 0
    // live (every sample live).
    tensor_path = !sampling && !fused;
    std::vector<int64_t> next_widths(next_active.size(), k);
    const std::vector<SearchSentence> joined =
        input.admit ? input.admit(int64_t(next_active.size())) : std::vector<SearchSentence>{};
    for (size_t i = 0; i < joined.size(); ++i) {
      add_sentence(joined[i]);
      any_prefix = any_prefix || !joined[i].prefix.empty();
      const auto s = int64_t(finished.size());
      next_active.push_back(s);
      finished.emplace_back();
      starts.push_back(t + 1);
      const int64_t w = tensor_path ? k : 1;
      next_widths.push_back(w);
      for (int64_t j = 0; j < w; ++j) {
        keep_rows.push_back(rows + int64_t(i));
        next_rows.push_back(fresh_row(s, j == 0 || sampling ? 0.0f : kNegInf));
      }
    }
    if (next_active.empty()) break;
    const bool all_k = std::all_of(widths.begin(), widths.end(), [k](int64_t w) { return w == k; });
    fn.reorder(torch::tensor(keep_rows, torch::kLong), joined.empty() && next_active.size() == active.size() && all_k);
    widths = std::move(next_widths);
    active = std::move(next_active);
    rows_now = std::move(next_rows);
  }
  return finished;
}

}  // namespace mtx::decode
