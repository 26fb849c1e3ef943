// Sentence segmentation of running text: ICU's sentence BreakIterator (Debian's libicu) with its per-language
// abbreviation suppressions ("z. B.", "Dr.", "e.g." do not end a sentence), and a clause split for a sentence
// longer than a model takes. Offsets are UTF-8 byte offsets into the text as given; what lies between two
// sentences (spaces, line breaks, blank lines) is never part of either, so text can be put back byte for byte.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace mtx::text {

// Bytes [begin, end) of a text.
struct Range {
  size_t begin = 0, end = 0;
  size_t size() const { return end - begin; }
  bool operator==(const Range& o) const { return begin == o.begin && end == o.end; }
};

class Segmenter {
 public:
  // `language`: any code the language table knows (de, deu, deu_Latn, de_DE; "" or an unknown one: ICU's root
  // rules, no abbreviations). Thread-safe after construction.
  explicit Segmenter(const std::string& language = "");
  ~Segmenter();
  Segmenter(Segmenter&&) noexcept;
  Segmenter& operator=(Segmenter&&) noexcept;

  // The sentences of `text`, in order, without the whitespace around them. A line break always ends a sentence
  // (ICU's rule: lists, headings and verse keep their lines). Text that is all whitespace has none. `text` must
  // be valid UTF-8.
  std::vector<Range> sentences(std::string_view text) const;

  // `sentence` (a range of `text`) cut at clause boundaries (after , ; : and before a dash or an opening
  // bracket; at spaces where a clause alone is still too long) into the fewest consecutive pieces that each
  // `fits`, without the whitespace between them. A piece of one word that does not fit is kept whole: the
  // translator cuts it.
  static std::vector<Range> clauses(std::string_view text, Range sentence,
                                    const std::function<bool(std::string_view)>& fits);

  const std::string& locale() const;  // the ICU locale the rules come from ("de@ss=standard")

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

bool is_space(std::string_view text, size_t at, size_t* length = nullptr);  // a Unicode White_Space character

}  // namespace mtx::text
