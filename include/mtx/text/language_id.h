// Language identification: CLD2 (Debian's libcld2-dev, its 98 languages), the detector of
// Chrome's translation bar. Answers are rows of the language table (text/languages.h), so a caller maps them
// to any model's codes.
#pragma once

#include <string_view>
#include <vector>

#include "mtx/text/languages.h"

namespace mtx::text {

struct Detection {
  const Language* language = nullptr;  // nullptr: unknown
  double confidence = 0;               // 0-100: CLD2's share of the text's bytes in this language
  bool reliable = false;               // CLD2's own judgement (enough text, a clear winner)
};

// The languages of `text` (UTF-8; invalid bytes are skipped), most likely first; at most three, none when CLD2
// knows none of them. HTML tags and entities are skipped when `html`. Thread-safe.
std::vector<Detection> detect_language(std::string_view text, bool html = false);

}  // namespace mtx::text
