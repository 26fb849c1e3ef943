#include "mtx/data/corpus.h"

#include <cerrno>
#include <cstring>

#include "mtx/util/errors.h"
#include "mtx/util/utf8.h"

namespace fs = std::filesystem;

namespace mtx::data {

LineReader::LineReader(const fs::path& path) : path_(path), buffer_(1 << 16) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw DataError("file '" + path.string() + "' not found");
  if (fs::is_directory(path, ec)) throw DataError("'" + path.string() + "' is a directory, not a text file");
  file_ = gzopen(path.c_str(), "rb");
  if (!file_) throw DataError("cannot open '" + path.string() + "': " + std::strerror(errno));
  gzbuffer(file_, 1 << 17);
}

LineReader::~LineReader() {
  if (file_) gzclose(file_);
}

bool LineReader::fill() {
  if (eof_) return false;
  if (begin_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (end_ == buffer_.size()) buffer_.resize(buffer_.size() * 2);
  const int n = gzread(file_, buffer_.data() + end_, unsigned(buffer_.size() - end_));
  if (n < 0) {
    int errnum = 0;
    const char* msg = gzerror(file_, &errnum);
    throw DataError("error reading '" + path_.string() + "' near line " + std::to_string(line_number_ + 1) + ": " +
                    (msg ? msg : "unknown error") + " (truncated or corrupt gzip?)");
  }
  if (n == 0) eof_ = true;
  end_ += size_t(n);
  return n > 0;
}

bool LineReader::next(std::string& line) {
  while (true) {
    const char* start = buffer_.data() + begin_;
    const void* nl = std::memchr(start, '\n', end_ - begin_);
    if (nl) {
      const size_t len = size_t(static_cast<const char*>(nl) - start);
      line.assign(start, len);
      begin_ += len + 1;
      break;
    }
    if (!fill()) {
      if (begin_ == end_) return false;
      line.assign(buffer_.data() + begin_, end_ - begin_);  // last line without a newline
      begin_ = end_;
      break;
    }
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  ++line_number_;
  return true;
}

std::vector<std::string> read_lines(const fs::path& path) {
  LineReader reader(path);
  std::vector<std::string> lines;
  std::string line;
  while (reader.next(line)) {
    const size_t bad = utf8::find_invalid(line);
    if (bad != utf8::kValid) {
      throw DataError(path.string() + ":" + std::to_string(reader.line_number()) + ": invalid UTF-8 at byte " +
                      std::to_string(bad + 1) + " of the line");
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

size_t count_tokens(std::string_view line) {
  size_t n = 0;
  bool in_token = false;
  for (char c : line) {
    const bool space = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
    if (!space && !in_token) ++n;
    in_token = !space;
  }
  return n;
}

LengthFilter::Verdict LengthFilter::judge(size_t src_tokens, size_t tgt_tokens) const {
  if (min_tokens > 0 && (src_tokens < size_t(min_tokens) || tgt_tokens < size_t(min_tokens))) {
    return Verdict::too_short;
  }
  if (max_tokens > 0 && (src_tokens > size_t(max_tokens) || tgt_tokens > size_t(max_tokens))) {
    return Verdict::too_long;
  }
  if (max_ratio > 0) {
    const double a = double(std::max<size_t>(src_tokens, 1)), b = double(std::max<size_t>(tgt_tokens, 1));
    if (a / b > max_ratio || b / a > max_ratio) return Verdict::bad_ratio;
  }
  return Verdict::keep;
}

PairReader::PairReader(const fs::path& src, const fs::path& tgt, const LengthFilter& filter)
    : src_(src), tgt_(tgt), filter_(filter) {}

bool PairReader::read_checked(LineReader& reader, std::string& line) {
  if (!reader.next(line)) return false;
  const size_t bad = utf8::find_invalid(line);
  if (bad != utf8::kValid) {
    throw DataError(reader.path().string() + ":" + std::to_string(reader.line_number()) + ": invalid UTF-8 at byte " +
                    std::to_string(bad + 1) + " of the line");
  }
  return true;
}

void PairReader::lengths_differ(LineReader& longer, size_t shorter_lines, bool src_longer) {
  std::string line;
  while (longer.next(line)) {
  }
  const size_t s = src_longer ? longer.line_number() : shorter_lines;
  const size_t t = src_longer ? shorter_lines : longer.line_number();
  throw DataError("parallel files differ in length: '" + src_.path().string() + "' has " + std::to_string(s) +
                  " lines but '" + tgt_.path().string() + "' has " + std::to_string(t));
}

bool PairReader::next(std::string& src, std::string& tgt) {
  while (true) {
    const bool has_src = read_checked(src_, src);
    const bool has_tgt = read_checked(tgt_, tgt);
    if (has_src != has_tgt) {
      if (has_src) lengths_differ(src_, tgt_.line_number(), true);
      lengths_differ(tgt_, src_.line_number(), false);
    }
    if (!has_src) return false;
    ++stats_.read;
    switch (filter_.judge(count_tokens(src), count_tokens(tgt))) {
      case LengthFilter::Verdict::keep:
        ++stats_.kept;
        return true;
      case LengthFilter::Verdict::too_short:
        ++stats_.too_short;
        break;
      case LengthFilter::Verdict::too_long:
        ++stats_.too_long;
        break;
      case LengthFilter::Verdict::bad_ratio:
        ++stats_.bad_ratio;
        break;
    }
  }
}

ParallelCorpus read_parallel(const fs::path& src, const fs::path& tgt, const LengthFilter& filter) {
  PairReader reader(src, tgt, filter);
  ParallelCorpus out;
  std::string s, t;
  while (reader.next(s, t)) {
    out.src.push_back(std::move(s));
    out.tgt.push_back(std::move(t));
  }
  out.stats = reader.stats();
  return out;
}

}  // namespace mtx::data
