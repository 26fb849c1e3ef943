#include "mtx/decode/text.h"

#include <algorithm>

#include "mtx/decode/align.h"
#include "mtx/decode/request.h"
#include "mtx/decode/stream.h"
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

text::Segmenter segmenter_for(const config::Config& config, const std::string& code) {
  return text::Segmenter(code.empty() ? config.data.src_lang : code);
}

TextPlan plan_texts(const tokenizer::Tokenizer& tokenizer, int64_t max_tokens, const std::vector<std::string>& texts,
                    text::Format format, const text::Segmenter& segmenter,
                    const std::function<std::string(size_t)>& where) {
  const text::Fits fits = fits_in(tokenizer, max_tokens);
  TextPlan plan;
  for (size_t t = 0; t < texts.size(); ++t) {
    const size_t invalid = utf8::find_invalid(texts[t]);
    if (invalid != utf8::kValid) {
      throw InvalidRequest(where(t) + " is not valid UTF-8 (byte " + std::to_string(invalid) + ")", false);
    }
    plan.layouts.push_back(text::layout(texts[t], format, segmenter, fits));
    const auto& s = plan.layouts.back().sentences;
    plan.sentences.insert(plan.sentences.end(), s.begin(), s.end());
  }
  return plan;
}

std::vector<std::string> render_texts(model::Transformer& model, const tokenizer::Tokenizer& tokenizer,
                                      const TextPlan& plan, const std::vector<const Hypothesis*>& chosen) {
  std::vector<std::vector<text::WordLinks>> links(plan.layouts.size());
  for (size_t l = 0; l < plan.layouts.size(); ++l) {
    const auto& needs = plan.layouts[l].needs_alignment;
    if (std::any_of(needs.begin(), needs.end(), [](uint8_t n) { return n; })) {
      links[l].resize(plan.layouts[l].sentences.size());
    }
  }
  // Word links for every sentence whose markup needs them: from the search's own attention where the hypothesis
  // carries it (SearchOptions::return_attention), else from one batched teacher-forced pass for all the others.
  std::vector<std::vector<int32_t>> sources, targets;
  std::vector<text::WordLinks*> pending;  // where each pair of the pass goes
  size_t at = 0;
  for (size_t l = 0; l < plan.layouts.size(); ++l) {
    const text::Layout& layout = plan.layouts[l];
    for (size_t i = 0; i < layout.sentences.size(); ++i, ++at) {
      const Hypothesis* h = at < chosen.size() ? chosen[at] : nullptr;
      if (!layout.needs_alignment[i] || !h) continue;
      std::vector<int32_t> src = tokenizer.src().encode(layout.sentences[i]);
      std::vector<int32_t> tgt = without_language(tokenizer, h->tokens);
      if (src.empty() || tgt.empty()) continue;
      if (h->attention.size() == h->tokens.size()) {
        // Rows of the target's language token, if any, go with it.
        const std::vector<std::vector<float>> rows(h->attention.end() - std::ptrdiff_t(tgt.size()), h->attention.end());
        const WordAlignment a = align_from_search(tokenizer, src, tgt, rows);
        links[l][i].assign(a.hard.begin(), a.hard.end());
        continue;
      }
      sources.push_back(std::move(src));
      targets.push_back(std::move(tgt));
      pending.push_back(&links[l][i]);
    }
  }
  if (!pending.empty()) {
    std::vector<const std::vector<int32_t>*> src, tgt;
    for (size_t k = 0; k < sources.size(); ++k) {
      src.push_back(&sources[k]);
      tgt.push_back(&targets[k]);
    }
    const std::vector<WordAlignment> a = align_batch(model, tokenizer, src, tgt);
    for (size_t k = 0; k < pending.size(); ++k) pending[k]->assign(a[k].hard.begin(), a[k].hard.end());
  }
  std::vector<std::string> out;
  at = 0;
  for (size_t l = 0; l < plan.layouts.size(); ++l) {
    std::vector<std::string> parts;
    for (size_t i = 0; i < plan.layouts[l].sentences.size(); ++i, ++at) {
      const Hypothesis* h = at < chosen.size() ? chosen[at] : nullptr;
      parts.push_back(h ? tokenizer.tgt().decode(h->tokens) : "");
    }
    out.push_back(text::render(plan.layouts[l], parts, links[l]));
  }
  return out;
}

std::vector<std::string> translate_texts(Translator& translator, const std::vector<std::string>& texts,
                                         text::Format format, const text::Segmenter& segmenter,
                                         const Abandoned& abandoned, const Glossary* glossary) {
  const tokenizer::Tokenizer& tok = translator.tokenizer();
  const TextPlan plan = plan_texts(tok, translator.max_source_tokens(), texts, format, segmenter,
                                   [](size_t t) { return "text " + std::to_string(t + 1); });
  std::vector<LineControls> controls;
  if (glossary) {
    controls.resize(plan.sentences.size());
    for (size_t i = 0; i < plan.sentences.size(); ++i) add_glossary_terms(*glossary, plan.sentences[i], controls[i]);
  }
  const std::vector<Translation> translated = translator.translate(plan.sentences, controls, abandoned);
  std::vector<const Hypothesis*> chosen;
  for (const Translation& t : translated) chosen.push_back(t.hypotheses.empty() ? nullptr : &t.hypotheses.front());
  return render_texts(translator.model(), tok, plan, chosen);
}

}  // namespace mtx::decode
