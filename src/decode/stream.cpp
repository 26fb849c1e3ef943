#include "mtx/decode/stream.h"

#include "mtx/decode/align.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <istream>
#include <ostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "mtx/util/errors.h"
#include "mtx/util/logging.h"
#include "mtx/util/utf8.h"

namespace mtx::decode {
namespace {

class FdLineSource final : public LineSource {
 public:
  FdLineSource(int fd, size_t max_line_bytes) : fd_(fd), max_(std::max<size_t>(max_line_bytes, 4)) {}

  bool next(std::string& line) override {
    while (true) {
      const size_t nl = buffer_.find('\n', pos_);
      if (nl != std::string::npos) {
        line.assign(buffer_, pos_, std::min(nl - pos_, max_));
        if (nl - pos_ > max_) cut(line);
        pos_ = nl + 1;
        ++lines_;
        strip_cr(line);
        return true;
      }
      if (buffer_.size() - pos_ > max_) {
        // A line longer than the cap (or input without newlines): keep its first max_ bytes, drop the rest
        // up to the newline as it arrives, so memory stays bounded whatever comes in.
        line.assign(buffer_, pos_, max_);
        cut(line);
        ++lines_;
        buffer_.clear();
        pos_ = 0;
        while (!eof_) {
          fill();
          const size_t end = buffer_.find('\n');
          if (end != std::string::npos) {
            pos_ = end + 1;
            break;
          }
          buffer_.clear();
        }
        strip_cr(line);
        return true;
      }
      if (eof_) {
        if (pos_ >= buffer_.size()) return false;
        line.assign(buffer_, pos_, std::string::npos);  // last line without '\n'
        pos_ = buffer_.size();
        ++lines_;
        strip_cr(line);
        return true;
      }
      fill();
    }
  }

  bool ready() override {
    if (buffer_.find('\n', pos_) != std::string::npos || eof_) return true;
    struct pollfd p {
      fd_, POLLIN, 0
    };
    return ::poll(&p, 1, 0) > 0;
  }

 private:
  static void strip_cr(std::string& line) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
  }
  // The kept beginning of an over-long line: whole UTF-8 characters only, and said once.
  void cut(std::string& line) {
    size_t end = line.size();
    size_t back = 0;
    while (back < 4 && back < end && (static_cast<unsigned char>(line[end - 1 - back]) & 0xC0) == 0x80) ++back;
    if (back < end) {
      const auto lead = static_cast<unsigned char>(line[end - 1 - back]);
      const size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
      if (need > back + 1) end -= back + 1;  // the last character is incomplete
    }
    line.resize(end);
    if (!warned_) {
      warned_ = true;
      log::warn(
          "input line {} is longer than {} bytes: only its beginning is read (further such lines are not "
          "reported)",
          lines_, max_);
    }
  }
  void fill() {
    if (pos_ > 0) {
      buffer_.erase(0, pos_);
      pos_ = 0;
    }
    char chunk[1 << 16];
    ssize_t n;
    do {
      n = ::read(fd_, chunk, sizeof chunk);
    } while (n < 0 && errno == EINTR);
    if (n < 0) throw Error(std::string("reading input: ") + std::strerror(errno));
    if (n == 0) eof_ = true;
    buffer_.append(chunk, size_t(n > 0 ? n : 0));
  }

  int fd_;
  size_t max_;
  int64_t lines_ = 0;
  bool warned_ = false;
  std::string buffer_;
  size_t pos_ = 0;
  bool eof_ = false;
};

class IstreamLineSource final : public LineSource {
 public:
  explicit IstreamLineSource(std::istream& in) : in_(in) {}
  bool next(std::string& line) override {
    if (!std::getline(in_, line)) return false;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return true;
  }
  bool ready() override { return true; }

 private:
  std::istream& in_;
};

// Keeps the line structure of the output intact whatever the model generates.
std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

}  // namespace

std::unique_ptr<LineSource> fd_line_source(int fd, size_t max_line_bytes) {
  return std::make_unique<FdLineSource>(fd, max_line_bytes);
}
std::unique_ptr<LineSource> istream_line_source(std::istream& in) { return std::make_unique<IstreamLineSource>(in); }

namespace {

// Line `number` of a control file (DataError when it ends early or is not UTF-8).
std::string control_line(const StreamOptions::ControlFile& f, int64_t number, const char* what) {
  std::string line;
  if (!f.lines->next(line)) {
    throw DataError(f.name + ": it ends at line " + std::to_string(number - 1) + ", before the input (" + what +
                    " per input line; an empty line for none)");
  }
  if (utf8::find_invalid(line) != utf8::kValid) {
    throw DataError(f.name + ": line " + std::to_string(number) + " is not valid UTF-8");
  }
  return line;
}

// A --constraints line: a JSON list of target phrases, or empty.
std::vector<std::string> parse_constraints(const std::string& line, const std::string& name, int64_t number) {
  std::vector<std::string> out;
  if (line.find_first_not_of(" \t\r") == std::string::npos) return out;
  const std::string where = name + ": line " + std::to_string(number);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception&) {
    throw DataError(where + " is not JSON (a list of target phrases, e.g. [\"a dog\", \"the park\"], or empty)");
  }
  if (!j.is_array()) throw DataError(where + ": expected a JSON list of target phrases, e.g. [\"a dog\"]");
  for (const auto& v : j) {
    if (!v.is_string()) throw DataError(where + ": every constraint must be a string");
    const std::string phrase = v.get<std::string>();
    if (phrase.find_first_of("\r\n") != std::string::npos) throw DataError(where + ": a constraint holds a line break");
    if (!phrase.empty()) out.push_back(phrase);
  }
  return out;
}

}  // namespace

StreamStats translate_stream(Translator& translator, LineSource& in, std::ostream& out, const StreamOptions& options) {
  if (options.chunk_lines < 1) throw ConfigError("chunk lines: must be >= 1");
  const auto start = std::chrono::steady_clock::now();
  StreamStats stats;
  std::vector<std::string> chunk;
  std::vector<std::string> valid;  // the chunk's lines with invalid ones emptied
  std::string line;
  bool more = true;
  while (more && !(options.abandoned && options.abandoned(-1))) {
    chunk.clear();
    // Fill the chunk, but do not wait for a slow producer once there is something to translate.
    while (int(chunk.size()) < options.chunk_lines && (chunk.empty() || in.ready())) {
      if (!in.next(line)) {
        more = false;
        break;
      }
      chunk.push_back(std::move(line));
    }
    if (chunk.empty()) break;
    std::vector<LineControls> controls = read_controls(chunk, stats.lines + 1, options);
    if (options.language_columns) {
      if (controls.empty()) controls.resize(chunk.size());
      for (size_t i = 0; i < chunk.size(); ++i) {
        const size_t a = chunk[i].find('\t'), b = a == std::string::npos ? a : chunk[i].find('\t', a + 1);
        if (b == std::string::npos) {
          if (chunk[i].find_first_not_of(" \t\r") == std::string::npos) continue;  // blank: left empty
          throw DataError("input line " + std::to_string(stats.lines + int64_t(i) + 1) +
                          ": --language-columns takes SOURCE_LANG<TAB>TARGET_LANG<TAB>text");
        }
        controls[i].source_lang = chunk[i].substr(0, a);
        controls[i].target_lang = chunk[i].substr(a + 1, b - a - 1);
        chunk[i].erase(0, b + 1);
      }
    }
    valid.assign(chunk.size(), std::string());
    for (size_t i = 0; i < chunk.size(); ++i) {
      const int64_t number = stats.lines + int64_t(i) + 1;
      const size_t bad = utf8::find_invalid(chunk[i]);
      if (bad != utf8::kValid) {
        ++stats.invalid_utf8;
        log::error("input line {}: invalid UTF-8 at byte {}; its translation is left empty", number, bad + 1);
        continue;
      }
      valid[i] = std::move(chunk[i]);
    }
    const auto chunk_start = std::chrono::steady_clock::now();
    const std::vector<Translation> results = translator.translate(valid, controls, options.abandoned);
    stats.chunk_seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - chunk_start).count());
    for (size_t i = 0; i < results.size(); ++i) {
      const int64_t index = stats.lines + int64_t(i);
      const Translation& t = results[i];
      if (!valid[i].empty()) ++stats.translated;
      if (t.truncated) {
        if (stats.truncated < options.max_truncation_warnings) {
          log::warn(
              "input line {} is longer than {} source tokens: translating its first {}{}", index + 1,
              translator.max_source_tokens(), translator.max_source_tokens(),
              stats.truncated + 1 == options.max_truncation_warnings ? " (further cut lines are only counted)" : "");
        }
        ++stats.truncated;
      }
      if (!t.hypotheses.empty()) {
        stats.generated_tokens += int64_t(t.hypotheses.front().tokens.size()) + 1;
      }
      // " ||| alignment" of hypothesis h ("" without --align).
      auto alignment = [&](size_t h) -> std::string {
        if (options.align.empty()) return "";
        if (t.hypotheses.empty()) return " ||| ";
        std::vector<int32_t> src = translator.tokenizer().src().encode(valid[i]);
        if (int64_t(src.size()) > translator.max_source_tokens()) src.resize(size_t(translator.max_source_tokens()));
        const WordAlignment a =
            align_words(translator.model(), translator.tokenizer(), src, t.hypotheses[h].tokens, options.align_layer);
        return " ||| " + (options.align == "soft" ? soft_text(a) : pharaoh(a));
      };
      if (!options.nbest_format) {
        out << (t.texts.empty() ? std::string() : one_line(t.texts.front())) << alignment(0) << '\n';
      } else if (t.hypotheses.empty()) {
        out << index << " |||  ||| " << fmt::format("{:.4f}", 0.0) << alignment(0) << '\n';
      } else {
        for (size_t h = 0; h < t.hypotheses.size(); ++h) {
          out << index << " ||| " << one_line(t.texts[h]) << " ||| " << fmt::format("{:.4f}", t.hypotheses[h].score)
              << alignment(h) << '\n';
        }
      }
    }
    stats.lines += int64_t(chunk.size());
    out.flush();
    if (!out) throw Error("writing the translations failed (disk full or closed pipe?)");
  }
  check_controls_end(options, stats.lines);
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

std::vector<LineControls> read_controls(const std::vector<std::string>& lines, int64_t first_number,
                                        const StreamOptions& options) {
  std::vector<LineControls> controls;
  if (!options.prefixes.lines && !options.constraints.lines && !options.glossary) return controls;
  for (size_t i = 0; i < lines.size(); ++i) {
    const int64_t number = first_number + int64_t(i);
    LineControls c;
    if (options.prefixes.lines) c.prefix = control_line(options.prefixes, number, "one prefix");
    if (options.constraints.lines) {
      c.constraints = parse_constraints(control_line(options.constraints, number, "one JSON list"),
                                        options.constraints.name, number);
    }
    if (options.glossary) add_glossary_terms(*options.glossary, lines[i], c);
    controls.push_back(std::move(c));
  }
  return controls;
}

void add_glossary_terms(const Glossary& glossary, const std::string& line, LineControls& controls) {
  const std::vector<Glossary::Term> terms = glossary.terms_for(line);
  if (terms.empty()) return;
  auto& c = controls.constraints;
  controls.sources.resize(c.size(), {std::string::npos, std::string::npos});
  const size_t given = c.size();  // phrases given before: a term among them is not added
  for (const Glossary::Term& term : terms) {
    if (std::find(c.begin(), c.begin() + std::ptrdiff_t(given), term.target) != c.begin() + std::ptrdiff_t(given)) {
      continue;
    }
    c.push_back(term.target);  // one a source occurrence
    controls.sources.emplace_back(term.begin, term.end);
    if (!term.forms.empty()) {
      controls.forms.resize(c.size());
      controls.forms.back() = term.forms;
    }
  }
}

void check_controls_end(const StreamOptions& options, int64_t lines) {
  for (const StreamOptions::ControlFile* f : {&options.prefixes, &options.constraints}) {
    std::string extra;
    if (f->lines && f->lines->next(extra)) {
      throw DataError(f->name + ": it has more lines than the input's " + std::to_string(lines) +
                      " (one line per input line)");
    }
  }
}

}  // namespace mtx::decode
