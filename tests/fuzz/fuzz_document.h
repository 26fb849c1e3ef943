// Shared by the document readers' libFuzzer targets (fuzz_ooxml, fuzz_odf, fuzz_subtitles): byte 0 picks one of
// the target's formats, the rest is the file. A file is translated twice -- by a translator that returns its
// texts as they are, and by one that reverses each text's words through the text layer's placement -- and what
// the first wrote must read back with as many texts. Refusals (mtx::Error: a damaged file, a bomb) pass.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "mtx/doc/document.h"
#include "mtx/util/errors.h"

namespace mtx::fuzz {

inline int document(const uint8_t* data, size_t size, const std::vector<mtx::doc::Format>& formats) {
  if (size < 2) return 0;
  const mtx::doc::Format format = formats[data[0] % formats.size()];
  const std::string file(reinterpret_cast<const char*>(data) + 1, size - 1);
  mtx::doc::Limits limits;
  limits.max_inflated_bytes = limits.max_entry_bytes = 16 << 20;  // within the fuzzer's memory
  size_t texts = 0;
  const mtx::doc::Translate same = [&texts](const std::vector<std::string>& t, mtx::text::Format) {
    texts += t.size();
    return t;
  };
  const mtx::doc::Translate reversed = [](const std::vector<std::string>& t, mtx::text::Format f) {
    static const mtx::text::Segmenter segmenter("de");
    std::vector<std::string> out;
    for (const std::string& s : t) {
      const mtx::text::Layout l = mtx::text::layout(s, f, segmenter, nullptr);
      std::vector<std::string> translations;
      std::vector<mtx::text::WordLinks> links;
      for (const std::string& sentence : l.sentences) {
        std::vector<mtx::text::Range> w = mtx::text::words_of(sentence);
        std::string r;
        mtx::text::WordLinks link;
        for (size_t i = w.size(); i-- > 0;) {
          r += (r.empty() ? "" : " ") + sentence.substr(w[i].begin, w[i].size());
          link.push_back(int(i));
        }
        translations.push_back(r);
        links.push_back(link);
      }
      out.push_back(mtx::text::render(l, translations, links));
    }
    return out;
  };
  std::string written;
  try {
    written = mtx::doc::translate_document(file, format, "fuzz", same, limits);
  } catch (const mtx::DataError&) {
    return 0;  // refused, with its one line
  }
  const size_t first = texts;
  texts = 0;
  mtx::doc::translate_document(written, format, "fuzz", same, limits);
  if (texts != first) broken("a document written back reads with another number of texts");
  mtx::doc::translate_document(file, format, "fuzz", reversed, limits);
  return 0;
}

}  // namespace mtx::fuzz
