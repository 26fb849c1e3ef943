#include "mtx/decode/translator.h"

#include "mtx/decode/align.h"

#include "mtx/util/strings.h"

#include <torch/torch.h>

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <memory>
#include <numeric>
#include <thread>

#include "mtx/decode/request.h"
#include "mtx/util/errors.h"
#include "mtx/util/logging.h"
#include "mtx/util/system.h"
#include "mtx/util/text.h"

namespace mtx::decode {
namespace {

// A step function that sentences can join while it runs (continuous batching): `src` [n, src_len] encoded apart,
// their fresh rows placed by the next reorder.
class JoinableStep : public StepFunction {
 public:
  virtual void join(const torch::Tensor& src) = 0;
};

// The model as beam search sees it: next-token logits of one decoder step over a cache.
class ModelStep final : public JoinableStep {
 public:
  // keep_attention: attention() gives each step's cross-attention (search's return_attention); tie:
  // tie_attention() gives it averaged over the decoder's layers (tied phrases).
  ModelStep(model::Transformer& model, const model::Memory& memory, bool keep_attention, bool tie)
      : model_(model), cache_(model->start_decoding(memory)) {
    cache_.keep_attention = keep_attention;
    cache_.keep_layers_attention = tie;
  }

  torch::Tensor step(const torch::Tensor& tokens) override {
    return model_->decode_step(tokens.to(device()), cache_);  // [rows, V] logits; search normalises them
  }

  void step_blocks(const torch::Tensor& tokens, int64_t block_rows, const BlockConsumer& consume) override {
    const torch::Tensor hidden = model_->decode_step_hidden(tokens.to(device()), cache_);  // [rows, d]
    const int64_t rows = hidden.size(0);
    for (int64_t first = 0; first < rows; first += block_rows) {
      const int64_t n = std::min(block_rows, rows - first);
      consume(first, model_->project(hidden.narrow(0, first, n)));  // [n, V] logits
    }
  }

  void join(const torch::Tensor& src) override { model_->join_decoding(cache_, model_->encode(src)); }

  torch::Tensor attention() override { return cache_.attention; }
  torch::Tensor tie_attention() override { return cache_.layers_attention; }

  void reorder(const torch::Tensor& indices, bool same_sentences) override {
    // Beams of one sentence share its encoder memory: it moves only when the rows change sentences.
    const bool same_memory = same_sentences && memory_rows_ == indices.size(0);
    cache_.reorder(indices.to(device()), same_memory);
    memory_rows_ = indices.size(0);
  }

 private:
  torch::Device device() const { return cache_.memory_mask.device(); }
  model::Transformer& model_;
  model::DecoderCache cache_;
  int64_t memory_rows_ = -1;
};

// An ensemble as beam search sees it: the mean of its members' next-token log-probabilities.
class EnsembleStep final : public JoinableStep {
 public:
  explicit EnsembleStep(std::vector<std::unique_ptr<ModelStep>> members) : members_(std::move(members)) {}

  torch::Tensor step(const torch::Tensor& tokens) override {
    torch::Tensor sum;  // [rows, V]
    for (auto& m : members_) {
      const torch::Tensor log_probs = torch::log_softmax(m->step(tokens).to(torch::kFloat), -1);  // [rows, V]
      sum = sum.defined() ? sum.add_(log_probs) : log_probs;
    }
    return sum.div_(double(members_.size()));  // [rows, V] mean log-probabilities; search renormalises
  }

  void join(const torch::Tensor& src) override {
    for (auto& m : members_) m->join(src);
  }

  // The first member's: its attention stands for the ensemble's, as Marian's alignments do.
  torch::Tensor attention() override { return members_.front()->attention(); }
  torch::Tensor tie_attention() override { return members_.front()->tie_attention(); }

  void reorder(const torch::Tensor& indices, bool same_sentences) override {
    for (auto& m : members_) m->reorder(indices, same_sentences);
  }

 private:
  std::vector<std::unique_ptr<ModelStep>> members_;
};

}  // namespace

TranslateOptions options_from_config(const config::DecodeConfig& d) {
  TranslateOptions o;
  o.search = SearchOptions(d);
  return o;
}

void validate(const TranslateOptions& o) {
  validate(o.search);
  if (o.workers < 0) throw ConfigError("workers: must be >= 0 (0 = one per thread), got " + std::to_string(o.workers));
}

Translator::Translator(model::Transformer model, tokenizer::Tokenizer tokenizer, TranslateOptions options)
    : Translator(std::vector<model::Transformer>{std::move(model)}, std::move(tokenizer), options) {}

Translator::Translator(std::vector<model::Transformer> models, tokenizer::Tokenizer tokenizer, TranslateOptions options)
    : models_(std::move(models)), tokenizer_(std::move(tokenizer)), options_(options) {
  validate(options_);
  if (models_.empty()) throw ConfigError("a translator needs at least one model");
  const int64_t vocab = models_.front()->options.tgt_vocab();
  for (auto& model : models_) {
    if (model->options.decoder_only()) {
      throw ConfigError(
          "this checkpoint is a language model (task lm), not a translation model: continue text with "
          "mtx generate, score it with mtx eval --metric ppl --text FILE");
    }
    if (model->options.tgt_vocab() != vocab) {
      throw ConfigError("an ensemble's models must share one target vocabulary; they have " + std::to_string(vocab) +
                        " and " + std::to_string(model->options.tgt_vocab()) + " pieces");
    }
  }
  if (vocab < 2 * int64_t(options_.search.beam)) {
    throw ConfigError("beam " + std::to_string(options_.search.beam) + " needs a target vocabulary of at least " +
                      std::to_string(2 * options_.search.beam) + " pieces; this model has " + std::to_string(vocab) +
                      ": use a beam of at most " + std::to_string(vocab / 2));
  }
  const tokenizer::Languages& languages = tokenizer_.languages();
  if (languages.empty() && (!options_.source_lang.empty() || !options_.target_lang.empty())) {
    throw ConfigError("--source-lang/--target-lang: this model has no language codes (it translates one pair)");
  }
  if (!options_.source_lang.empty()) source_code_ = language_id(languages, options_.source_lang, "--source-lang");
  if (!options_.target_lang.empty()) target_code_ = language_id(languages, options_.target_lang, "--target-lang");
  max_len_ = models_.front()->options.max_len();
  for (auto& model : models_) {
    max_len_ = std::min(max_len_, model->options.max_len());
    // (only when needed: translators over one model may be made while others translate with it)
    if (model->is_training()) model->eval();
    model->pack_fp32();  // mtx's float kernel on weights packed once, where the CPU runs it
  }
}

int32_t language_id(const tokenizer::Languages& languages, const std::string& code, const std::string& flag) {
  return tokenizer::language_id(languages, code, flag);
}

int64_t Translator::max_source_tokens() const {
  const int64_t model = std::max<int64_t>(1, max_len_ - 1);
  return options_.search.max_input_length > 0 ? std::min<int64_t>(model, options_.search.max_input_length) : model;
}

uint64_t Translator::seed_of(const std::vector<int32_t>& source, const std::vector<int32_t>& prefix) const {
  // FNV-1a over the seed, the source and the prefix, then SplitMix64's finaliser: the same sentence, the same
  // seed, wherever and with whatever it is translated.
  uint64_t h = 0xcbf29ce484222325ull;
  const auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 0x100000001b3ull;
    }
  };
  mix(uint64_t(options_.search.sampling_seed));
  mix(source.size());
  for (const int32_t t : source) mix(uint32_t(t));
  mix(prefix.size());
  for (const int32_t t : prefix) mix(uint32_t(t));
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

const std::vector<uint8_t>& Translator::continues_word() const {
  std::call_once(word_pieces_->once, [this] {
    const auto& side = tokenizer_.tgt();
    const bool whole_words = side.kind() == "basic_english";  // no piece continues a word
    if (!whole_words) word_pieces_->continues.assign(size_t(side.vocab_size()), 0);
    word_pieces_->starts.assign(size_t(side.vocab_size()), 0);
    const std::string boundary = "\xe2\x96\x81";  // U+2581, sentencepiece's word boundary
    for (int32_t id = 0; id < side.vocab_size(); ++id) {
      std::string p = side.piece(id);
      const bool starts = whole_words || p.rfind(boundary, 0) == 0;
      if (!whole_words && starts) p.erase(0, boundary.size());
      const std::u32string u = text::to_u32(p);
      const bool alnum = !u.empty() && (text::is_letter(u[0]) || text::is_number(u[0]));
      (starts ? word_pieces_->starts : word_pieces_->continues)[size_t(id)] = alnum ? 1 : 0;
    }
  });
  return word_pieces_->continues;
}

const std::vector<uint8_t>& Translator::starts_word() const {
  continues_word();
  return word_pieces_->starts;
}

SearchInput Translator::special_ids_input() const {
  const auto ids = tokenizer_.special_ids();
  SearchInput in;
  in.bos = ids.bos;
  in.eos = ids.eos;
  in.pad = ids.pad;
  in.unk = options_.search.allow_unk ? -1 : ids.unk;
  return in;
}

std::vector<int32_t> Translator::span_words(const std::vector<int32_t>& source, std::pair<int64_t, int64_t> span,
                                            const std::vector<int32_t>& prefix) {
  const tokenizer::Languages& languages = tokenizer_.languages();
  const auto code = [&](int32_t id) {
    return std::any_of(languages.begin(), languages.end(), [&](const auto& l) { return l.second == id; });
  };
  // The span's pieces with the source's language codes (and NLLB's legacy tail, </s> code), and the prefix's codes.
  const bool whole = complete_source(source);
  std::vector<int32_t> alone, codes;
  for (size_t p = 0; p < source.size(); ++p) {
    const bool in_span = int64_t(p) >= span.first && int64_t(p) < span.second;
    if (in_span || code(source[p]) || (whole && p + 2 >= source.size())) alone.push_back(source[p]);
  }
  for (const int32_t t : prefix) {
    if (code(t)) codes.push_back(t);
  }
  std::vector<int32_t> key = alone;
  key.push_back(-1);
  key.insert(key.end(), codes.begin(), codes.end());
  {
    std::lock_guard<std::mutex> lock(span_words_->mutex);
    const auto found = span_words_->words.find(key);
    if (found != span_words_->words.end()) return found->second;
  }
  const Encoded encoded = prepare({&alone});
  SearchOptions o = options_.search;
  o.sampling_topk = 1;
  o.nbest = 1;
  o.return_attention = false;
  o.suppress.clear();
  SearchInput in = special_ids_input();
  in.sentences.push_back({encoded.max_lengths[0], codes, 0, {}, {}, {}, source_words(alone)});
  ModelStep step(models_.front(), models_.front()->encode(encoded.src), false, false);
  const std::vector<uint8_t>& starts = starts_word();
  std::vector<int32_t> words;
  const std::vector<std::vector<Hypothesis>> found = beam_search(step, o, in);
  // The last word of the best hypothesis (its head, after any article: "A hat." for "Hut"), and its lower-case
  // form ("Woman." alone, "a woman" in a sentence).
  std::vector<int32_t> last;
  for (const int32_t t : found.front().front().tokens) {
    if (size_t(t) < starts.size() && starts[size_t(t)]) {
      last = {t};
    } else if (!last.empty()) {
      last.push_back(t);
    }
  }
  if (!last.empty()) {
    words.push_back(last.front());
    const tokenizer::Model& side = tokenizer_.tgt();
    const std::vector<int32_t> lower = side.encode(text::to_utf8(text::lower(text::to_u32(side.decode(last)))));
    if (!lower.empty() && lower.front() != last.front() && size_t(lower.front()) < starts.size() &&
        starts[size_t(lower.front())])
      words.push_back(lower.front());
  }
  std::lock_guard<std::mutex> lock(span_words_->mutex);
  span_words_->words.emplace(std::move(key), words);
  return words;
}

bool Translator::complete_source(const std::vector<int32_t>& s) const {
  if (!tokenizer_.code_after_eos() || s.size() < 2 || s[s.size() - 2] != tokenizer_.special_ids().eos) return false;
  const tokenizer::Languages& languages = tokenizer_.languages();
  return std::any_of(languages.begin(), languages.end(), [&](const auto& l) { return l.second == s.back(); });
}

int64_t Translator::source_words(const std::vector<int32_t>& s) const {
  return int64_t(s.size()) - (complete_source(s) ? 2 : 0);  // NLLB's legacy layout ends with </s> and its code
}

Translator::Encoded Translator::prepare(const std::vector<const std::vector<int32_t>*>& sources) const {
  const auto ids = tokenizer_.special_ids();
  const auto n = int64_t(sources.size());
  int64_t longest = 0;
  for (const auto* s : sources)
    longest = std::max<int64_t>(longest, int64_t(s->size()) + (complete_source(*s) ? 0 : 1));
  Encoded out;
  out.src = torch::full({n, longest}, int64_t(ids.pad), torch::kLong);  // [batch, src_len]
  auto acc = out.src.accessor<int64_t, 2>();
  out.max_lengths.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const auto& s = *sources[size_t(i)];
    for (size_t j = 0; j < s.size(); ++j) acc[i][int64_t(j)] = s[j];
    // </s> ends each source, except one already whole in NLLB's legacy layout (pieces </s> code).
    if (!complete_source(s)) acc[i][int64_t(s.size())] = ids.eos;
    // In double, clamped before the cast: a request may set a large max_len_a. Marian's factor counts the source
    // with its EOS.
    const auto& o = options_.search;
    const double limit = o.max_length_factor > 0
                             ? std::ceil(o.max_length_factor * double(s.size() + (complete_source(s) ? 0 : 1)))
                             : std::floor(o.max_len_a * double(s.size()) + double(o.max_len_b));
    out.max_lengths[size_t(i)] = int64_t(std::clamp(limit, 1.0, double(max_len_)));
  }
  out.src = out.src.to(models_.front()->parameters().front().device());
  return out;
}

std::vector<std::vector<Hypothesis>> Translator::search_batch(const std::vector<const std::vector<int32_t>*>& sources,
                                                              const std::vector<const TargetControls*>& controls,
                                                              const SentenceDone& on_done, const AdmitSources& admit,
                                                              const Abandoned& abandoned,
                                                              const ControlsOf& controls_of) {
  const Encoded first = prepare(sources);
  SearchInput in = special_ids_input();
  static const TargetControls kNone;
  // decode.suppress's phrases as target pieces, suppressed in every sentence besides its own.
  std::vector<std::vector<int32_t>> suppressed;
  for (const std::string& phrase : options_.search.suppress) {
    std::vector<int32_t> pieces = tokenizer_.tgt().encode(phrase);
    if (!pieces.empty()) suppressed.push_back(std::move(pieces));
  }
  const auto sentences = [&](const std::vector<const std::vector<int32_t>*>& srcs,
                             const std::vector<const TargetControls*>& ctl, const std::vector<int64_t>& limits) {
    std::vector<SearchSentence> out;
    for (size_t i = 0; i < srcs.size(); ++i) {
      const TargetControls& c = ctl.empty() || !ctl[i] ? kNone : *ctl[i];
      out.push_back({limits[i], c.prefix, seed_of(*srcs[i], c.prefix), c.constraints, suppressed, c.spans,
                     source_words(*srcs[i])});
      out.back().suppress.insert(out.back().suppress.end(), c.suppress.begin(), c.suppress.end());
      if (std::any_of(c.spans.begin(), c.spans.end(), [](const auto& span) { return span.first >= 0; })) {
        for (const auto& span : c.spans) {
          out.back().span_words.push_back(span.first >= 0 ? span_words(*srcs[i], span, c.prefix)
                                                          : std::vector<int32_t>{});
        }
        for (size_t p = 0; p < c.forms.size() && p < c.spans.size(); ++p) {  // each form's own words: its source
          out.back().forms.resize(c.forms.size());                           // form in the span's place, alone
          for (const TargetControls::Form& form : c.forms[p]) {
            const auto [begin, end] = c.spans[p];
            if (begin < 0 || end > int64_t(srcs[i]->size())) continue;
            std::vector<int32_t> source(srcs[i]->begin(), srcs[i]->begin() + begin);
            source.insert(source.end(), form.source.begin(), form.source.end());
            source.insert(source.end(), srcs[i]->begin() + end, srcs[i]->end());
            const std::pair<int64_t, int64_t> at{begin, begin + int64_t(form.source.size())};
            out.back().forms[p].push_back({form.target, span_words(source, at, c.prefix)});
          }
        }
      }
    }
    return out;
  };
  in.sentences = sentences(sources, controls, first.max_lengths);
  if (std::any_of(in.sentences.begin(), in.sentences.end(),
                  [](const SearchSentence& s) { return !s.constraints.empty(); })) {
    in.continues_word = continues_word();
    in.starts_word = starts_word();
  }
  // The step's attention: asked for; averaged over layers too where phrases tied to source words read it
  // (SearchSentence::spans).
  const bool keep_attention = options_.search.return_attention;
  const bool tie =
      std::any_of(in.sentences.begin(), in.sentences.end(), [](const SearchSentence& s) { return !s.spans.empty(); });
  std::unique_ptr<JoinableStep> step;
  if (models_.size() == 1) {
    step = std::make_unique<ModelStep>(models_.front(), models_.front()->encode(first.src), keep_attention, tie);
  } else {
    std::vector<std::unique_ptr<ModelStep>> members;
    for (size_t m = 0; m < models_.size(); ++m) {
      members.push_back(std::make_unique<ModelStep>(models_[m], models_[m]->encode(first.src), m == 0 && keep_attention,
                                                    m == 0 && tie));
    }
    step = std::make_unique<EnsembleStep>(std::move(members));
  }
  // Every sentence's source (the admitted ones too): to search a sentence again (SearchInput::rejoin), and with
  // return_attention to cut its hypotheses' attention down to its pieces.
  const bool attention = options_.search.return_attention;
  std::vector<std::vector<int32_t>> searched;
  for (const auto* src : sources) searched.push_back(*src);
  in.rejoin = [&](int64_t s) { step->join(prepare({&searched[size_t(s)]}).src); };
  if (admit) {
    auto numbered = int64_t(sources.size());  // sentences so far, as on_done numbers them
    in.admit = [&, numbered](int64_t searching) mutable {
      const std::vector<std::vector<int32_t>> admitted = clip(admit(searching));
      if (admitted.empty()) return std::vector<SearchSentence>{};
      searched.insert(searched.end(), admitted.begin(), admitted.end());
      std::vector<const std::vector<int32_t>*> view;
      for (const auto& s : admitted) view.push_back(&s);
      std::vector<TargetControls> admitted_controls;
      for (size_t i = 0; i < admitted.size(); ++i)
        admitted_controls.push_back(controls_of ? controls_of(numbered + int64_t(i)) : TargetControls{});
      numbered += int64_t(admitted.size());
      std::vector<const TargetControls*> controls_view;
      for (const auto& c : admitted_controls) controls_view.push_back(&c);
      const Encoded joining = prepare(view);
      step->join(joining.src);
      std::vector<SearchSentence> joined = sentences(view, controls_view, joining.max_lengths);
      for (const auto& s : joined) {
        if (!s.constraints.empty() && in.starts_word.empty()) {
          in.continues_word = continues_word();
          in.starts_word = starts_word();
        }
      }
      return joined;
    };
  }
  in.abandoned = abandoned;
  if (!attention) {
    in.on_done = on_done;
    return beam_search(*step, options_.search, in);
  }
  if (on_done) {
    in.on_done = [&](int64_t sentence, const std::vector<Hypothesis>& hypotheses) {
      std::vector<Hypothesis> cut = hypotheses;
      for (Hypothesis& h : cut) attention_over_pieces(h, searched[size_t(sentence)]);
      on_done(sentence, cut);
    };
  }
  std::vector<std::vector<Hypothesis>> out = beam_search(*step, options_.search, in);
  for (size_t i = 0; i < out.size(); ++i) {
    for (Hypothesis& h : out[i]) attention_over_pieces(h, searched[i]);
  }
  return out;
}

void Translator::attention_over_pieces(Hypothesis& h, const std::vector<int32_t>& source) const {
  // The source's pieces among the encoder's positions: [code] pieces </s>, or pieces </s> code (legacy NLLB).
  const tokenizer::Languages& languages = tokenizer_.languages();
  int64_t first = 0, n = int64_t(source.size());
  if (complete_source(source)) {
    n -= 2;
  } else if (!source.empty() && std::any_of(languages.begin(), languages.end(),
                                            [&](const auto& l) { return l.second == source.front(); })) {
    first = 1;
    n -= 1;
  }
  for (std::vector<float>& row : h.attention) {
    std::vector<float> pieces(size_t(std::max<int64_t>(n, 0)), 0.0f);
    for (int64_t j = 0; j < n && first + j < int64_t(row.size()); ++j) pieces[size_t(j)] = row[size_t(first + j)];
    row = std::move(pieces);
  }
}

std::vector<std::vector<int32_t>> Translator::clip(std::vector<std::vector<int32_t>> sources) const {
  const int64_t keep = max_source_tokens();
  for (auto& s : sources) {
    if (int64_t(s.size()) > keep) s.resize(size_t(keep));
  }
  return sources;
}

std::vector<std::vector<Hypothesis>> Translator::translate_continuously(
    const std::vector<std::vector<int32_t>>& sources, const AdmitSources& admit, const SentenceDone& on_done,
    const Abandoned& abandoned, const ControlsOf& controls_of) {
  // Inference mode, not just no gradients: LibTorch then skips its autograd and view bookkeeping on every call,
  // which a search of a few sentences makes thousands of per step. No tensor made here outlives the search.
  c10::InferenceMode inference;
  if (sources.empty()) return {};
  const std::vector<std::vector<int32_t>> first = clip(sources);
  std::vector<const std::vector<int32_t>*> view;
  for (const auto& s : first) view.push_back(&s);
  std::vector<TargetControls> controls;
  std::vector<const TargetControls*> controls_view;
  if (controls_of) {
    for (size_t i = 0; i < first.size(); ++i) controls.push_back(controls_of(int64_t(i)));
    for (const auto& c : controls) controls_view.push_back(&c);
  }
  return search_batch(view, controls_view, on_done, admit, abandoned, controls_of);
}

std::vector<std::vector<Hypothesis>> Translator::translate_ids(const std::vector<std::vector<int32_t>>& sources,
                                                               const SentenceDone& on_done, const Abandoned& abandoned,
                                                               const std::vector<TargetControls>& controls) {
  TORCH_CHECK(controls.empty() || controls.size() == sources.size(), "translate_ids: ", controls.size(),
              " target controls for ", sources.size(), " sources");
  c10::InferenceMode inference;  // as in translate_continuously
  const int64_t keep = max_source_tokens();
  std::vector<std::vector<int32_t>> cut;  // only the sources that need cutting
  std::vector<const std::vector<int32_t>*> view(sources.size());
  for (size_t i = 0; i < sources.size(); ++i) view[i] = &sources[i];
  for (size_t i = 0; i < sources.size(); ++i) {
    if (int64_t(sources[i].size()) > keep) cut.emplace_back(sources[i].begin(), sources[i].begin() + keep);
  }
  for (size_t i = 0, c = 0; i < sources.size(); ++i) {
    if (int64_t(sources[i].size()) > keep) view[i] = &cut[c++];
  }
  // Longest first, so batches hold similar lengths; the budget counts padding.
  std::vector<size_t> order(sources.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return view[a]->size() > view[b]->size(); });
  std::vector<std::pair<size_t, size_t>> batches;  // [begin, end) of `order`
  for (size_t begin = 0; begin < order.size();) {
    const int64_t longest = int64_t(view[order[begin]]->size()) + 1;
    const size_t fit = size_t(std::max<int64_t>(1, options_.search.batch_tokens / longest));
    const size_t end = std::min(order.size(), begin + fit);
    batches.emplace_back(begin, end);
    begin = end;
  }
  std::vector<std::vector<Hypothesis>> out(sources.size());
  // Part w of a batch cut in W takes its sentences w, w + W, ... (neighbours in length order, so the parts are
  // alike). Each part is one search.
  const auto search_part = [&](const std::pair<size_t, size_t>& batch_range, size_t w, size_t parts) {
    std::vector<size_t> mine;
    for (size_t i = batch_range.first + w; i < batch_range.second; i += parts) mine.push_back(order[i]);
    if (mine.empty()) return;
    // A part whose every sentence is given up is not even encoded (a stopped call ends at once).
    if (abandoned && std::all_of(mine.begin(), mine.end(), [&](size_t i) { return abandoned(int64_t(i)); })) return;
    std::vector<const std::vector<int32_t>*> batch;
    std::vector<const TargetControls*> batch_controls;
    for (const size_t i : mine) batch.push_back(view[i]);
    if (!controls.empty())
      for (const size_t i : mine) batch_controls.push_back(&controls[i]);
    SentenceDone tell;
    if (on_done) {
      tell = [&](int64_t i, const std::vector<Hypothesis>& h) { on_done(int64_t(mine[size_t(i)]), h); };
    }
    Abandoned given_up;
    if (abandoned) given_up = [&](int64_t i) { return abandoned(int64_t(mine[size_t(i)])); };
    auto results = search_batch(batch, batch_controls, tell, {}, given_up);
    for (size_t i = 0; i < mine.size(); ++i) out[mine[i]] = std::move(results[i]);
  };
  const bool cpu = models_.front()->parameters().front().device().is_cpu();
  const int64_t workers = options_.workers > 0 ? options_.workers : at::get_num_threads();
  const auto parts = size_t(std::min<int64_t>(workers, int64_t(order.size())));
  if (!cpu || parts <= 1 || at::get_num_threads() < 2 || at::in_parallel_region()) {
    for (const auto& range : batches) search_part(range, 0, 1);
    return out;
  }
  // One std::thread per search, each with LibTorch's kernels and the BLAS on that thread alone. The threads take
  // the next part of the next batch as they come free, so that a thread on a slower (or busier) core does fewer
  // and none waits for it at the end; which thread runs a part changes nothing in its translations.
  std::atomic<size_t> next{0};
  const size_t tasks = batches.size() * parts;
  std::vector<std::exception_ptr> errors(parts);
  {
    std::vector<std::thread> threads;
    threads.reserve(parts);
    for (size_t w = 0; w < parts; ++w) {
      threads.emplace_back([&, w] {
        try {
          use_one_thread_here();
          c10::InferenceMode inference;  // per thread
          for (size_t t = next++; t < tasks; t = next++) search_part(batches[t / parts], t % parts, parts);
        } catch (...) {
          errors[w] = std::current_exception();
        }
      });
    }
    for (auto& t : threads) t.join();
  }
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return out;
}

namespace {

// The source positions [begin, end) of the pieces that spell the whitespace-separated words of `text` that bytes
// [begin, end) touch (align.h's word_of_pieces), after a leading language token when `code_first`.
std::pair<int64_t, int64_t> piece_span(const tokenizer::Model& src, const std::string& text, size_t begin, size_t end,
                                       bool code_first) {
  const auto space = [](char c) { return c == ' ' || c == '\t'; };
  int64_t word = -1, first_word = -1, last_word = -1;
  for (size_t i = 0; i < text.size() && i < end; ++i) {
    if (!space(text[i]) && (i == 0 || space(text[i - 1]))) ++word;
    if (i >= begin && !space(text[i])) {
      if (first_word < 0) first_word = word;
      last_word = word;
    }
  }
  if (first_word < 0) return {-1, -1};
  const std::vector<int32_t> pieces = src.encode(text);
  const std::vector<int> words = word_of_pieces(src, pieces);
  int64_t from = -1, to = -1;
  for (size_t p = 0; p < words.size(); ++p) {
    if (words[p] < first_word || words[p] > last_word) continue;
    if (from < 0) from = int64_t(p);
    to = int64_t(p) + 1;
  }
  if (from < 0) return {-1, -1};
  const int64_t shift = code_first ? 1 : 0;
  return {from + shift, to + shift};
}

}  // namespace

TargetControls Translator::target_controls(const LineControls& controls, int64_t line, const std::string& text,
                                           bool code_first) const {
  TargetControls out;
  const int32_t target = controls.target_lang.empty()
                             ? target_code_
                             : language_id(tokenizer_.languages(), controls.target_lang,
                                           "line " + std::to_string(line) + "'s target language");
  if (target >= 0) out.prefix.push_back(target);  // the target language's token first
  if (!controls.prefix.empty()) {
    for (const int32_t id : tokenizer_.tgt().encode(controls.prefix)) out.prefix.push_back(id);
  }
  // The model writes at most max_len - 1 tokens and EOS.
  const int64_t room = max_len_ - 1;
  if (int64_t(out.prefix.size()) > room) {
    log::warn("line {}: the target prefix has {} tokens; the model writes at most {}: it is cut", line,
              out.prefix.size(), room);
    out.prefix.resize(size_t(room));
  }
  auto used = int64_t(out.prefix.size());
  bool tied = false;
  for (size_t i = 0; i < controls.constraints.size(); ++i) {
    const std::string& phrase = controls.constraints[i];
    std::vector<int32_t> ids = tokenizer_.tgt().encode(phrase);
    if (ids.empty()) continue;
    if (used + int64_t(ids.size()) > room) {
      log::warn("line {}: the constraint \"{}\" does not fit in the {} tokens the model writes: it is dropped", line,
                phrase, room);
      continue;
    }
    used += int64_t(ids.size());
    const auto source = i < controls.sources.size() ? controls.sources[i] : std::pair<size_t, size_t>{};
    out.spans.push_back(source.first < source.second
                            ? piece_span(tokenizer_.src(), text, source.first, source.second, code_first)
                            : std::pair<int64_t, int64_t>{-1, -1});
    tied = tied || out.spans.back().first >= 0;
    std::vector<TargetControls::Form> forms;  // a tied phrase's other forms
    for (size_t f = 0; out.spans.back().first >= 0 && i < controls.forms.size() && f < controls.forms[i].size(); ++f) {
      TargetControls::Form form{tokenizer_.tgt().encode(controls.forms[i][f].second),
                                tokenizer_.src().encode(controls.forms[i][f].first)};
      if (!form.target.empty() && !form.source.empty() && form.target != ids) forms.push_back(std::move(form));
    }
    if (!forms.empty()) {
      out.forms.resize(out.constraints.size() + 1);
      out.forms.back() = std::move(forms);
    }
    out.constraints.push_back(std::move(ids));
  }
  if (!tied) {
    out.spans.clear();
    out.forms.clear();
  }
  for (const std::string& phrase : controls.suppress) {
    std::vector<int32_t> ids = tokenizer_.tgt().encode(phrase);
    if (!ids.empty()) out.suppress.push_back(std::move(ids));
  }
  return out;
}

std::vector<Translation> Translator::translate(const std::vector<std::string>& lines,
                                               const std::vector<LineControls>& controls, const Abandoned& abandoned) {
  TORCH_CHECK(controls.empty() || controls.size() == lines.size(), "translate: ", controls.size(),
              " target controls for ", lines.size(), " lines");
  const tokenizer::Languages& languages = tokenizer_.languages();
  const auto named = [&](std::string LineControls::*field, int32_t fallback) {
    return fallback >= 0 || (!controls.empty() && std::all_of(controls.begin(), controls.end(),
                                                              [&](const auto& c) { return !(c.*field).empty(); }));
  };
  if (!languages.empty() &&
      (!named(&LineControls::source_lang, source_code_) || !named(&LineControls::target_lang, target_code_))) {
    throw ConfigError("this model translates between " + std::to_string(languages.size()) +
                      " languages: name them with --source-lang and --target-lang (e.g. " + languages.front().first +
                      "; mtx info --ckpt lists them), or per line with --language-columns");
  }
  std::vector<Translation> out(lines.size());
  // Each line's source language token, then the lines checked and tokenized as every front end's are
  // (request.h: blank lines left out, long ones cut by the search).
  std::vector<int32_t> codes(lines.size(), source_code_);
  for (size_t i = 0; i < lines.size() && !controls.empty(); ++i) {
    if (!controls[i].source_lang.empty() && !lines[i].empty()) {
      codes[i] =
          language_id(languages, controls[i].source_lang, "line " + std::to_string(i + 1) + "'s source language");
    }
  }
  ValidSources valid = validate_sources(tokenizer_, lines, codes, max_source_tokens(), RequestLimits{},
                                        [](size_t i) { return "line " + std::to_string(i + 1); });
  std::vector<std::vector<int32_t>> sources;
  std::vector<TargetControls> control_ids;
  std::vector<size_t> where;  // sources[i] is lines[where[i]]
  for (size_t i = 0; i < lines.size(); ++i) {
    if (valid.ids[i].empty()) continue;  // empty or blank: nothing to translate
    sources.push_back(std::move(valid.ids[i]));
    if (!controls.empty() || target_code_ >= 0) {
      const bool code_first = codes[i] >= 0 && !tokenizer_.code_after_eos();
      control_ids.push_back(
          target_controls(controls.empty() ? LineControls{} : controls[i], int64_t(i) + 1, lines[i], code_first));
    }
    out[i].truncated = valid.truncated[i];
    where.push_back(i);
  }
  auto hyps = translate_ids(sources, {}, abandoned, control_ids);
  for (size_t j = 0; j < where.size(); ++j) {
    Translation& t = out[where[j]];
    t.hypotheses = std::move(hyps[j]);
    for (const auto& h : t.hypotheses) t.texts.push_back(tokenizer_.tgt().decode(h.tokens));
  }
  return out;
}

std::vector<int32_t> source_ids(const tokenizer::Tokenizer& tokenizer, std::string_view text, int32_t code) {
  if (code < 0) return tokenizer.src().encode(text);
  std::vector<int32_t> ids = tokenizer.encode_source(text, code);
  if (!tokenizer.code_after_eos()) ids.pop_back();  // the translator appends the </s> (prepare)
  return ids;
}

}  // namespace mtx::decode
