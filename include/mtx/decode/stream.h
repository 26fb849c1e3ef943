// Streaming translation: read lines in chunks, translate each chunk, write and flush, so a stream of
// any length runs in bounded memory and the first translations appear before the input ends. Exactly
// one output line per input line in plain mode (empty in -> empty out; invalid UTF-8 -> reported with its
// line number, empty out); in n-best mode `index ||| hypothesis ||| score` lines, index 0-based; with an
// alignment, ` ||| 0-0 1-2 ...` after each hypothesis.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "mtx/decode/glossary.h"
#include "mtx/decode/translator.h"

namespace mtx::decode {

// Where lines come from. ready(): another line can be had without waiting (used to cut a chunk short
// when the producer is slow, so earlier lines are not held back).
class LineSource {
 public:
  virtual ~LineSource() = default;
  virtual bool next(std::string& line) = 0;  // false at the end of input
  virtual bool ready() = 0;
};

// A file descriptor (stdin), read through its own buffer; ready() polls without blocking. A line longer
// than max_line_bytes (no model reads that far: sources are cut to the model's max_len tokens anyway) is
// cut to its first max_line_bytes at a character boundary, the rest skipped: memory stays bounded even
// when the input never ends a line.
constexpr size_t kMaxLineBytes = size_t(1) << 20;
std::unique_ptr<LineSource> fd_line_source(int fd, size_t max_line_bytes = kMaxLineBytes);
// A std::istream (files, tests); always ready.
std::unique_ptr<LineSource> istream_line_source(std::istream& in);

struct StreamOptions {
  int chunk_lines = 2000;     // the most lines translated together (memory bound)
  bool nbest_format = false;  // `index ||| hypothesis ||| score` (all n-best entries) instead of plain lines
  std::string align;          // "hard" | "soft": each hypothesis is followed by ` ||| ` and its word alignment
                              // (decode/align.h: Pharaoh pairs, or per target word its source probabilities)
  int align_layer = -1;       // the decoder layer the alignment is read from (negative: from the last)
  // Line-aligned files that steer each line's translation (Translator's LineControls); each must have a line for
  // every input line (DataError naming the file and line otherwise):
  // - prefixes (mtx translate --target-prefix FILE): line i's translation starts with line i ("" for none);
  // - constraints (--constraints FILE): line i is a JSON list of target phrases its translation holds ("" or []
  //   for none).
  struct ControlFile {
    LineSource* lines = nullptr;
    std::string name;  // named in its errors, e.g. "--constraints 'terms.jsonl'"
  };
  ControlFile prefixes{nullptr, "--target-prefix"};
  ControlFile constraints{nullptr, "--constraints"};
  // A glossary (--glossary FILE): the target term of each entry whose source term occurs in a line is one more of
  // its constraints.
  const Glossary* glossary = nullptr;
  // mtx translate --language-columns: each input line is SOURCE_LANG<TAB>TARGET_LANG<TAB>text, a multilingual
  // model's codes for that line (LineControls::source_lang, target_lang); the text alone is translated.
  bool language_columns = false;
  int max_truncation_warnings = 100;  // input lines cut named one by one, then only counted
  // Set: asked at every search step; once it answers true the searches stop and the stream ends after the
  // chunk (the Python package's Ctrl-C).
  Abandoned abandoned;
};

struct StreamStats {
  int64_t lines = 0;
  int64_t translated = 0;  // non-empty valid lines
  int64_t invalid_utf8 = 0;
  int64_t truncated = 0;
  int64_t generated_tokens = 0;  // best hypothesis tokens (EOS included)
  double seconds = 0;
  std::vector<double> chunk_seconds;  // translation time of each chunk (latency per line at chunk_lines 1)
};

StreamStats translate_stream(Translator& translator, LineSource& in, std::ostream& out, const StreamOptions& options);

// The controls of `lines` (numbered from first_number in errors): a line of each of options' control files per
// line, and the glossary's terms. Empty when options have no control file and no glossary.
std::vector<LineControls> read_controls(const std::vector<std::string>& lines, int64_t first_number,
                                        const StreamOptions& options);
// The glossary's terms for `line` added to its controls: each entry's target term at each occurrence of its source
// term, tied to the bytes it matched (LineControls::sources); a term already among the controls' phrases is not
// added again.
void add_glossary_terms(const Glossary& glossary, const std::string& line, LineControls& controls);
// After the last line: DataError when a control file has lines left.
void check_controls_end(const StreamOptions& options, int64_t lines);

}  // namespace mtx::decode
