// Translation of text with a trained model: tokenize, sort by length into token-budget batches,
// encode each batch once, beam search over the decoder's incremental step, restore input order,
// detokenize. Output for a sentence does not depend on what else is in its batch.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "mtx/config/config.h"
#include "mtx/decode/search.h"
#include "mtx/model/transformer.h"
#include "mtx/tokenizer/tokenizer.h"

namespace mtx::decode {

struct TranslateOptions {
  SearchOptions search;  // every decoding option (config::DecodeConfig), the length limits and batch budget included
                         // (search.return_attention: the hypotheses' attention, over their sources' pieces)
  // Searches run at once on the CPU, each on one thread (at most the thread count at once); each batch is dealt
  // out among them sentence by sentence (CTranslate2's inter_threads). 0: one per thread (docs/translating.md
  // has the throughput of both); a single sentence still gets every thread.
  // 1: one search uses every thread. The translations are the same either way.
  int workers = 0;
  // A multilingual model's languages (tokenizer::Languages: NLLB's deu_Latn, M2M100's de, mBART-50's de_DE): each
  // source starts with its language's token (NLLB's legacy layout: ends with it, after </s>) and each translation
  // with the target's, forced (transformers'
  // forced_bos_token_id); the code never reaches the text. translate() needs both for such a model; others refuse
  // them. (translate_ids and translate_continuously take ids as given, codes in place.)
  std::string source_lang, target_lang;
};

TranslateOptions options_from_config(const config::DecodeConfig& decode);
// Throws ConfigError naming the offending option.
void validate(const TranslateOptions& options);

// What steers a line's translation, as text: a target prefix it starts with ("" for none), target phrases
// (constraints) it must hold, a multilingual model's languages for this line ("": the translator's), and target
// phrases it never holds (suppressed, besides decode.suppress's).
struct LineControls {
  std::string prefix;
  std::vector<std::string> constraints;
  std::string source_lang = {}, target_lang = {};
  std::vector<std::string> suppress = {};
  // Per constraint (or empty: none tied): the bytes [begin, end) of the line it translates (a glossary term's
  // source words), which tie it to their pieces (SearchSentence::spans); {npos, npos}: untied.
  std::vector<std::pair<size_t, size_t>> sources = {};
  // Per constraint (or empty): a glossary entry's other forms, (source form, target form), that may stand for a
  // tied constraint (Glossary::Term::forms, SearchSentence::forms).
  std::vector<std::vector<std::pair<std::string, std::string>>> forms = {};
};

struct Translation {
  std::vector<Hypothesis> hypotheses;  // best first (empty for an empty input line)
  std::vector<std::string> texts;      // detokenized hypotheses
  bool truncated = false;              // the source was cut to the model's maximum length
};

class Translator {
 public:
  // `model` is put in eval mode; it stays on the device it is on.
  Translator(model::Transformer model, tokenizer::Tokenizer tokenizer, TranslateOptions options);
  // An ensemble (Marian's and fairseq's): each step scores the mean of the models' next-token
  // log-probabilities (equal weights), one search over them. The models must share `tokenizer` (bundle's
  // load_ensemble checks that) and sit on one device; the shortest maximum length of them applies.
  // Throws ConfigError on an empty list or target vocabularies of different sizes.
  Translator(std::vector<model::Transformer> models, tokenizer::Tokenizer tokenizer, TranslateOptions options);

  // Translations of `lines`, in input order. Empty lines give an empty translation. `controls` (empty, or one per
  // line): the target prefix each translation starts with (the search continues after it; the output holds it)
  // and the phrases it must hold (SearchSentence). `abandoned` (optional): beam_search's, with the lines' indices
  // among those searched (a caller that stops the whole call answers the same for each).
  std::vector<Translation> translate(const std::vector<std::string>& lines,
                                     const std::vector<LineControls>& controls = {}, const Abandoned& abandoned = {});
  // A line's controls as tokens. A prefix and phrases the model cannot write in full (its positions end at its
  // maximum length) are cut (the prefix) or dropped (the last phrases first), with a warning naming `line`.
  // `text` (the line; needed for controls.sources) ties phrases to its pieces, `code_first`: its ids start with a
  // language token.
  TargetControls target_controls(const LineControls& controls, int64_t line, const std::string& text = "",
                                 bool code_first = false) const;
  // Token level: source ids without EOS (longer than the model allows: cut) -> hypotheses per source.
  // `on_done` (optional) is told each source's index and hypotheses as soon as its search ends, possibly from
  // several search threads at once.
  // `abandoned` (optional): beam_search's, with the sources' indices. `controls` (empty, or one per source): the
  // target prefix and constraints of each search (as target_controls gives them). A sentence's sampling seed
  // is its own (seed_of).
  std::vector<std::vector<Hypothesis>> translate_ids(const std::vector<std::vector<int32_t>>& sources,
                                                     const SentenceDone& on_done = {}, const Abandoned& abandoned = {},
                                                     const std::vector<TargetControls>& controls = {});

  // Continuous batching: one search on this thread over `sources`, which sentences join while it runs. After
  // each step `admit` is told how many sentences are still searching and returns sources to add (none: an empty
  // list); the search ends when nothing is left. Returns the hypotheses of `sources` and then of the admitted ones,
  // in the order admitted; `on_done` numbers them the same way. Each sentence's translation is the one translate_ids
  // gives it (on the CPU in float and int8: byte for byte).
  using AdmitSources = std::function<std::vector<std::vector<int32_t>>(int64_t searching)>;
  // The target controls of sentence i, numbered as on_done numbers them (empty: none).
  using ControlsOf = std::function<TargetControls(int64_t sentence)>;
  std::vector<std::vector<Hypothesis>> translate_continuously(const std::vector<std::vector<int32_t>>& sources,
                                                              const AdmitSources& admit,
                                                              const SentenceDone& on_done = {},
                                                              const Abandoned& abandoned = {},
                                                              const ControlsOf& controls_of = {});

  const TranslateOptions& options() const { return options_; }
  const tokenizer::Tokenizer& tokenizer() const { return tokenizer_; }
  // The model (an ensemble's first member: alignments are read from it).
  model::Transformer& model() { return models_.front(); }
  // Source tokens kept at most (without EOS): the model's limit, or decode.max_input_length when lower.
  int64_t max_source_tokens() const;
  // A sentence's sampling seed: a hash of decode.sampling_seed, its source tokens and its prefix, so that its
  // samples are the same alone, in any batch, on any number of threads.
  uint64_t seed_of(const std::vector<int32_t>& source, const std::vector<int32_t>& prefix) const;

 private:
  struct Encoded {
    torch::Tensor src;                 // [n, longest + 1] with EOS and padding, on the model's device
    std::vector<int64_t> max_lengths;  // per sentence: the most tokens it may generate
  };
  Encoded prepare(const std::vector<const std::vector<int32_t>*>& sources) const;
  // Whether a source is whole as given: NLLB's legacy layout (pieces </s> code), to which no </s> is appended.
  bool complete_source(const std::vector<int32_t>& source) const;
  // The source positions that hold its words and codes, before its </s> (SearchSentence::source_words).
  int64_t source_words(const std::vector<int32_t>& source) const;
  std::vector<std::vector<int32_t>> clip(std::vector<std::vector<int32_t>> sources) const;  // cut to the model
  // search.return_attention: a hypothesis's attention rows cut down to its source's pieces (no language code, no
  // </s>, no padding), one column per piece of `source`'s text.
  void attention_over_pieces(Hypothesis& h, const std::vector<int32_t>& source) const;
  std::vector<std::vector<Hypothesis>> search_batch(const std::vector<const std::vector<int32_t>*>& sources,
                                                    const std::vector<const TargetControls*>& controls,
                                                    const SentenceDone& on_done, const AdmitSources& admit,
                                                    const Abandoned& abandoned = {},
                                                    const ControlsOf& controls_of = {});

  // The target pieces that continue the word before them (SearchInput::continues_word), worked out once.
  const std::vector<uint8_t>& continues_word() const;
  // The target pieces that start a word, a letter or digit first (SearchInput::starts_word), worked out with
  // continues_word.
  const std::vector<uint8_t>& starts_word() const;
  struct WordPieces {
    std::once_flag once;
    std::vector<uint8_t> continues, starts;
  };
  std::shared_ptr<WordPieces> word_pieces_ = std::make_shared<WordPieces>();
  // A search's input with the tokenizer's special ids (unk -1 where decode.allow_unk), no sentences yet.
  SearchInput special_ids_input() const;
  // The model's own words for the source pieces `span` of `source` (SearchSentence::span_words): the word-start
  // pieces of its best hypotheses for those pieces alone (with the source's language codes, and `prefix`'s), kept
  // once worked out.
  std::vector<int32_t> span_words(const std::vector<int32_t>& source, std::pair<int64_t, int64_t> span,
                                  const std::vector<int32_t>& prefix);
  struct SpanWords {
    std::mutex mutex;
    std::map<std::vector<int32_t>, std::vector<int32_t>> words;  // by the span's source and prefix
  };
  std::shared_ptr<SpanWords> span_words_ = std::make_shared<SpanWords>();

  std::vector<model::Transformer> models_;  // one, or an ensemble's members
  tokenizer::Tokenizer tokenizer_;
  TranslateOptions options_;
  int64_t max_len_ = 0;                          // positions the models allow (the least of them)
  int32_t source_code_ = -1, target_code_ = -1;  // language tokens (-1: none)
};

// The id of `code` among `languages`; ConfigError naming `flag`, the code and the closest codes otherwise.
int32_t language_id(const tokenizer::Languages& languages, const std::string& code, const std::string& flag);

// A source's ids as the translator takes them: its pieces, and with a language's token (`code` >= 0) where the
// tokenizer puts it -- first, or after </s> in NLLB's legacy layout (a source the translator then takes whole). The
// CLI, the server and the Python package encode sources through it.
std::vector<int32_t> source_ids(const tokenizer::Tokenizer& tokenizer, std::string_view text, int32_t code);

}  // namespace mtx::decode
