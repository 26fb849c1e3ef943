#include "inlines.h"

#include <algorithm>
#include <cstdlib>

#include "mtx/util/errors.h"
#include "mtx/util/utf8.h"

namespace mtx::doc {

void add_text(Inlines& p, std::string_view text) {
  if (text.empty()) return;
  if (!p.empty() && p.back().kind == Inline::text) {
    p.back().value += text;
  } else {
    p.push_back({Inline::text, std::string(text), -1});
  }
}

std::string to_html(const Inlines& p) {
  std::string out;
  for (const Inline& i : p) {
    switch (i.kind) {
      case Inline::text:
        for (const char c : i.value) {
          if (c == '&')
            out += "&amp;";
          else if (c == '<')
            out += "&lt;";
          else if (c == '>')
            out += "&gt;";
          else
            out += c;
        }
        break;
      case Inline::open:
        out += "<span data-m=\"" + std::to_string(i.id) + "\">";
        break;
      case Inline::close:
        out += "</span>";
        break;
      case Inline::point:
        out += "<img data-m=\"" + std::to_string(i.id) + "\">";
        break;
      case Inline::space_point:
        out += "<br data-m=\"" + std::to_string(i.id) + "\">";
        break;
    }
  }
  return out;
}

Inlines from_html(std::string_view html) {
  Inlines out;
  std::vector<int> open;
  const auto fail = [&](size_t at) {
    throw Error("document: the text layer's rendering is not the fragment's form at byte " + std::to_string(at));
  };
  for (size_t i = 0; i < html.size();) {
    const char c = html[i];
    if (c == '<') {
      const size_t end = html.find('>', i);
      if (end == std::string_view::npos) fail(i);
      const std::string_view tag = html.substr(i, end + 1 - i);
      if (tag == "</span>") {
        if (open.empty()) fail(i);
        out.push_back({Inline::close, "", open.back()});
        open.pop_back();
      } else {
        Inline::Kind kind = Inline::open;
        std::string_view rest;
        for (const auto& [prefix, k] : {std::pair<std::string_view, Inline::Kind>{"<span data-m=\"", Inline::open},
                                        {"<img data-m=\"", Inline::point},
                                        {"<br data-m=\"", Inline::space_point}}) {
          if (tag.substr(0, prefix.size()) == prefix) {
            kind = k;
            rest = tag.substr(prefix.size());
          }
        }
        if (rest.size() < 3 || rest.substr(rest.size() - 2) != "\">") fail(i);
        const std::string digits(rest.substr(0, rest.size() - 2));
        char* stop = nullptr;
        const long id = std::strtol(digits.c_str(), &stop, 10);
        if (digits.empty() || *stop != '\0' || id < 0) fail(i);
        out.push_back({kind, "", int(id)});
        if (kind == Inline::open) open.push_back(int(id));
      }
      i = end + 1;
    } else if (c == '&') {
      const size_t end = html.find(';', i);
      if (end == std::string_view::npos) fail(i);
      const std::string_view entity = html.substr(i, end + 1 - i);
      if (entity == "&amp;")
        add_text(out, "&");
      else if (entity == "&lt;")
        add_text(out, "<");
      else if (entity == "&gt;")
        add_text(out, ">");
      else
        fail(i);
      i = end + 1;
    } else {
      const size_t end = std::min(html.find_first_of("<&", i), html.size());
      add_text(out, html.substr(i, end - i));
      i = end;
    }
  }
  if (!open.empty()) fail(html.size());
  return out;
}

bool has_words(const Inlines& p) {
  for (const Inline& i : p) {
    if (i.kind == Inline::text && i.value.find_first_not_of(" \t\r\n\f") != std::string::npos) return true;
  }
  return false;
}

namespace {

bool point(const Inline& i) { return i.kind == Inline::point || i.kind == Inline::space_point; }
bool space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// The text layer puts a space before every element it places and none after a point; a point stands against the
// text on each side, or apart from it, as it did in the source (a footnote mark after "Bank.", a tab after a word,
// a code span between words).
void keep_point_spacing(const Inlines& source, Inlines& out) {
  std::vector<int> against_before, against_after, apart_before, apart_after;  // point ids
  for (size_t k = 0; k < source.size(); ++k) {
    if (!point(source[k])) continue;
    if (k > 0 && source[k - 1].kind == Inline::text && !source[k - 1].value.empty()) {
      (space(source[k - 1].value.back()) ? apart_before : against_before).push_back(source[k].id);
    }
    if (k + 1 < source.size() && source[k + 1].kind == Inline::text && !source[k + 1].value.empty()) {
      (space(source[k + 1].value.front()) ? apart_after : against_after).push_back(source[k].id);
    }
  }
  const auto has = [](const std::vector<int>& ids, int id) {
    return std::find(ids.begin(), ids.end(), id) != ids.end();
  };
  for (size_t k = 0; k < out.size(); ++k) {
    if (!point(out[k])) continue;
    const int id = out[k].id;
    if (k > 0 && out[k - 1].kind == Inline::text && has(against_before, id)) {
      std::string& t = out[k - 1].value;
      while (!t.empty() && t.back() == ' ') t.pop_back();
    } else if (k > 0 && has(apart_before, id)) {
      if (out[k - 1].kind == Inline::text) {
        if (!out[k - 1].value.empty() && !space(out[k - 1].value.back())) out[k - 1].value += ' ';
      } else if (out[k - 1].kind == Inline::close) {
        out.insert(out.begin() + std::ptrdiff_t(k), Inline{Inline::text, " ", -1});
        ++k;
      }
    }
    if (k + 1 < out.size() && out[k + 1].kind == Inline::text && has(against_after, id)) {
      std::string& t = out[k + 1].value;
      t.erase(0, std::min(t.find_first_not_of(' '), t.size()));
    } else if (k + 1 < out.size() && has(apart_after, id)) {
      if (out[k + 1].kind == Inline::text) {
        if (!out[k + 1].value.empty() && !space(out[k + 1].value.front())) out[k + 1].value.insert(0, " ");
      } else if (out[k + 1].kind == Inline::open || point(out[k + 1])) {
        out.insert(out.begin() + std::ptrdiff_t(k) + 1, Inline{Inline::text, " ", -1});
      }
    }
  }
}

}  // namespace

std::vector<Inlines> translate_paragraphs(const std::vector<Inlines>& paragraphs, const std::string& name,
                                          const Translate& translate, const Progress& progress) {
  std::vector<Inlines> out = paragraphs;
  std::vector<size_t> todo;
  for (size_t i = 0; i < paragraphs.size(); ++i) {
    if (has_words(paragraphs[i])) todo.push_back(i);
  }
  // Batches of about 64 KiB of text: large enough to batch well, small enough to report progress on a long file.
  constexpr size_t kBatchBytes = 64 << 10;
  size_t done = 0;
  while (done < todo.size()) {
    std::vector<std::string> texts;
    size_t bytes = 0;
    const size_t first = done;
    while (done < todo.size() && (texts.empty() || bytes < kBatchBytes)) {
      texts.push_back(to_html(paragraphs[todo[done]]));
      const size_t invalid = utf8::find_invalid(texts.back());
      if (invalid != utf8::kValid) {
        throw DataError(name + ": paragraph " + std::to_string(todo[done] + 1) + " is not valid UTF-8 (byte " +
                        std::to_string(invalid) + " of its text)");
      }
      bytes += texts.back().size();
      ++done;
    }
    const std::vector<std::string> translated = translate(texts, text::Format::html);
    if (translated.size() != texts.size()) {
      throw Error("document: " + std::to_string(translated.size()) + " translations for " +
                  std::to_string(texts.size()) + " paragraphs");
    }
    for (size_t k = 0; k < texts.size(); ++k) {
      Inlines& p = out[todo[first + k]];
      p = from_html(translated[k]);
      keep_point_spacing(paragraphs[todo[first + k]], p);
    }
    if (progress) progress(done, todo.size());
  }
  return out;
}

}  // namespace mtx::doc
