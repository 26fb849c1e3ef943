// Text, not sentences: the translator's side of the text layer (text/layout.h). A text -- running prose or an
// HTML fragment -- is laid out into sentences, its sentences are tokenized and translated in one batch with every
// other sentence of the call, and the translations go back where their sources stood; inline markup is placed on
// the target words aligned to its source words (align.h). The CLI, the server and the Python package translate
// text through these functions, so a text comes out the same from each.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "mtx/decode/glossary.h"
#include "mtx/decode/translator.h"
#include "mtx/text/layout.h"
#include "mtx/text/segment.h"

namespace mtx::decode {

// Whether a sentence fits `tokenizer`'s source side in `max_tokens` pieces (the layout's clause split).
text::Fits fits_in(const tokenizer::Tokenizer& tokenizer, int64_t max_tokens);

// Texts laid out for one call: their sentences, in order, are what gets translated.
struct TextPlan {
  std::vector<text::Layout> layouts;
  std::vector<std::string> sentences;
};

// `texts` laid out as `format` says; a sentence over `max_tokens` source pieces is cut with `segmenter`'s
// clauses. Throws InvalidRequest (request.h) naming `where(t)` for a text that is not valid UTF-8.
TextPlan plan_texts(const tokenizer::Tokenizer& tokenizer, int64_t max_tokens, const std::vector<std::string>& texts,
                    text::Format format, const text::Segmenter& segmenter,
                    const std::function<std::string(size_t)>& where);

// The plan's texts from one hypothesis per sentence (`chosen[i]`: sentence i's, null for none): each translation
// where its source stood, inline markup placed on the target words aligned to its source words. The alignments
// of every sentence that needs one come from one batched pass over the model (align_batch), which leaves the
// model as it is: safe while other threads search with it.
std::vector<std::string> render_texts(model::Transformer& model, const tokenizer::Tokenizer& tokenizer,
                                      const TextPlan& plan, const std::vector<const Hypothesis*>& chosen);

// A hypothesis' tokens without a multilingual model's leading target-language token.
std::vector<int32_t> without_language(const tokenizer::Tokenizer& tokenizer, const std::vector<int32_t>& tokens);

// `texts` translated with `translator` (its languages and options), each laid out as `format` says and cut with
// `segmenter`. Empty and all-blank texts come back as they are. `abandoned`: as Translator::translate's.
// `glossary`: each sentence's terms take the place of the model's words for their source words, as in lines
// (stream.h's add_glossary_terms); inline markup on a term's source words goes on the term.
std::vector<std::string> translate_texts(Translator& translator, const std::vector<std::string>& texts,
                                         text::Format format, const text::Segmenter& segmenter,
                                         const Abandoned& abandoned = {}, const Glossary* glossary = nullptr);

// The segmenter for a model's source language: `code` (a multilingual model's, in any scheme) or its config's.
text::Segmenter segmenter_for(const config::Config& config, const std::string& code = "");

}  // namespace mtx::decode
