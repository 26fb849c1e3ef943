#include "mtx/decode/search.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "mtx/util/errors.h"
#include "search_parts.h"

namespace mtx::decode {

void validate(const SearchOptions& o) { config::validate(o); }

bool scores_wanted(bool asked, const config::DecodeConfig& d) {
  return asked || d.nbest > 1 || d.beam > 1 || config::sampling(d);
}

double length_penalty(int64_t length, double alpha) {
  return alpha == 0 ? 1.0 : std::pow((5.0 + double(length)) / 6.0, alpha);
}

double normalized_score(double log_prob, int64_t length, const config::DecodeConfig& o) {
  const double penalized = o.word_penalty == 0 ? log_prob : log_prob - o.word_penalty * double(length);
  if (o.normalize > 0) return penalized / std::pow(double(length), o.normalize);
  return penalized / length_penalty(length, o.alpha);
}

namespace search_parts {

namespace {
// Rows per block of the vocabulary projection (search.h, step_blocks): a 256 x 8k block is 8 MB.
constexpr int64_t kBlockRows = 256;
constexpr double kNoScore = std::numeric_limits<double>::quiet_NaN();
}  // namespace

SearchRun::SearchRun(StepFunction& fn, const SearchOptions& options, const SearchInput& input)
    : fn_(fn), options_(options), input_(input) {
  validate(options);
  sampling_ = config::sampling(options);
  k_ = sampling_ ? options.nbest : options.beam;
  // Greedy with nobody reading scores: tokens chosen on the raw scores, every prior 0, hypotheses' scores NaN.
  raw_ = k_ == 1 && !sampling_ && !options.scores && !options.exact_stop;
  strategy_ = make_strategy(options);
  for (const auto& s : input.sentences) add_sentence(s, 0);
  processors_ = make_processors(options, any_suppress_);
}

void SearchRun::add_sentence(const SearchSentence& s, int64_t start) {
  const int32_t bos = input_.bos, eos = input_.eos, pad = input_.pad;
  TORCH_CHECK(s.max_length >= 1, "beam_search: max length must be >= 1, got ", s.max_length);
  for (const int32_t t : s.prefix) TORCH_CHECK(t >= 0 && t != eos && t != bos, "beam_search: prefix token ", t);
  TORCH_CHECK(s.spans.empty() || s.spans.size() == s.constraints.size(), "beam_search: ", s.spans.size(), " spans for ",
              s.constraints.size(), " constraints");
  Sentence n;
  int64_t phrase_tokens = 0;
  bool tied = false;
  for (size_t i = 0; i < s.constraints.size(); ++i) {
    const auto& p = s.constraints[i];
    if (p.empty()) continue;
    for (const int32_t t : p) {
      TORCH_CHECK(t >= 0 && t != eos && t != bos && t != pad, "beam_search: constraint token ", t);
    }
    n.constraints.push_back(p);
    n.stands_for.push_back(int64_t(i));  // for now: the index it was given at
    n.spans.push_back(s.spans.empty() ? std::pair<int64_t, int64_t>{-1, -1} : s.spans[i]);
    n.span_words.push_back(i < s.span_words.size() ? s.span_words[i] : std::vector<int32_t>{});
    tied = tied || n.spans.back().first >= 0;
    phrase_tokens += int64_t(p.size());
  }
  if (!tied) {
    n.spans.clear();
    n.span_words.clear();
  }
  any_tied_ = any_tied_ || tied;
  n.unforced = tied && input_.rejoin && !sampling_ &&
               std::all_of(n.spans.begin(), n.spans.end(), [](const auto& span) { return span.first >= 0; });
  add_forms(s, n);
  if (!n.constraints.empty() && sampling_) {
    throw ConfigError("constraints need beam or greedy search, not sampling (decode.sampling_topk 1)");
  }
  for (const auto& q : s.suppress) {
    for (const int32_t t : q) TORCH_CHECK(t >= 0, "beam_search: suppressed token ", t);
    if (!q.empty()) n.suppress.push_back(q);
  }
  const bool had_suppress = any_suppress_;
  any_constraints_ = any_constraints_ || !n.constraints.empty();
  any_prefix_ = any_prefix_ || !s.prefix.empty();
  any_suppress_ = any_suppress_ || !n.suppress.empty();
  // A sentence admitted with the first suppressed sequences: the processors gain theirs.
  if (any_suppress_ && !had_suppress && start > 0) processors_ = make_processors(options_, true);
  n.limit = std::max<int64_t>(s.max_length, int64_t(s.prefix.size()) + phrase_tokens + 1);
  n.prefix = s.prefix;
  n.source_words = s.source_words;
  n.seed = s.seed;
  n.start = start;
  n.beam_left = k_;
  sentences_.push_back(std::move(n));
  finished_.emplace_back();
}

// Unforced, the sentence's tied phrases' other forms (SearchSentence::forms) follow its own phrases, each with its
// phrase's span and its own words (Sentence::stands_for).
void SearchRun::add_forms(const SearchSentence& s, Sentence& n) const {
  const std::vector<int64_t> given = std::move(n.stands_for);  // per phrase kept, its index in `s`
  n.stands_for.clear();
  n.own = n.constraints.size();
  if (!n.unforced || s.forms.empty()) return;
  for (size_t j = 0; j < n.own; ++j) {
    const auto i = size_t(given[j]);
    for (size_t f = 0; i < s.forms.size() && f < s.forms[i].size(); ++f) {
      const SearchSentence::Form& form = s.forms[i][f];
      if (form.tokens.empty()) continue;
      for (const int32_t t : form.tokens) {
        TORCH_CHECK(t >= 0 && t != input_.eos && t != input_.bos && t != input_.pad, "beam_search: form token ", t);
      }
      if (n.stands_for.empty()) {
        for (size_t k = 0; k < n.own; ++k) n.stands_for.push_back(int64_t(k));
      }
      n.constraints.push_back(form.tokens);
      n.spans.push_back(n.spans[j]);
      n.span_words.resize(n.constraints.size() - 1);
      n.span_words.push_back(form.span_words);
      n.stands_for.push_back(int64_t(j));
    }
  }
}

void SearchRun::conclude(int64_t s) {
  auto& done = finished_[size_t(s)];
  if (!sampling_) {
    std::stable_sort(done.begin(), done.end(),
                     [](const Hypothesis& x, const Hypothesis& y) { return x.score > y.score; });
  }
  const Phrases& phrases = sentences_[size_t(s)].constraints;
  if (!phrases.empty()) {
    // Hypotheses forced to end at the limit without their phrases come after every one that holds them.
    const auto holding = std::stable_partition(done.begin(), done.end(), [&](const Hypothesis& h) {
      ConstraintState c = start_state(phrases);
      for (const int32_t t : h.tokens) c = sentences_[size_t(s)].advance(c, t);
      return c.all_met();
    });
    if (sentences_[size_t(s)].unforced) {  // those that hold them, else a forced search
      if (holding == done.begin()) {
        retry(s);
        return;
      }
      done.erase(holding, done.end());
    }
  }
  if (int64_t(done.size()) > options_.nbest) done.resize(size_t(options_.nbest));
  if (input_.on_done) input_.on_done(s, done);
}

void SearchRun::retry(int64_t s) {
  Sentence& sentence = sentences_[size_t(s)];
  // Once more unforced with the model's own words for the spans where the first search found them, else forced.
  const bool own = sentence.own_words.empty() && size_t(s) < own_words_.size() &&
                   std::any_of(own_words_[size_t(s)].second.begin(), own_words_[size_t(s)].second.end(),
                               [](int32_t t) { return t >= 0; });
  if (own) sentence.own_words = own_words_[size_t(s)].second;
  sentence.unforced = own;
  if (!own) sentence.drop_forms();
  sentence.beam_left = k_;
  finished_[size_t(s)].clear();
  retry_.push_back(s);
}

Row SearchRun::fresh_row(int64_t s, float score) const {
  Row row;
  row.token = input_.bos;
  row.score = score;
  row.constraints = start_state(sentences_[size_t(s)].constraints);
  return row;
}

Row SearchRun::continued(const Row& row, int64_t s, int32_t token, float score, const torch::Tensor& attention,
                         int64_t r) const {
  Row next;
  next.token = token;
  next.score = score;
  next.history = row.history;
  next.displaced = row.displaced;
  next.peaks = row.peaks;
  next.own_peaks = row.own_peaks;
  const Phrases& phrases = sentences_[size_t(s)].constraints;
  const ConstraintStep* c = constraint_step_.get();
  const bool displacing = c && !c->displaced.empty() && c->displaced[size_t(r)] >= 0 &&
                          (c->displaced_if[size_t(r)] < 0 || token == c->displaced_if[size_t(r)]);
  const int64_t placed = displacing && c->displaced_if[size_t(r)] >= 0 ? c->placed[size_t(r)] : -1;
  int64_t shown = 1;  // tokens shown (each carries this step's attention)
  if (placed >= 0) {
    // The term is shown in place of the model's word, and the model is fed its word: the search goes on as the
    // model goes on after its own word (and the hypothesis scores what the model wrote).
    next.token = c->displaced[size_t(r)];
    next.constraints = row.constraints;
    for (const int32_t t : phrases[size_t(placed)]) {
      next.history.push_back(t);
      next.constraints = sentences_[size_t(s)].advance(next.constraints, t);
    }
    next.constraints.sealed = false;  // the model may finish its word: those pieces are not shown
    next.constraints.just_met = -1;
    next.shadow = int32_t(placed);
    next.fed = {int32_t(next.token)};
    shown = int64_t(phrases[size_t(placed)].size());
  } else if (row.shadow >= 0 && c && shadowed(row, s, token, *c, r)) {
    shown = under_shadow(row, s, token, *c, r, next);
  } else {
    next.history.push_back(token);
    next.constraints = sentences_[size_t(s)].advance(row.constraints, token);
    if (sentences_[size_t(s)].unforced && c && c->attention.defined() && starts_word(token)) {
      next.peaks.resize(phrases.size(), {0.f, -1});  // where each span's attention peaks (Row::peaks)
      next.own_peaks.resize(phrases.size(), {0.f, -1});
      const Sentence& sentence = sentences_[size_t(s)];
      for (size_t i = 0; i < phrases.size(); ++i) {
        const float share = c->share(r, int64_t(i));
        const std::pair<float, int32_t> here{share, int32_t(next.history.size()) - 1};
        if (share > next.peaks[i].first) next.peaks[i] = here;
        if (share > next.own_peaks[i].first && sentence.span_word(i, token)) next.own_peaks[i] = here;
      }
    }
  }
  if (displacing) next.displaced.push_back(c->displaced[size_t(r)]);  // a tied phrase took the model's token's place
  next.attention = row.attention;
  if (options_.return_attention && attention.defined()) {
    const float* a = attention.data_ptr<float>() + r * attention.size(1);
    for (int64_t i = 0; i < shown; ++i) {
      next.attention = std::make_shared<const Row::Attended>(
          Row::Attended{std::vector<float>(a, a + attention.size(1)), next.attention});
    }
  }
  return next;
}

bool SearchRun::continues_word(int32_t token) const {
  const auto& glue = input_.continues_word;
  return size_t(token) < glue.size() && glue[size_t(token)];
}

bool SearchRun::starts_word(int32_t token) const {
  const auto& starts = input_.starts_word;
  return starts.empty() || (size_t(token) < starts.size() && starts[size_t(token)]);
}

// Under a shown term (Row::shadow): a piece that continues the model's word, or a word the model writes while it
// still attends to the term's source words, and that is one of its own words for them where those are known
// (Sentence::span_words: "young" "boys" for "Jungen", not "is" after "hat" for "Hut").
bool SearchRun::shadowed(const Row& row, int64_t s, int32_t token, const ConstraintStep& c, int64_t r) const {
  if (continues_word(token)) return true;
  if (!starts_word(token) || !c.attends(r, row.shadow)) return false;
  const Sentence& sentence = sentences_[size_t(s)];
  const auto phrase = size_t(row.shadow);
  return phrase >= sentence.span_words.size() || sentence.span_words[phrase].empty() ||
         sentence.span_word(phrase, token);
}

// The rest of the model's word, or a word the model writes while it still attends to the term's source words: fed,
// not shown. That second word is the model's word for them, and the word the term took the place of came before it
// ("a" "child", "young" "boys" for "Jungen"): that one is shown before the term, once.
int64_t SearchRun::under_shadow(const Row& row, int64_t s, int32_t token, const ConstraintStep& c, int64_t r,
                                Row& next) const {
  next.constraints = row.constraints;
  next.shadow = row.shadow;
  next.revealed = row.revealed;
  if (row.revealed) return 0;
  if (continues_word(token)) {
    next.fed = row.fed;
    next.fed.push_back(token);
    return 0;
  }
  next.revealed = true;  // decided at the model's next word
  if (!starts_word(token) || row.fed.empty() || c.share(r, row.shadow) < ConstraintStep::kFirmAttention) return 0;
  // The word the term took the place of is the model's own word for its span (Sentence::span_words): not shown.
  if (sentences_[size_t(s)].span_word(size_t(row.shadow), row.fed.front())) return 0;
  const auto term = int64_t(sentences_[size_t(s)].constraints[size_t(row.shadow)].size());
  next.history.insert(next.history.end() - term, row.fed.begin(), row.fed.end());
  const auto ban = std::find(next.displaced.rbegin(), next.displaced.rend(), row.fed.front());
  if (ban != next.displaced.rend()) next.displaced.erase(std::next(ban).base());
  return int64_t(row.fed.size());
}

Hypothesis SearchRun::ended(const Row& row, int64_t s, float score, bool eos) {
  Hypothesis h;
  h.tokens = row.history;
  const auto length = int64_t(row.history.size()) + (eos ? 1 : 0);
  h.score = raw_ ? kNoScore : normalized_score(double(score), length, options_);
  h.log_prob = raw_ ? kNoScore : double(score);
  for (const Row::Attended* a = row.attention.get(); a; a = a->before.get()) h.attention.push_back(a->weights);
  std::reverse(h.attention.begin(), h.attention.end());
  if (sentences_[size_t(s)].unforced && !row.constraints.all_met()) note_own_words(row, s, raw_ ? 0 : h.score);
  return h;
}

void SearchRun::note_own_words(const Row& row, int64_t s, double score) {
  if (own_words_.size() <= size_t(s)) own_words_.resize(size_t(s) + 1, {-std::numeric_limits<double>::infinity(), {}});
  auto& [best, words] = own_words_[size_t(s)];
  if (!words.empty() && score <= best) return;
  best = score;
  words.assign(sentences_[size_t(s)].constraints.size(), -1);
  for (size_t i = 0; i < row.peaks.size() && i < words.size(); ++i) {
    // One of the model's own words for the span where it wrote one (Sentence::span_words), else the word the span
    // held the most attention for. The first step's attention does not tell the word it writes (as for
    // CandidatePicker::displace).
    const int32_t at =
        i < row.own_peaks.size() && row.own_peaks[i].second >= 0 ? row.own_peaks[i].second : row.peaks[i].second;
    if (at == 0 && sentences_[size_t(s)].spans[i].first > 0) continue;
    if (!row.constraints.met[i] && at >= 0) words[i] = row.history[size_t(at)];
  }
  // A phrase's other forms take the place of the word their phrase does.
  const Sentence& sentence = sentences_[size_t(s)];
  for (size_t i = sentence.own; i < sentence.stands_for.size() && i < words.size(); ++i) {
    words[i] = words[size_t(sentence.stands_for[i])];
  }
}

// Sentences given up on leave the state before a step (from the second on: the first has no rows of its own to
// drop yet): their rows are dropped, nothing more is computed for them. False: none is left.
bool SearchRun::drop_abandoned() {
  std::vector<int64_t> kept_active, kept_rows, kept_widths;
  live_.lay_out();
  for (size_t a = 0; a < live_.active.size(); ++a) {
    const int64_t s = live_.active[a];
    if (input_.abandoned(s)) {
      finished_[size_t(s)].clear();
      if (input_.on_done) input_.on_done(s, finished_[size_t(s)]);
      continue;
    }
    kept_active.push_back(s);
    kept_widths.push_back(live_.widths[a]);
    for (int64_t j = 0; j < live_.widths[a]; ++j) kept_rows.push_back(live_.row_start[a] + j);
  }
  if (kept_active.empty()) return false;
  if (kept_active.size() < live_.active.size()) {
    std::vector<Row> kept;
    for (const int64_t r : kept_rows) kept.push_back(std::move(live_.rows[size_t(r)]));
    fn_.reorder(torch::tensor(kept_rows, torch::kLong), false);
    live_.active = std::move(kept_active);
    live_.widths = std::move(kept_widths);
    live_.rows = std::move(kept);
  }
  return true;
}

// Step t's rules and steering. Never generated: BOS (and pad and unk, when given), whatever mass the model (label
// smoothing) gives them. Sentences at their length limit may only end, min_len or not: the limit wins. A prefix
// forces its tokens.
void SearchRun::make_rules(int64_t t) {
  t_ = t;
  rules_ = StepRules{};
  rules_.bos = input_.bos;
  rules_.eos = input_.eos;
  rules_.pad = input_.pad;
  rules_.unk = input_.unk;
  steer_ = Steering{};
  steer_.processors = processors_.empty() ? nullptr : &processors_;
  steer_.logits = k_ == 1 || sampling_;
  steer_.rows = &live_.rows;
  sampling_step_ = SamplingStep{&options_, k_, {}, {}};
  for (const int64_t s : live_.active) {
    const Sentence& sentence = sentences_[size_t(s)];
    const int64_t own = t - sentence.start;  // the sentence's own step
    rules_.forced.push_back(own + 1 >= sentence.limit && !cut_at_limit() ? 1 : 0);
    if (options_.min_len > 0) rules_.eos_banned.push_back(own < options_.min_len ? 1 : 0);
    if (any_prefix_) {
      rules_.forced_token.push_back(own < int64_t(sentence.prefix.size()) ? sentence.prefix[size_t(own)] : -1);
    }
    if (sampling_) {
      sampling_step_.seeds.push_back(sentence.seed);
      sampling_step_.own_steps.push_back(own);
    }
    steer_.sentences.push_back(&sentence);
  }
  if (sampling_) steer_.sampling = &sampling_step_;
  constraint_step_.reset();
  if (any_constraints_) {
    constraint_step_ =
        std::make_unique<ConstraintStep>(live_, sentences_, input_.continues_word, input_.starts_word, !no_attention_);
    steer_.constraints = constraint_step_.get();
  }
}

bool SearchRun::steered() const { return sampling_ || !processors_.empty() || any_prefix_ || any_constraints_; }

// Tied phrases (SearchSentence::spans) read the step's attention as its rows are scored: taken from the step
// function (StepFunction::tie_attention) as its first block comes (none: the phrases act untied).
void SearchRun::tie_to_attention(int64_t rows) {
  const torch::Tensor attn = fn_.tie_attention();
  no_attention_ = !attn.defined();
  if (!attn.defined() || !constraint_step_) {
    if (constraint_step_) constraint_step_->held_first.clear();
    return;
  }
  TORCH_CHECK(attn.dim() == 2 && attn.size(0) == rows, "beam_search: attention for ", attn.sizes(), " of ", rows,
              " rows");
  constraint_step_->set_attention(attn.to(torch::kCPU, torch::kFloat).contiguous());
  constraint_step_->displaced.assign(size_t(rows), -1);
  constraint_step_->displaced_if.assign(size_t(rows), -1);
  constraint_step_->placed.assign(size_t(rows), -1);
}

// The step's scores: CPU float blocks reduced by `picker` as they come; others (GPU, half) kept for the tensor
// path, unless the step is steered (prefixes, processors, sampling, constraints): those blocks are brought to the
// CPU in float.
Scored SearchRun::score_step(CandidatePicker& picker) {
  const int64_t rows = live_.row_start.back();
  const bool steered_step = steered();
  Scored scored{picker};
  int64_t covered = 0;
  std::vector<int64_t> tokens;
  for (const Row& row : live_.rows) tokens.push_back(row.token);
  fn_.step_blocks(torch::tensor(tokens, torch::kLong), kBlockRows, [&](int64_t first, const torch::Tensor& block) {
    TORCH_CHECK(block.dim() == 2 && first == covered && first + block.size(0) <= rows &&
                    (scored.vocab < 0 || scored.vocab == block.size(1)),
                "beam_search: step returned ", block.sizes(), " at row ", first, " for ", rows, " rows");
    const int64_t vocab = scored.vocab = block.size(1);
    if (!sampling_ && vocab < 2 * k_) {
      throw ConfigError("beam " + std::to_string(k_) + " needs a target vocabulary of at least " +
                        std::to_string(2 * k_) + " pieces; this model has " + std::to_string(vocab) +
                        ": use a beam of at most " + std::to_string(vocab / 2));
    }
    TORCH_CHECK(input_.bos < vocab && input_.eos < vocab, "beam_search: BOS/EOS outside a vocabulary of ", vocab);
    if (first == 0) scored.fused = steered_step || (block.device().is_cpu() && block.scalar_type() == torch::kFloat);
    if (first == 0 && any_tied_) tie_to_attention(rows);
    covered += block.size(0);
    if (!scored.fused) {
      scored.kept.push_back(block);
      return;
    }
    // A copy when steered and the block is already CPU float: steering writes into the rows.
    torch::Tensor cpu = block.to(torch::kCPU, torch::kFloat);
    if (steered_step && cpu.data_ptr() == block.data_ptr()) cpu = cpu.clone();
    picker.add(first, cpu);
  });
  TORCH_CHECK(covered == rows, "beam_search: step returned scores for ", covered, " of ", rows, " rows");
  if (options_.return_attention) {  // [rows, source positions], CPU float
    torch::Tensor attn = fn_.attention();
    TORCH_CHECK(attn.defined() && attn.dim() == 2 && attn.size(0) == rows,
                "beam_search: return_attention, but the step function gave no attention for its ", rows, " rows");
    scored.attention = attn.to(torch::kCPU, torch::kFloat).contiguous();
  }
  return scored;
}

// Sentences joining after step t (which scored `scored_rows` rows): each one fresh row (scored_rows + i in the
// reorder) from BOS; on the tensor path k of it, beam 0 live (every sample live). Then the step function's state
// follows the next rows. False: no sentence is left.
bool SearchRun::admit(int64_t t, int64_t scored_rows, Next& next) {
  std::vector<int64_t> next_widths(next.active.size(), k_);
  int64_t joining = 0;  // sentences whose source the step function appended to its state, in order
  const auto start = [&](int64_t s) {
    next.active.push_back(s);
    const int64_t w = tensor_path_ ? k_ : 1;
    next_widths.push_back(w);
    for (int64_t j = 0; j < w; ++j) {
      next.keep_rows.push_back(scored_rows + joining);
      next.rows.push_back(fresh_row(s, j == 0 || sampling_ ? 0.0f : kNegInf));
    }
    ++joining;
  };
  for (const int64_t s : retry_) {  // searched again (retry), as sentences that join are
    input_.rejoin(s);
    sentences_[size_t(s)].start = t + 1;
    start(s);
  }
  retry_.clear();
  const std::vector<SearchSentence> joined =
      input_.admit ? input_.admit(int64_t(next.active.size())) : std::vector<SearchSentence>{};
  for (const SearchSentence& sentence : joined) {
    add_sentence(sentence, t + 1);
    start(int64_t(sentences_.size()) - 1);
  }
  if (next.active.empty()) return false;
  const bool all_k = std::all_of(live_.widths.begin(), live_.widths.end(), [this](int64_t w) { return w == k_; });
  fn_.reorder(torch::tensor(next.keep_rows, torch::kLong),
              joining == 0 && next.active.size() == live_.active.size() && all_k);
  live_.widths = std::move(next_widths);
  live_.active = std::move(next.active);
  live_.rows = std::move(next.rows);
  return true;
}

// Live state: a sentence's first step scores one row (its k beams would all be that row); its best candidates
// then fill k rows. Sentences that join later start with one fresh row too, where the step's scores are chosen
// from on the CPU (the fused path); on the tensor path, which takes one width for all, with k rows, beam 0 live.
std::vector<std::vector<Hypothesis>> SearchRun::run() {
  const auto batch = int64_t(sentences_.size());
  if (batch == 0) return std::move(finished_);
  live_.active.resize(size_t(batch));
  std::iota(live_.active.begin(), live_.active.end(), 0);
  live_.widths.assign(size_t(batch), 1);
  for (int64_t s = 0; s < batch; ++s) live_.rows.push_back(fresh_row(s, 0.0f));
  for (int64_t t = 0; !live_.active.empty(); ++t) {
    if (input_.abandoned && t > 0 && !drop_abandoned()) break;
    live_.lay_out();
    make_rules(t);
    CandidatePicker picker(live_.row_start, k_, rules_, raw_, steered() ? &steer_ : nullptr);
    Scored scored = score_step(picker);
    Next next;
    strategy_->choose(*this, scored, next);
    tensor_path_ = !sampling_ && !scored.fused;
    if (!admit(t, live_.row_start.back(), next)) break;
  }
  return std::move(finished_);
}

}  // namespace search_parts

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
  return search_parts::SearchRun(fn, options, input).run();
}

}  // namespace mtx::decode
