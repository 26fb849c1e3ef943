// Search over an incremental step function, apart from the model (CTranslate2's decoding.h): batched (all
// sentences' beams are rows of one state), cache reordered by the chosen beams each step, finished sentences
// dropped from the state, GNMT length normalisation, minimum and maximum length, n-best lists. Beam search,
// greedy search and sampling are strategies over one state, with logits processors built once from the options
// (src/decode/search_parts.h).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "mtx/config/config.h"

namespace mtx::decode {

// Every decoding option (config::DecodeConfig, declared once in config::decode_options(): beam, alpha, nbest,
// min_len, exact_stop, allow_unk, length limits, sampling, repetition controls), and what only a caller sets.
struct SearchOptions : config::DecodeConfig {
  SearchOptions() = default;
  explicit SearchOptions(const config::DecodeConfig& decode) : config::DecodeConfig(decode) {}
  // false: nobody reads the hypotheses' scores. A greedy search (beam 1, exact_stop off, no sampling, no
  // processors) then picks each token on the raw next-token scores, skipping the log-softmax's normalisation
  // (the same argmax, but where two scores would round to one log-probability: the raw path keeps them apart,
  // the other takes the lower id), and its hypotheses' score and log_prob are NaN.
  bool scores = true;
  // true: each hypothesis carries, per generated token, the cross-attention of the step that chose it
  // (StepFunction::attention), as CTranslate2's return_attention. The tokens chosen are the same either way.
  bool return_attention = false;
};

// SearchOptions::scores for a caller that reads the scores when `asked` (or shows n-best lists), as every front end
// sets it: only a plain greedy search nobody reads scores from skips them (for any other search the flag changes
// nothing, so that the server's requests with and without "scores" share batches).
bool scores_wanted(bool asked, const config::DecodeConfig& decode);

// Throws ConfigError naming the offending option.
void validate(const SearchOptions& options);

// What search needs from a model. The state starts with one row per sentence (e.g. the encoded batch).
class StepFunction {
 public:
  virtual ~StepFunction() = default;
  // tokens [rows] (each row's previous token; BOS first) -> next-token scores [rows, vocab]: logits or
  // log-probabilities; search normalises them (log-softmax in fp32) itself.
  virtual torch::Tensor step(const torch::Tensor& tokens) = 0;
  // The same scores in consecutive row blocks of at most `block_rows`: consume(first_row, scores [n, vocab]).
  // A model overrides it to project onto the vocabulary block by block, so that search reduces each block
  // while it is still in cache (a [rows, vocab] matrix of a large batch is tens of MB). Default: one block.
  using BlockConsumer = std::function<void(int64_t first_row, const torch::Tensor& scores)>;
  virtual void step_blocks(const torch::Tensor& tokens, int64_t block_rows, const BlockConsumer& consume) {
    (void)block_rows;
    consume(0, step(tokens));
  }
  // Keeps rows `indices` [new_rows] (int64, repeats allowed) of the state, in that order. same_sentences:
  // every new row belongs to the same sentence as before and no sentence was dropped, so per-sentence
  // data (e.g. the encoder memory) need not move. When sentences joined since the last reorder (beam_search's
  // Admit), index rows + i names the fresh row (nothing generated yet) of the i-th of them, where `rows` is the
  // number of rows the last step scored.
  virtual void reorder(const torch::Tensor& indices, bool same_sentences) = 0;
  // After a step (from its first block on), when the search's options ask for it (return_attention), or a sentence
  // has tied constraints (SearchSentence::spans) and tie_attention is not the step function's own: each of the
  // step's rows' attention over
  // its sentence's source positions [rows, source length] (float; one decoder layer's cross-attention, averaged
  // over heads; positions past a sentence's own source hold 0). Undefined: the step function cannot give it.
  virtual torch::Tensor attention() { return {}; }
  // The attention that source-tied constraints read (SearchSentence::spans), shaped as attention(): averaged over
  // every decoder layer too, where the step function can give that (by default: attention()).
  virtual torch::Tensor tie_attention() { return attention(); }
};

struct Hypothesis {
  std::vector<int32_t> tokens;               // generated tokens, without BOS and EOS
  double score = 0;                          // normalized_score(log_prob, tokens + EOS)
  double log_prob = 0;                       // sum of the tokens' log-probabilities, EOS included
  std::vector<double> token_log_probs = {};  // per token, EOS last: only where given translations are scored
  // Per token (EOS not included): the step's cross-attention over the source positions (return_attention).
  std::vector<std::vector<float>> attention = {};
};

// One search step's choice: for each of A live sentences (k rows each, sentence-major; one at a search's first step),
// its 2k best continuations, score = prior[row] + log_softmax(scores[row])[token], best first; index = beam * vocab +
// token.
// Padded with -inf when fewer are allowed.
struct Candidates {
  torch::Tensor scores;   // [A, 2k] float, CPU
  torch::Tensor indices;  // [A, 2k] int64, CPU
};
struct StepRules {
  int32_t bos = -1, eos = -1, pad = -1;  // BOS and pad are never chosen
  int32_t unk = -1;                      // nor <unk>, when given (decode.allow_unk false)
  std::vector<uint8_t> eos_banned;       // per sentence (or empty: none): before min_len
  std::vector<uint8_t> forced;           // per sentence: at its length limit, may only end (wins over eos_banned)
  std::vector<int32_t> forced_token;     // per sentence (or empty: none): its prefix's next token, or -1
};
// scores [A * width, vocab] (any float type, any device): `width` rows per sentence (0: k; 1 at a search's first
// step), index = row within the sentence * vocab + token. On CPU in float: one fused pass per row (max, sum of
// exponentials, its best 2k), then a merge per sentence; elsewhere: log_softmax, masks and topk as tensors.
// `fused` false forces the tensor path (tests compare the two).
Candidates best_candidates(const torch::Tensor& scores, const std::vector<float>& prior, int64_t k,
                           const StepRules& rules, bool fused = true, int64_t width = 0);

// GNMT: ((5 + length) / 6) ^ alpha.
double length_penalty(int64_t length, double alpha);
// A finished hypothesis's score under the options' normalisation: (log_prob - word_penalty x length) divided by
// length^normalize where normalize > 0 (Marian's), else by GNMT's length_penalty(length, alpha). `length` counts
// the generated tokens, EOS included where the hypothesis ends with one.
double normalized_score(double log_prob, int64_t length, const config::DecodeConfig& options);

// Told once per sentence, as soon as its search has ended (before beam_search returns): its index in the state
// and its final hypotheses, the ones beam_search returns for it.
using SentenceDone = std::function<void(int64_t sentence, const std::vector<Hypothesis>& hypotheses)>;

// Asked before each step for each sentence still searching (its index as SentenceDone numbers it): true ends its
// search at once, with no hypotheses (SentenceDone is told so), and it costs nothing more from that step on -- a
// server's client that went away, or a request past its deadline. Any thread; it must not call into the search.
using Abandoned = std::function<bool(int64_t sentence)>;

// One sentence of a search: its length limit (the most tokens it may generate, EOS included, >= 1), the target
// prefix forced at its start (tokens without BOS and EOS; the search continues after them and they are part of
// its hypotheses and their log-probabilities; the limit grows to hold them), its sampling seed (the draws of
// its sample j at its own step t depend on nothing but (seed, t, j)), and its constraints: target phrases (token
// sequences, in any order) that every hypothesis holds before it may end, by lexically constrained beam search
// with dynamic beam allocation (Post & Vilar 2018, as fairseq's LexicallyConstrainedBeamSearch: each step's
// candidates are the best ones, each hypothesis's best token and every token that advances a hypothesis's
// constraints; the beam is dealt out among banks of candidates by constraint tokens met, best of each bank in turn,
// the bank with the most first). A phrase that appears by itself counts. Only a hypothesis forced to end at its
// length limit may end without its constraints. The limit grows to hold the prefix and every phrase. Not with
// sampling (ConfigError). Its suppressed sequences (negative constraints, CTranslate2's suppress_sequences) are
// never generated: the last token of one is banned wherever a hypothesis ends with the rest of it (a one-token
// sequence: everywhere), in every strategy.
// A phrase tied to a source span (`spans[i]`: source positions [begin, end) of the step function's attention, a
// glossary term's source words; {-1, -1} or no spans: untied) takes the place of the model's own translation of
// the span (Hasler et al. 2018; Bogoychev & Chen 2023): such a phrase starts only at a step where a hypothesis
// attends most to its span, or gives it at least 30% of its attention (or where the phrase would no longer fit
// after); where the span holds the focus, past the first step and where the focus holds at least 40% of the
// attention (searched as the model writes it with span_words known: where that token is one of them, below), the
// phrase's first token scores at least as the model's best token, which is banned, and a
// hypothesis that starts the phrase there never generates that token again; right after the phrase, while the
// hypothesis still attends to its span, the model's best token is banned for the rest of the hypothesis (where
// span_words are known: only when it is one of them). It needs
// the step function's attention (StepFunction::attention); without it, tied phrases are untied.
struct SearchSentence {
  int64_t max_length = 1;
  std::vector<int32_t> prefix;
  uint64_t seed = 0;
  std::vector<std::vector<int32_t>> constraints = {};
  std::vector<std::vector<int32_t>> suppress = {};
  std::vector<std::pair<int64_t, int64_t>> spans = {};  // per constraint (or empty)
  // Tied phrases: the source positions [0, source_words) that hold words (language codes too); the rest (EOS,
  // padding) are not a word a target word translates, and tied phrases read the attention over these only. -1: all.
  int64_t source_words = -1;
  // Per constraint (or empty): the first pieces of the words the model writes for its span's source words alone
  // (Translator fills it). Where the model writes one of them while the span holds part of its attention, the
  // tied phrase takes that word's place.
  std::vector<std::vector<int32_t>> span_words = {};
  // Per tied constraint (or empty): its other forms (a glossary entry's other target forms), each with the model's
  // own words for its source form alone. Searched as the model writes it, a form takes the phrase's place where the
  // model writes one of the form's own words and none of the phrase's, by the same rules, and any form meets the
  // phrase; searched forced, only the phrase itself does.
  struct Form {
    std::vector<int32_t> tokens;
    std::vector<int32_t> span_words;
  };
  std::vector<std::vector<Form>> forms = {};
};
// What a caller steers one sentence's target with (SearchSentence's prefix, constraints with their source spans,
// and suppressed sequences), as the layers above the search hand it down.
struct TargetControls {
  std::vector<int32_t> prefix;
  std::vector<std::vector<int32_t>> constraints = {};
  std::vector<std::vector<int32_t>> suppress = {};
  std::vector<std::pair<int64_t, int64_t>> spans = {};
  // Per constraint (or empty): its other forms, as target pieces and the source pieces of their source form
  // (SearchSentence::forms; the translator finds the model's own words for those pieces).
  struct Form {
    std::vector<int32_t> target, source;
  };
  std::vector<std::vector<Form>> forms = {};
};

// Continuous batching: after each step, with the number of sentences still searching, Admit may add sentences to
// the step function's state (one fresh row each, see StepFunction::reorder) and returns them; they become sentences
// n, n + 1, ... of the search (n: the sentences so far) and start from BOS at once. Each sentence's search is the
// same whenever it joined: its steps, length limit and min_len count from its own start.
using Admit = std::function<std::vector<SearchSentence>(int64_t searching)>;

// What a search is given besides its options: the sentences of the step function's state, the special ids
// (BOS, `pad` and `unk` when >= 0 are never generated) and the callbacks.
struct SearchInput {
  std::vector<SearchSentence> sentences;
  int32_t bos = -1, eos = -1, pad = -1, unk = -1;
  // Per target id (or empty): 1 where the piece continues the word before it (no space before it, a letter or
  // digit first). Right after a constraint phrase ends, such a token is not chosen, so that a phrase stays whole
  // words ("dog" is never followed by "s"). The translator fills it from its tokenizer (`admit` may fill it before
  // it returns the first sentences with constraints: the search reads it at each step).
  std::vector<uint8_t> continues_word;
  // Per target id (or empty: every token): 1 where the piece starts a word, a letter or digit first. A tied
  // phrase shown in place of the model's word shows that word before it where the model's next word, one of
  // these, still translates the phrase's source words ("a" "child" -> "a youngster"; SearchRun::continued).
  std::vector<uint8_t> starts_word;
  SentenceDone on_done;
  Admit admit;
  Abandoned abandoned;
  // Sentence s's source joins the step function's state again (one fresh row, as Admit's sentences do). Given, a
  // sentence whose constraints are all tied to source spans is searched first as the model writes it, each term
  // shown where the model writes its own word for the span (no constraint forced); only where no hypothesis then
  // holds every term does it search again, at once, with the terms forced (dynamic beam allocation). Not given:
  // forced from the start.
  std::function<void(int64_t s)> rejoin;
};

// Searches for every sentence of the state. The strategy and the steps between the model's scores and the
// token choice follow the options:
// - beam search (beam > 1), greedy (beam 1), or sampling (sampling_topk != 1: each of nbest samples per sentence
//   draws its next token from its own seed, after temperature, top-k and top-p, as transformers orders them);
// - logits processors, per row, on what the strategy chooses from (transformers' definitions): the repetition
//   penalty (CTRL's: a token already in the hypothesis has its score divided by the penalty where positive and
//   multiplied where negative) and the no-repeat n-gram ban act on the log-probabilities in beam search
//   (beam > 1) and on the logits in greedy search and sampling, then the sentences' suppressed sequences; then the
//   bans (BOS, pad, unk, EOS before min_len) and the forced tokens (a prefix, EOS at the length limit).
// A hypothesis's log_prob is the sum of its tokens' log-probabilities under the processed scores (normalised
// again in greedy search and sampling; at temperature 1, untruncated, when sampling). Returns, per sentence (those
// admitted included), up to options.nbest hypotheses, best first (samples: in draw order). Throws ConfigError when
// the vocabulary is under twice the beam.
std::vector<std::vector<Hypothesis>> beam_search(StepFunction& fn, const SearchOptions& options,
                                                 const SearchInput& input);

// The same with limits only (no prefixes, seed 0 each): max_lengths[i] is sentence i's limit.
std::vector<std::vector<Hypothesis>> beam_search(StepFunction& fn, const std::vector<int64_t>& max_lengths, int32_t bos,
                                                 int32_t eos, const SearchOptions& options, int32_t pad = -1,
                                                 int32_t unk = -1, const SentenceDone& on_done = {},
                                                 const Admit& admit = {}, const Abandoned& abandoned = {});

}  // namespace mtx::decode
