// The parts of beam_search (search.h), private to src/decode, after CTranslate2's decoding.h:
// - the search's state: its sentences and its rows, each one struct that moves as a whole at every reorder;
// - the logits processors, built once from the options and the sentences (repetition penalty, no-repeat n-grams,
//   suppressed sequences), and the lexical constraints' part of each step;
// - the fused choice over the model's scores (CandidatePicker: each row's best tokens, or its draws);
// - the strategies that turn a step's choice into the next rows: beam search, greedy search and sampling.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "cpu/softmax_kernels.h"
#include "mtx/decode/search.h"

namespace mtx::decode::search_parts {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

using Entry = kernels::TopEntry;
// Best first; equal values: the lower index first (a deterministic order).
inline bool better(const Entry& a, const Entry& b) {
  return a.value > b.value || (a.value == b.value && a.index < b.index);
}

// ---- the state ---------------------------------------------------------------------------------------------

// Constraints of one sentence: target phrases, each a token sequence.
using Phrases = std::vector<std::vector<int32_t>>;

// A hypothesis's progress through its sentence's constraints (fairseq's UnorderedConstraintState, without the
// trie): which phrases it has met, and the tokens of an unmet one it is in the middle of.
struct ConstraintState {
  std::vector<uint8_t> met;       // per phrase
  std::vector<int32_t> progress;  // a prefix of at least one unmet phrase (empty: none under way)
  int64_t bank = 0;               // constraint tokens generated: the met phrases' lengths and the progress
  bool sealed = false;            // the last token ended a phrase: the next one may not continue its word
  int64_t just_met = -1;          // the phrase the last token completed (-1: none)
  bool all_met() const;
};
ConstraintState start_state(const Phrases& phrases);
// The state after `token`: it extends the phrase under way, else it may start one (progress is lost when a token
// breaks a phrase, as in fairseq: the token is then tried from the root). `stands_for` (per phrase, or empty): the
// phrase each one is a form of (Sentence::stands_for); one met, every phrase of its group is met.
ConstraintState advance(const ConstraintState& s, const Phrases& phrases, int32_t token,
                        const std::vector<int64_t>& stands_for = {});
// The tokens that advance a state: the next token of each unmet phrase under way, and (when one is under way, or
// none) the first token of each unmet phrase whose start is not held back (`held`, per phrase, or empty: none).
void advancing_tokens(const ConstraintState& s, const Phrases& phrases, std::vector<int32_t>& out,
                      const std::vector<uint8_t>& held = {});

// One sentence of a search, fixed when it joins.
struct Sentence {
  int64_t limit = 1;            // tokens it may generate, EOS included (grown to hold its prefix and phrases)
  std::vector<int32_t> prefix;  // forced first tokens
  uint64_t seed = 0;            // sampling
  Phrases constraints;          // target phrases every hypothesis holds
  Phrases suppress;             // token sequences never generated
  int64_t start = 0;            // the step it joined at
  int64_t beam_left = 1;        // shrink_beam: the hypotheses still under way (the beam, less those that ended)
  // Per constraint: the source positions [begin, end) it translates ({-1, -1}: untied); empty: none tied.
  std::vector<std::pair<int64_t, int64_t>> spans;
  int64_t source_words = -1;  // SearchSentence::source_words
  // Searched as the model writes it (SearchInput::rejoin): its tied phrases take the model's word's place where it
  // writes one for their span, and nothing forces them (no EOS ban, no wanted tokens, no banks).
  bool unforced = false;
  // Searched again, unforced (SearchRun::retry): per tied phrase, the first piece of the word its span held the most
  // attention for in the first search's best hypothesis (-1: none), which the phrase takes the place of.
  std::vector<int32_t> own_words;
  Phrases span_words;  // SearchSentence::span_words, per constraint (empty: none known)
  // Unforced, with other forms of tied phrases (SearchSentence::forms): they follow the sentence's own phrases in
  // `constraints` (with their span and span_words), and stands_for gives, per phrase, the own phrase it is a form
  // of (its own index for an own phrase); empty: no forms. `own` phrases are the sentence's own.
  std::vector<int64_t> stands_for;
  size_t own = 0;
  // Whether `token` is one of the model's own words for tied phrase i's span (span_words).
  bool span_word(size_t i, int32_t token) const {
    return i < span_words.size() && std::find(span_words[i].begin(), span_words[i].end(), token) != span_words[i].end();
  }
  ConstraintState advance(const ConstraintState& s, int32_t token) const {
    return search_parts::advance(s, constraints, token, stands_for);
  }
  // Searched forced: its own phrases only.
  void drop_forms();
};

// One row of the search state: a beam's hypothesis under way (or a sample's), moved as a whole whenever the rows
// are reordered, as the step function's state is.
struct Row {
  int64_t token = -1;              // the token it feeds the next step (BOS first)
  float score = 0;                 // its log-probability so far (0 on the raw greedy path; -inf: a dead row)
  std::vector<int32_t> history;    // the tokens it generated
  bool live = true;                // sampling: its sample still runs
  ConstraintState constraints;     // its progress through its sentence's phrases
  std::vector<int32_t> displaced;  // tokens a tied phrase took the place of: never generated again
  // A tied phrase shown in place of the model's word (-1: none): while the model goes on writing that word (pieces
  // that continue it) or other words for the phrase's span (its attention's focus there), they are fed and not
  // shown (SearchRun::continued).
  int32_t shadow = -1;
  // Under `shadow`: the model's tokens fed and not shown since the phrase took their place (its word and the pieces
  // that finish it), until the model writes a second word for the phrase's span (`revealed`).
  std::vector<int32_t> fed;
  bool revealed = false;
  // Unforced (Sentence::unforced): per tied phrase, the largest share of the attention its span held as a shown
  // word started, and that word's place in `history` (-1: none).
  std::vector<std::pair<float, int32_t>> peaks;
  // The same over the words that are the model's own words for the span (Sentence::span_words).
  std::vector<std::pair<float, int32_t>> own_peaks;
  // return_attention: its last token's cross-attention, linked to the row it continued (no copy of the rest).
  struct Attended {
    std::vector<float> weights;
    std::shared_ptr<const Attended> before;
  };
  std::shared_ptr<const Attended> attention;
};

// The live state of a step: `active` sentences (their indices in the search), widths[a] rows each,
// sentence-major; sentence a's rows are row_start[a] .. row_start[a + 1] - 1.
struct Live {
  std::vector<int64_t> active, widths, row_start;
  std::vector<Row> rows;
  void lay_out();
  int64_t sentence_of_row(int64_t r) const;  // its active index
};

// ---- logits processors -------------------------------------------------------------------------------------

// A change to each row's scores before the strategy chooses from them (transformers' LogitsProcessor): on the
// logits (`lse` 0) or on the log-probabilities, the row holding raw scores and `lse` their log-sum-exp, written
// back as the raw scores that give the new log-probabilities. `scratch` is the calling thread's.
class LogitsProcessor {
 public:
  virtual ~LogitsProcessor() = default;
  virtual void apply(const Row& row, const Sentence& sentence, float* scores, int64_t vocab, float lse,
                     std::vector<int32_t>& scratch) const = 0;
};
using Processors = std::vector<std::unique_ptr<LogitsProcessor>>;
// The options' processors, in the order they act: the repetition penalty (CTRL's), the no-repeat n-gram ban, then
// the sentences' suppressed sequences (when any sentence has some, `any_suppress`).
Processors make_processors(const SearchOptions& options, bool any_suppress);

// The lexical constraints' part of a step (Post & Vilar 2018), per row: EOS banned until its phrases are met,
// the tokens that advance them (their log-probabilities are kept besides the best ones), and, right after a
// phrase ends, no piece that continues its word.
struct ConstraintStep {
  std::vector<uint8_t> eos_banned;
  std::vector<std::vector<int32_t>> wants;
  std::vector<uint8_t> sealed;                           // empty: no word-continuation table
  const std::vector<uint8_t>* continues_word = nullptr;  // per token (SearchInput)
  const std::vector<uint8_t>* starts_word = nullptr;     // per token (SearchInput; null or empty: every token)
  bool is_word(int64_t token) const {
    return !starts_word || starts_word->empty() ||
           (size_t(token) < starts_word->size() && (*starts_word)[size_t(token)]);
  }
  // Source-tied phrases (SearchSentence::spans): the step's attention [rows, source] (CPU float; undefined: none
  // tied, or no attention), and per row the token its tied phrase displaces here (-1: none), banned for the rest
  // of the hypothesis when the row writes `displaced_if` (-1: whatever it writes); written as the row is scored.
  torch::Tensor attention;
  std::vector<int32_t> displaced, displaced_if;
  std::vector<int32_t> placed;  // per row: the tied phrase displaced_if starts in the model's word's place (-1: none)
  std::vector<std::vector<int32_t>> held_first;  // per row: first tokens of tied phrases that may not start here
  // The step's attention [rows, source] (CPU float), as the step function gives it (`attention`).
  void set_attention(const torch::Tensor& a);
  int64_t positions() const { return words_.size(1); }
  // tie: tied phrases start only where their span is attended to (false: the step function gives no attention).
  ConstraintStep(const Live& live, const std::vector<Sentence>& sentences, const std::vector<uint8_t>& continues,
                 const std::vector<uint8_t>& starts, bool tie);
  // Row r's pieces that would continue a phrase's last word, banned.
  void seal(int64_t r, float* scores, int64_t vocab) const;
  // Row r's unmet tied phrase that may start here, none under way: the one whose span holds the row's attention
  // focus (`firm`: with at least kFirmAttention of the attention, so that a word written there translates it;
  // spread attention writes a word around it, such as an article), else one whose span holds at least
  // kNearAttention of the attention (phrase -1: none).
  struct TermHere {
    int64_t phrase = -1;
    bool firm = false;
  };
  TermHere term_at(int64_t r) const;
  static constexpr float kNearAttention = 0.3f, kFirmAttention = 0.4f;
  // The least share of a row's attention a span holds where the model writes its own word for it
  // (Sentence::span_words) for the phrase to take that word's place.
  static constexpr float kOwnWordAttention = 0.1f;
  // Row r's attention focus lies in the span of its sentence's tied phrase `phrase`.
  bool attends(int64_t r, int64_t phrase) const;
  // Row r's share of its attention (over its source's words) on the span of tied phrase `phrase`.
  float share(int64_t r, int64_t phrase) const;
  // Row r's tied phrase that its last token completed while the row still attends to its span (-1: none).
  int64_t term_behind(int64_t r) const;

 private:
  // Row r's attention over its source's words (SearchSentence::source_words), as shares of their sum.
  const float* attention_of(int64_t r) const;
  int64_t focus_of(int64_t r) const;  // the source word position row r attends to most
  const Sentence& sentence_of(int64_t r) const;
  const Live& live_;
  const std::vector<Sentence>& sentences_;
  torch::Tensor words_;  // attention over each row's source words, as shares (attention_of)
};

// Sampling's part of a step: per active sentence its seed and its own step.
struct SamplingStep {
  const SearchOptions* options = nullptr;
  int64_t samples = 1;  // per sentence (its one row at its first step draws them all)
  std::vector<uint64_t> seeds;
  std::vector<int64_t> own_steps;
};

// What a step does between the model's scores and the token choice besides StepRules' bans and forced tokens.
struct Steering {
  const Processors* processors = nullptr;  // non-empty, or null
  bool logits = false;                     // processors act on the logits (greedy, sampling), else on log-probs
  ConstraintStep* constraints = nullptr;
  const SamplingStep* sampling = nullptr;
  const std::vector<Row>* rows = nullptr;                   // the step's rows
  std::vector<const Sentence*> sentences;                   // per active sentence
  bool processes() const { return processors != nullptr; }  // the processors' pass runs
};

// ---- the fused choice --------------------------------------------------------------------------------------

// The fused CPU choice, fed row blocks as the step produces them: per row its best allowed tokens as
// log-probabilities (max, sum of exponentials and the best few in passes over the row while it is in cache),
// then a merge per sentence; or, when sampling, each row's draws.
class CandidatePicker {
 public:
  // starts: sentence a's rows are starts[a] .. starts[a + 1] - 1 (sentence-major; one row at a sentence's first
  // step, else k); k: the beam (2k candidates per sentence). raw: candidates carry the raw scores, not
  // log-probabilities (no normalisation pass; the order within a row is the same).
  CandidatePicker(std::vector<int64_t> starts, int64_t k, const StepRules& rules, bool raw = false,
                  const Steering* steer = nullptr);
  // block [n, V] float on the CPU: rows first_row .. first_row + n. Steering changes the block's rows in place.
  void add(int64_t first_row, const torch::Tensor& block);
  // Each sentence's 2k best candidates (best_candidates' layout), after every block was added.
  Candidates finish(const std::vector<float>& prior);
  // Sampling: row r's draw j (its token and log-probability), after every block was added.
  const Entry& drawn(int64_t r, int64_t j) const { return samples_[size_t(r * steer_->sampling->samples + j)]; }
  // Row r's best allowed token (index -1: none), and the log-probabilities of the tokens it wants (constraints).
  const Entry& best(int64_t r) const { return top_[size_t(r * held_rows())]; }
  const std::vector<Entry>& wanted(int64_t r) const;
  int64_t vocab() const { return vocab_; }

 private:
  static constexpr int64_t kHeldExtra = 4;    // BOS, pad, unk, EOS
  static constexpr int64_t kTopLoopMax = 64;  // sampling's top-k through the row loop up to this k
  int64_t held_rows() const { return 2 * k_ + kHeldExtra; }
  int64_t draws(int64_t a) const;
  void pick_row(int64_t r, float* row, int64_t vocab, const kernels::RowLoops& loops, std::vector<int32_t>& scratch);
  float steer_row(int64_t r, float* row, int64_t vocab, const kernels::RowLoops& loops, std::vector<int32_t>& scratch);
  void top_row(int64_t r, const float* row, int64_t vocab, float lse, bool eos_banned, const kernels::RowLoops& loops);
  void displace(int64_t r, float* row, int64_t vocab, const kernels::RowLoops& loops);
  void put_forced(int64_t r, int64_t a, int32_t token, float logp);
  void sample(int64_t r, const float* row, int64_t vocab, float lse, const kernels::RowLoops& loops);
  std::vector<Entry> sampling_candidates(const float* row, int64_t vocab, const kernels::RowLoops& loops) const;

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

// The tensor path of best_candidates (any device and type): log_softmax, masks and topk as tensors.
Candidates candidates_tensor(const torch::Tensor& scores, const std::vector<float>& prior, int64_t k, int64_t width,
                             const StepRules& rules);

// ---- the strategies ----------------------------------------------------------------------------------------

class SearchRun;

// What a step leaves for the next: the sentences still searching, their rows, and the row of this step each
// continues (the step function's reorder).
struct Next {
  std::vector<int64_t> active, keep_rows;
  std::vector<Row> rows;
};

// The step's scores as the strategy receives them: reduced by `picker` (fused), or kept as blocks for the tensor
// path; `attention` [rows, source] when asked for.
struct Scored {
  explicit Scored(CandidatePicker& p) : picker(p) {}
  CandidatePicker& picker;
  bool fused = true;
  std::vector<torch::Tensor> kept;
  int64_t vocab = -1;
  torch::Tensor attention;
};

// How the rows of a step continue: each live sentence's next rows go to `next`, a sentence that ends is concluded
// (SearchRun::conclude).
class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual void choose(SearchRun& run, Scored& scored, Next& next) const = 0;
};
// Beam search (beam > 1), greedy search (beam 1) or sampling, as the options say.
std::unique_ptr<Strategy> make_strategy(const SearchOptions& options);

// One call of beam_search: its sentences, its live rows and what every strategy asks of them.
class SearchRun {
 public:
  SearchRun(StepFunction& fn, const SearchOptions& options, const SearchInput& input);
  std::vector<std::vector<Hypothesis>> run();

  // For the strategies.
  const SearchOptions& options() const { return options_; }
  int64_t k() const { return k_; }
  bool raw() const { return raw_; }
  int32_t eos() const { return input_.eos; }
  const Sentence& sentence(int64_t s) const { return sentences_[size_t(s)]; }
  const Live& live() const { return live_; }
  std::vector<Hypothesis>& finished(int64_t s) { return finished_[size_t(s)]; }
  const std::vector<Hypothesis>& finished(int64_t s) const { return finished_[size_t(s)]; }
  const StepRules& rules() const { return rules_; }
  // Sentence s's search has ended: its hypotheses best first (samples: in draw order), the n best kept.
  void conclude(int64_t s);
  // Row `row` of sentence s continued by `token` (row r of the step; its attention kept when asked for).
  Row continued(const Row& row, int64_t s, int32_t token, float score, const torch::Tensor& attention, int64_t r) const;
  // A hypothesis of sentence s ending `row`: with EOS at `score`, or (eos false) `row` as it is, cut at its length
  // limit. Searched unforced and lacking a tied phrase, it may give the sentence its own words (note_own_words).
  Hypothesis ended(const Row& row, int64_t s, float score, bool eos = true);
  // max_length_factor: at its length limit a sentence's open hypotheses end without EOS (Marian's), rather than
  // being forced to end with it.
  bool cut_at_limit() const { return options_.max_length_factor > 0; }
  // Sentence s's step is the last its length limit allows.
  bool at_limit(int64_t s) const { return t_ - sentences_[size_t(s)].start + 1 >= sentences_[size_t(s)].limit; }
  Sentence& sentence(int64_t s) { return sentences_[size_t(s)]; }

 private:
  void add_sentence(const SearchSentence& s, int64_t start);
  void add_forms(const SearchSentence& s, Sentence& n) const;
  bool starts_word(int32_t token) const;     // SearchInput::starts_word (empty: every token)
  bool continues_word(int32_t token) const;  // SearchInput::continues_word (empty: none)
  // Row `row` under its shadow (Row::shadow) continued by `token`, into `next`: the tokens it shows.
  int64_t under_shadow(const Row& row, int64_t s, int32_t token, const ConstraintStep& c, int64_t r, Row& next) const;
  bool shadowed(const Row& row, int64_t s, int32_t token, const ConstraintStep& c, int64_t r) const;
  // Unforced: the words row's tied phrases' spans held the most attention for, as sentence s's own words for them
  // when its hypothesis is the best so far that lacks a phrase.
  void note_own_words(const Row& row, int64_t s, double score);
  std::vector<std::pair<double, std::vector<int32_t>>> own_words_;  // per sentence: (score, own words)
  // Sentence s, searched unforced, ended with no hypothesis holding its phrases: searched again from the next step
  // (admit), unforced with its own words (Sentence::own_words) the first time they are known, else forced.
  void retry(int64_t s);
  Row fresh_row(int64_t s, float score) const;
  bool drop_abandoned();
  void make_rules(int64_t t);
  Scored score_step(CandidatePicker& picker);
  void tie_to_attention(int64_t rows);
  bool admit(int64_t t, int64_t scored_rows, Next& next);
  bool steered() const;

  StepFunction& fn_;
  const SearchOptions& options_;
  const SearchInput& input_;
  Processors processors_;
  std::unique_ptr<Strategy> strategy_;
  bool sampling_ = false, raw_ = false;
  int64_t k_ = 1;  // rows per sentence: the beam, or one per sample
  std::vector<Sentence> sentences_;
  std::vector<std::vector<Hypothesis>> finished_;
  bool any_prefix_ = false, any_constraints_ = false, any_suppress_ = false, any_tied_ = false;
  Live live_;
  StepRules rules_;
  Steering steer_;
  std::unique_ptr<ConstraintStep> constraint_step_;
  SamplingStep sampling_step_;
  std::vector<int64_t> retry_;  // sentences to search again from the next step (retry)
  int64_t t_ = 0;               // the step under way
  bool tensor_path_ = false;    // the last step chose on the tensor path
  bool no_attention_ = false;   // the step function gave no attention: tied phrases act untied
};

}  // namespace mtx::decode::search_parts
