// Reading text corpora: plain or gzip files line by line, strict UTF-8, and parallel corpora whose
// two sides must align, with an optional length filter that reports what it dropped.
#pragma once

#include <zlib.h>

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace mtx::data {

// Lines of a plain or gzip-compressed file (detected from the content, not the name).
// Strips the line terminator ("\n" or "\r\n"). Does not validate UTF-8 itself.
class LineReader {
 public:
  explicit LineReader(const std::filesystem::path& path);  // throws DataError if unreadable
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  bool next(std::string& line);
  // 1-based number of the line last returned.
  size_t line_number() const { return line_number_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  bool fill();
  std::filesystem::path path_;
  gzFile file_ = nullptr;
  std::vector<char> buffer_;
  size_t begin_ = 0, end_ = 0;
  bool eof_ = false;
  size_t line_number_ = 0;
};

// All lines of a file; throws DataError "<file>:<line>: invalid UTF-8 ..." on the first bad line.
std::vector<std::string> read_lines(const std::filesystem::path& path);

// Number of whitespace-separated tokens.
size_t count_tokens(std::string_view line);

// Drops training pairs by whitespace token counts (Moses clean-corpus style). 0 switches a bound off.
struct LengthFilter {
  int min_tokens = 0;
  int max_tokens = 0;
  double max_ratio = 0;
  enum class Verdict { keep, too_short, too_long, bad_ratio };
  Verdict judge(size_t src_tokens, size_t tgt_tokens) const;
};

struct FilterStats {
  size_t read = 0;
  size_t kept = 0;
  size_t too_short = 0;
  size_t too_long = 0;
  size_t bad_ratio = 0;
  size_t dropped() const { return read - kept; }
};

struct ParallelCorpus {
  std::vector<std::string> src;
  std::vector<std::string> tgt;
  FilterStats stats;
  size_t size() const { return src.size(); }
};

// The pairs of two line-aligned files, read in step, that pass a length filter: memory does not grow with the
// files. Throws DataError when a file is missing, has invalid UTF-8 (file and line named) or the two sides
// differ in line count (both files and counts named, once the shorter one ends).
class PairReader {
 public:
  PairReader(const std::filesystem::path& src, const std::filesystem::path& tgt, const LengthFilter& filter = {});
  // The next kept pair; false at the end of both files.
  bool next(std::string& src, std::string& tgt);
  const FilterStats& stats() const { return stats_; }

 private:
  bool read_checked(LineReader& reader, std::string& line);
  [[noreturn]] void lengths_differ(LineReader& longer, size_t shorter_lines, bool src_longer);
  LineReader src_, tgt_;
  LengthFilter filter_;
  FilterStats stats_;
};

// Reads both sides whole (PairReader's checks).
ParallelCorpus read_parallel(const std::filesystem::path& src, const std::filesystem::path& tgt,
                             const LengthFilter& filter = {});

}  // namespace mtx::data
