// A paragraph as the readers see it (private to src/doc/): text, the opening and closing of inline elements (a run's
// formatting, a link, a subtitle's <i>) and points (whatever is not text: a tab, an image, a field, a bookmark),
// each element and point named by an id the reader keeps. Paragraphs go to the text layer as HTML fragments and
// come back as the same ids on the translated text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mtx/doc/document.h"

namespace mtx::doc {

struct Inline {
  enum Kind : uint8_t { text, open, close, point, space_point } kind = text;
  std::string value;  // kind text
  int id = -1;        // open, point, space_point (a point that also separates words: a tab, a line break)
};
using Inlines = std::vector<Inline>;

// Adds text to `p`, merged with text before it.
void add_text(Inlines& p, std::string_view text);

// The paragraph as an HTML fragment: elements as <span data-m="id">, points as <img data-m="id">, space points as
// <br data-m="id">, text escaped.
std::string to_html(const Inlines& p);
// The paragraph back from what the text layer rendered of to_html's fragment. Throws Error for anything else.
Inlines from_html(std::string_view html);

// Whether a paragraph has text to translate (anything but whitespace).
bool has_words(const Inlines& p);

// `paragraphs` translated with `translate` as HTML fragments, in batches, calling `progress` after each; a
// paragraph without words comes back as it is. DataError naming `name` for a paragraph that is not valid UTF-8.
std::vector<Inlines> translate_paragraphs(const std::vector<Inlines>& paragraphs, const std::string& name,
                                          const Translate& translate, const Progress& progress);

}  // namespace mtx::doc
