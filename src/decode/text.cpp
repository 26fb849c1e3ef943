#include "mtx/decode/text.h"

#include <algorithm>

#include "mtx/decode/align.h"
#include "mtx/util/errors.h"
#include "mtx/util/utf8.h"

namespace mtx::decode {

text::Fits fits_in(const tokenizer::Tokenizer& tokenizer, int64_t max_tokens) {
  return [&tokenizer, max_tokens](std::string_view s) {
    // Cheap first: a sentence has at most twice as many pieces as bytes (a word's "▁" alone and its letters).
    if (2 * int64_t(s.size()) <= max_tokens) return true;
    return int64_t(tokenizer.src().encode(s).size()) <= max_tokens;
  };
}

std::vector<int32_t> without_language(const tokenizer::Tokenizer& tokenizer, const std::vector<int32_t>& tokens) {
  const tokenizer::Languages& languages = tokenizer.languages();
  if (tokens.empty() || languages.empty()) return tokens;
  const bool code =
      std::any_of(languages.begin(), languages.end(), [&](const auto& l) { return l.second == tokens[0]; });
  return code ? std::vector<int32_t>(tokens.begin() + 1, tokens.end()) : tokens;
}

std::vector<text::WordLinks> links_for(model::Transformer& model, const tokenizer::Tokenizer& tokenizer,
                                       const text::Layout& layout, const std::vector<std::vector<int32_t>>& sources,
                                       const std::vector<std::vector<int32_t>>& targets) {
  std::vector<text::WordLinks> links(layout.sentences.size());
  std::vector<size_t> which;
  std::vector<const std::vector<int32_t>*> src, tgt;
  for (size_t i = 0; i < links.size() && i < sources.size() && i < targets.size(); ++i) {
    if (!layout.needs_alignment[i] || sources[i].empty() || targets[i].empty()) continue;
    which.push_back(i);
    src.push_back(&sources[i]);
    tgt.push_back(&targets[i]);
  }
  // One batched pass for every sentence that needs it.
  const std::vector<WordAlignment> a = align_batch(model, tokenizer, src, tgt);
  for (size_t k = 0; k < which.size(); ++k) links[which[k]].assign(a[k].hard.begin(), a[k].hard.end());
  return links;
}

text::Segmenter segmenter_for(const config::Config& config, const std::string& code) {
  return text::Segmenter(code.empty() ? config.data.src_lang : code);
}

std::vector<std::string> translate_texts(Translator& translator, const std::vector<std::string>& texts,
                                         text::Format format, const text::Segmenter& segmenter,
                                         const Abandoned& abandoned) {
  const tokenizer::Tokenizer& tok = translator.tokenizer();
  const text::Fits fits = fits_in(tok, translator.max_source_tokens());
  std::vector<text::Layout> layouts;
  std::vector<std::string> sentences;
  for (size_t t = 0; t < texts.size(); ++t) {
    const size_t invalid = utf8::find_invalid(texts[t]);
    if (invalid != utf8::kValid) {
      throw DataError("text " + std::to_string(t + 1) + " is not valid UTF-8 (byte " + std::to_string(invalid) + ")");
    }
    layouts.push_back(text::layout(texts[t], format, segmenter, fits));
    sentences.insert(sentences.end(), layouts.back().sentences.begin(), layouts.back().sentences.end());
  }
  std::vector<Translation> translated = translator.translate(sentences, {}, abandoned);
  std::vector<std::string> out;
  size_t at = 0;
  for (const text::Layout& l : layouts) {
    std::vector<std::string> parts;
    std::vector<std::vector<int32_t>> sources, targets;
    const bool any = std::any_of(l.needs_alignment.begin(), l.needs_alignment.end(), [](uint8_t n) { return n; });
    for (size_t i = 0; i < l.sentences.size(); ++i, ++at) {
      const Translation& tr = translated[at];
      parts.push_back(tr.texts.empty() ? "" : tr.texts.front());
      if (any) {
        sources.push_back(l.needs_alignment[i] ? tok.src().encode(l.sentences[i]) : std::vector<int32_t>{});
        targets.push_back(l.needs_alignment[i] && !tr.hypotheses.empty()
                              ? without_language(tok, tr.hypotheses.front().tokens)
                              : std::vector<int32_t>{});
      }
    }
    out.push_back(text::render(
        l, parts, any ? links_for(translator.model(), tok, l, sources, targets) : std::vector<text::WordLinks>{}));
  }
  return out;
}

}  // namespace mtx::decode
