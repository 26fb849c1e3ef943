// Shared between the metric implementations (not part of the public interface).
#pragma once

#include <string>
#include <vector>

#include "mtx/eval/metrics.h"
#include "mtx/util/text.h"

namespace mtx::eval {

using namespace mtx::text;  // Python-semantics Unicode helpers (util/text.h)

// Tokens of an (already lowercased if asked, rstripped) line.
std::vector<std::u32string> bleu_tokens(std::u32string line, BleuTokenizer tokenizer);
std::vector<std::u32string> spacy_en_tokens(std::u32string_view line);
// The words BLEU counts in one segment: lowercased before tokenising (sacreBLEU), or after it for spacy
// (the tutorials lowercased spaCy's tokens), and right-stripped.
std::vector<std::u32string> bleu_words(const std::string& segment, BleuTokenizer tokenizer, bool lowercase);
std::vector<std::u32string> ter_tokens(const std::u32string& line, const TerOptions& options);

// The version field of signatures.
std::string signature_version();

}  // namespace mtx::eval
