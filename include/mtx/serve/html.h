// The text of an HTML fragment, for translation that keeps its markup (LibreTranslate's format "html"): Gumbo
// (Debian's libgumbo, an HTML5 parser) finds the text nodes; each becomes one sentence, and the translations go
// back where their sources stood, byte for byte around them.
#pragma once

#include <string>
#include <vector>

namespace mtx::serve::html {

// One text node with something to translate: bytes [begin, end) of the fragment as written (entities and all),
// and its text as one line (entities decoded, whitespace runs one space, trimmed).
struct Span {
  size_t begin = 0, end = 0;
  std::string text;
  std::string lead, trail;  // the node's leading and trailing whitespace, kept around its translation
};

// The text nodes of `fragment` outside <script>, <style>, <template> and comments, in document order, that hold
// more than whitespace. Any input parses (HTML5's error recovery); nothing throws but std::bad_alloc.
std::vector<Span> text_spans(const std::string& fragment);

// `fragment` with each span's bytes replaced by its translation (escaped for HTML text: & < > as entities),
// inside its leading and trailing whitespace. translations.size() == spans.size().
std::string replace(const std::string& fragment, const std::vector<Span>& spans,
                    const std::vector<std::string>& translations);

}  // namespace mtx::serve::html
