// .srt and .vtt: cue numbers, identifiers, timings, headers, NOTE, STYLE and REGION blocks byte for byte; each cue's
// lines translated as one text and broken again into as many lines; <i>, <b>, <u>, <font>, <c>, <v>, <lang>,
// <ruby> and <span> kept as elements on the aligned words, timestamps and {\an8}-style overrides as points.
#include <algorithm>
#include <cctype>
#include <string>

#include "formats.h"
#include "inlines.h"
#include "mtx/util/errors.h"
#include "mtx/util/utf8.h"

namespace mtx::doc {
namespace {

struct Cue {
  size_t begin = 0, end = 0;  // the text lines' bytes (without the last line break)
  size_t lines = 0;
  Inlines inlines;
  std::vector<std::string> opens, closes, points;  // per element and point id: as written
};

std::string tag_name(const std::string& tag) {  // "<c.red>" -> "c", "</i>" -> "i"
  size_t i = tag[1] == '/' ? 2 : 1, j = i;
  while (j < tag.size() && (std::isalnum(static_cast<unsigned char>(tag[j])) != 0)) ++j;
  std::string n = tag.substr(i, j - i);
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return n;
}

bool element_name(const std::string& n) {
  return n == "i" || n == "b" || n == "u" || n == "font" || n == "c" || n == "v" || n == "lang" || n == "ruby" ||
         n == "rt" || n == "span" || n == "s";
}

std::string decoded(std::string_view s, bool vtt) {
  if (!vtt) return std::string(s);
  std::string out;
  for (size_t i = 0; i < s.size();) {
    bool matched = false;
    for (const auto& [entity, text] : {std::pair<std::string_view, std::string_view>{"&amp;", "&"},
                                       {"&lt;", "<"},
                                       {"&gt;", ">"},
                                       {"&nbsp;", "\xc2\xa0"},
                                       {"&lrm;", "\xe2\x80\x8e"},
                                       {"&rlm;", "\xe2\x80\x8f"}}) {
      if (s.substr(i, entity.size()) == entity) {
        out += text;
        i += entity.size();
        matched = true;
        break;
      }
    }
    if (!matched) out += s[i++];
  }
  return out;
}

void parse_cue(Cue& cue, std::string_view text, bool vtt) {
  struct Token {
    Inline::Kind kind;
    std::string s;
  };
  std::vector<Token> tokens;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    const size_t close = c == '<' ? text.find('>', i) : c == '{' ? text.find('}', i) : std::string_view::npos;
    if (close != std::string_view::npos && close > i + 1 &&
        text.substr(i, close - i).find('\n') == std::string_view::npos) {
      const std::string tag(text.substr(i, close + 1 - i));
      const bool markup = c == '<' && element_name(tag_name(tag));
      tokens.push_back({markup ? (tag[1] == '/' ? Inline::close : Inline::open) : Inline::point, tag});
      i = close + 1;
      continue;
    }
    const size_t next = std::min(text.find_first_of("<{", i + 1), text.size());
    tokens.push_back({Inline::text, decoded(text.substr(i, next - i), vtt)});
    i = next;
  }
  // Opens matched with their closes; what is left unmatched is a point.
  std::vector<size_t> stack;
  std::vector<int> match(tokens.size(), -1);
  for (size_t t = 0; t < tokens.size(); ++t) {
    if (tokens[t].kind == Inline::open) stack.push_back(t);
    if (tokens[t].kind != Inline::close) continue;
    if (!stack.empty() && tag_name(tokens[stack.back()].s) == tag_name(tokens[t].s)) {
      match[stack.back()] = int(t);
      match[t] = int(stack.back());
      stack.pop_back();
    }
  }
  std::vector<int> id_of(tokens.size(), -1);
  for (size_t t = 0; t < tokens.size(); ++t) {
    const Token& k = tokens[t];
    if (k.kind == Inline::text) {
      add_text(cue.inlines, k.s);
    } else if (k.kind == Inline::open && match[t] >= 0) {
      id_of[t] = int(cue.opens.size());
      cue.opens.push_back(k.s);
      cue.closes.push_back(tokens[size_t(match[t])].s);
      cue.inlines.push_back({Inline::open, "", id_of[t]});
    } else if (k.kind == Inline::close && match[t] >= 0) {
      cue.inlines.push_back({Inline::close, "", id_of[size_t(match[t])]});
    } else {
      cue.points.push_back(k.s);
      cue.inlines.push_back({Inline::point, "", int(cue.points.size()) - 1});
    }
  }
}

// A text's '<' (in .srt, which has no escapes) and '{' stand for themselves: until their cue is broken into lines,
// they are these bytes, which valid UTF-8 never holds.
constexpr char kLiteralAngle = '\xff', kLiteralBrace = '\xfe';

// The literal brackets of a cue's broken lines written back: as themselves, or where a '>' or '}' later on the
// line would make them read back as a tag (parse_cue), as the look-alike U+2039 or U+FF5B.
std::string literal_brackets(const std::string& lines) {
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    const char c = lines[i];
    if (c != kLiteralAngle && c != kLiteralBrace) {
      out += c;
      continue;
    }
    const size_t eol = std::min(lines.find('\n', i), lines.size());
    const size_t close = lines.find(c == kLiteralAngle ? '>' : '}', i);
    const bool tag = close < eol && close > i + 1;
    out += c == kLiteralAngle ? (tag ? "\xe2\x80\xb9" : "<") : (tag ? "\xef\xbd\x9b" : "{");
  }
  return out;
}

std::string written(const Cue& cue, const Inlines& translated, bool vtt) {
  std::string out;
  std::vector<int> open;
  for (const Inline& i : translated) {
    switch (i.kind) {
      case Inline::text:
        for (const char c : i.value) {
          if ((c == '<' && !vtt) || c == '{')
            out += c == '<' ? kLiteralAngle : kLiteralBrace;  // literal_brackets() decides how it is written
          else if (vtt && c == '&')
            out += "&amp;";
          else if (vtt && c == '<')
            out += "&lt;";
          else if (vtt && c == '>')
            out += "&gt;";
          else
            out += c;
        }
        break;
      case Inline::open:
        out += cue.opens.at(size_t(i.id));
        open.push_back(i.id);
        break;
      case Inline::close:
        out += cue.closes.at(size_t(open.back()));
        open.pop_back();
        break;
      case Inline::point:
      case Inline::space_point:
        out += cue.points.at(size_t(i.id));
        break;
    }
  }
  return out;
}

// `text` on one line -- its line breaks spaces, without blanks at either end -- then broken into `lines` lines at
// blanks outside tags, each break the one nearest its even share. No line it makes is blank, so that the cue reads
// back as one block with its text. Empty when `text` has nothing but blanks.
std::string broken(std::string text, size_t lines, const std::string& eol) {
  const auto is_blank = [](char c) { return c == ' ' || c == '\t'; };
  std::replace(text.begin(), text.end(), '\n', ' ');
  std::replace(text.begin(), text.end(), '\r', ' ');
  const size_t first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  text = text.substr(first, text.find_last_not_of(" \t") + 1 - first);
  if (lines < 2) return text;
  std::vector<size_t> spaces;  // where a run of blanks starts: a word ends before it, and one follows it
  size_t depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '<' || text[i] == '{') ++depth;
    if ((text[i] == '>' || text[i] == '}') && depth > 0) --depth;
    if (is_blank(text[i]) && depth == 0 && !is_blank(text[i - 1])) spaces.push_back(i);
  }
  std::vector<size_t> chosen;
  for (size_t k = 1; k < lines && !spaces.empty(); ++k) {
    const size_t want = text.size() * k / lines;
    const auto best = std::min_element(spaces.begin(), spaces.end(), [want](size_t a, size_t b) {
      return (a > want ? a - want : want - a) < (b > want ? b - want : want - b);
    });
    if (chosen.empty() || *best > chosen.back()) chosen.push_back(*best);
  }
  std::string out;
  size_t at = 0;
  for (const size_t s : chosen) {
    out += text.substr(at, s - at) + eol;
    at = s + 1;
  }
  return out + text.substr(at);
}

}  // namespace

std::string translate_subtitles(const std::string& bytes, Format format, const std::string& name,
                                const Translate& translate, const Progress& progress) {
  const bool vtt = format == Format::vtt;
  const size_t invalid = utf8::find_invalid(bytes);
  if (invalid != utf8::kValid) {
    throw DataError(name + ": not valid UTF-8 (byte " + std::to_string(invalid) + "); subtitles must be UTF-8");
  }
  if (vtt && bytes.compare(bytes.compare(0, 3, "\xef\xbb\xbf") == 0 ? 3 : 0, 6, "WEBVTT") != 0) {
    throw DataError(name + ": a WebVTT file starts with WEBVTT");
  }
  const std::string eol = bytes.find("\r\n") != std::string::npos ? "\r\n" : "\n";
  // Lines with their bytes; blocks are runs of non-blank lines.
  std::vector<std::pair<size_t, size_t>> lines;  // [begin, end) without the line break
  for (size_t at = 0; at < bytes.size();) {
    size_t end = bytes.find('\n', at);
    const size_t next = end == std::string::npos ? bytes.size() : end + 1;
    if (end == std::string::npos) end = bytes.size();
    if (end > at && bytes[end - 1] == '\r') --end;
    lines.emplace_back(at, end);
    at = next;
  }
  const auto blank = [&](size_t l) { return bytes.find_first_not_of(" \t", lines[l].first) >= lines[l].second; };
  std::vector<Cue> cues;
  for (size_t l = 0; l < lines.size();) {
    if (blank(l)) {
      ++l;
      continue;
    }
    size_t end = l;
    while (end < lines.size() && !blank(end)) ++end;
    size_t timing = l;
    while (timing < end && bytes.substr(lines[timing].first, lines[timing].second - lines[timing].first).find("-->") ==
                               std::string::npos) {
      ++timing;
    }
    const std::string first = bytes.substr(lines[l].first, lines[l].second - lines[l].first);
    const bool kept =
        timing >= end || (vtt && (first.rfind("NOTE", 0) == 0 || first.rfind("STYLE", 0) == 0 ||
                                  first.rfind("REGION", 0) == 0 || first.find("WEBVTT") != std::string::npos));
    if (!kept && timing + 1 < end) {
      Cue cue;
      cue.begin = lines[timing + 1].first;
      cue.end = lines[end - 1].second;
      cue.lines = end - timing - 1;
      std::string text = bytes.substr(cue.begin, cue.end - cue.begin);
      text.erase(std::remove(text.begin(), text.end(), '\r'), text.end());
      parse_cue(cue, text, vtt);
      cues.push_back(std::move(cue));
    }
    l = end;
  }
  std::vector<Inlines> paragraphs;
  for (const Cue& c : cues) paragraphs.push_back(c.inlines);
  const std::vector<Inlines> translated = translate_paragraphs(paragraphs, name, translate, progress);
  std::string out;
  size_t at = 0;
  for (size_t c = 0; c < cues.size(); ++c) {
    out.append(bytes, at, cues[c].begin - at);
    // A cue without words, or whose translation came back blank, keeps its text: a cue without text lines would
    // read back as none.
    const std::string text = has_words(cues[c].inlines)
                                 ? literal_brackets(broken(written(cues[c], translated[c], vtt), cues[c].lines, eol))
                                 : "";
    out += text.empty() ? bytes.substr(cues[c].begin, cues[c].end - cues[c].begin) : text;
    at = cues[c].end;
  }
  out.append(bytes, at, std::string::npos);
  return out;
}

}  // namespace mtx::doc
