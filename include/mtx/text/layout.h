// A text's layout: the sentences a model translates, and how their translations go back into the text.
//
// Plain text: the segmenter's sentences (text/segment.h); everything between them -- spaces, line breaks, blank
// lines -- comes back byte for byte. HTML: each block's inline content (the text of a p, li, td, h1, ... with
// its b, i, a, span, br, img, ...) is translated as whole sentences, and its inline elements are put back on the
// target words aligned to the source words they wrapped (bergamot-translator's method): well nested, each
// element exactly once, tags byte for byte as written (attributes, entities and all). Elements with
// translate="no" or class="notranslate", and code, pre, script, style, template, textarea, are kept untouched;
// comments are kept. Everything outside the translated text is copied as it is.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "mtx/text/segment.h"

namespace mtx::text {

enum class Format { text, html };
// "text" or "html"; ConfigError naming `field` otherwise.
Format parse_format(const std::string& name, const std::string& field);

// An inline element of HTML over a run's source words (internal to layout and render).
struct InlineElement {
  std::string open, close;              // as written ("" close: a void element, a comment or something kept untouched)
  int parent = -1;                      // index of the enclosing element in the run, -1: none
  size_t first_char = 0, end_char = 0;  // over the run's text
  int first_word = 0, end_word = 0;     // over the run's source words (equal: a point before first_word)
};

// Consecutive text translated together: one plain-text sentence, or one HTML block's inline content.
struct Run {
  Range bytes;  // what the rendering replaces in the original
  size_t first_sentence = 0, sentences = 0;
  std::vector<int> words;               // per sentence: its source words (whitespace-separated)
  std::vector<InlineElement> elements;  // in document order (parents first)
  bool markup = false;                  // HTML: words joined by one space, text escaped
};

struct Layout {
  Format format = Format::text;
  std::string original;
  std::vector<std::string> sentences;  // one line each, what the model translates
  // Per sentence: whether its markup needs word alignments to be placed (an element starts, ends or sits inside
  // it). Sentences without are placed by position alone.
  std::vector<uint8_t> needs_alignment;
  std::vector<Run> runs;  // in text order, not overlapping
};

// `fits(sentence)`: whether the model takes it whole; a sentence that does not is cut at clause boundaries
// (Segmenter::clauses). Any input lays out (HTML5's error recovery for markup). `text` must be valid UTF-8.
using Fits = std::function<bool(std::string_view)>;
Layout layout(std::string text, Format format, const Segmenter& segmenter, const Fits& fits);

// Alignment of one sentence: per target word (whitespace-separated word of its translation), the source word it
// is aligned to (-1: none). Empty: placed by position.
using WordLinks = std::vector<int>;

// The text with each sentence replaced by its translation. translations.size() == sentences.size(); links:
// empty, or one per sentence.
std::string render(const Layout& layout, const std::vector<std::string>& translations,
                   const std::vector<WordLinks>& links = {});

// The whitespace-separated words of `s`, as [begin, end) byte ranges.
std::vector<Range> words_of(std::string_view s);

}  // namespace mtx::text
