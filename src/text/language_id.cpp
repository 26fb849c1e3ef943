#include "mtx/text/language_id.h"

#include <cld2/public/compact_lang_det.h>
#include <cld2/public/encodings.h>

#include <string>

namespace mtx::text {

std::vector<Detection> detect_language(std::string_view text, bool html) {
  CLD2::Language top[3];
  int percent[3] = {0, 0, 0};
  double scores[3] = {0, 0, 0};
  int bytes = 0;
  bool reliable = false;
  // ExtDetectLanguageSummaryCheckUTF8 skips what is not valid UTF-8 instead of reading past it.
  CLD2::CLDHints hints = {nullptr, nullptr, CLD2::UNKNOWN_ENCODING, CLD2::UNKNOWN_LANGUAGE};
  int valid_prefix = 0;
  // kCLDFlagBestEffort: an answer for short text too (sentences of 20-40 characters are what clients send).
  CLD2::ExtDetectLanguageSummaryCheckUTF8(text.data(), int(text.size()), !html, &hints, CLD2::kCLDFlagBestEffort, top,
                                          percent, scores, nullptr, &bytes, &reliable, &valid_prefix);
  std::vector<Detection> out;
  for (int i = 0; i < 3; ++i) {
    if (top[i] == CLD2::UNKNOWN_LANGUAGE || percent[i] <= 0) continue;
    Detection d;
    d.language = find_language(CLD2::LanguageCode(top[i]));
    if (!d.language) continue;
    d.confidence = percent[i];
    d.reliable = reliable && i == 0;
    out.push_back(d);
  }
  return out;
}

}  // namespace mtx::text
