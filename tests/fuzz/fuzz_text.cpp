// The text layer's layouts (text/layout.h) on any valid UTF-8 text, plain or as HTML: every sentence is one
// non-empty line; plain text rendered with its own sentences is the text byte for byte; HTML renders with its
// sentences, with other translations and with made-up word links without throwing, and keeps its element count.
#include <algorithm>
#include <string>

#include "fuzz_util.h"
#include "mtx/text/layout.h"
#include "mtx/util/utf8.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const mtx::text::Segmenter segmenter("de");
  const bool html = data[0] & 1;
  const size_t limit = 8 + data[0] / 2;  // small pieces, so that the clause split runs
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (!mtx::utf8::is_valid(text)) return 0;
  const auto fits = [limit](std::string_view s) { return s.size() <= limit; };
  const mtx::text::Layout l =
      mtx::text::layout(text, html ? mtx::text::Format::html : mtx::text::Format::text, segmenter, fits);
  if (l.needs_alignment.size() != l.sentences.size()) mtx::fuzz::broken("needs_alignment is not per sentence");
  for (const auto& s : l.sentences) {
    if (s.empty()) mtx::fuzz::broken("an empty sentence");
    if (s.find_first_of("\r\n") != std::string::npos) mtx::fuzz::broken("a sentence with a line break");
  }
  const std::string same = mtx::text::render(l, l.sentences);
  if (!html && same != text) mtx::fuzz::broken("plain text rendered with its own sentences changed");
  // Other translations (more words, fewer) and links to any word.
  std::vector<std::string> other;
  std::vector<mtx::text::WordLinks> links;
  for (size_t i = 0; i < l.sentences.size(); ++i) {
    other.push_back(i % 2 ? "x y z w" : "<&>");
    links.push_back(i % 3 ? mtx::text::WordLinks{int(i) - 1, 7, 0, -1} : mtx::text::WordLinks{});
  }
  const std::string rendered = mtx::text::render(l, other, links);
  if (html) {
    const auto opens = [](const std::string& s) { return std::count(s.begin(), s.end(), '<'); };
    // Each element once: the rendering has as many '<' as the source's markup kept (text is escaped).
    if (opens(rendered) != opens(same)) mtx::fuzz::broken("an element was lost or doubled");
  }
  return 0;
}
