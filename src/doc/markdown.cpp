// .md: CommonMark with GitHub's tables and strikethrough, parsed by cmark-gfm (Debian's libcmark-gfm-dev) with
// source positions. Each paragraph, heading and table cell is translated: its inline content's bytes are replaced
// by the translation, written back as Markdown -- emphasis, strong, strikethrough and links as elements (with the
// author's own markers), code spans, images, inline HTML and hard breaks as points. Everything else -- block
// markers, indentation, quotes' ">", fenced and indented code, HTML blocks, link definitions -- is copied.
#include <cmark-gfm-core-extensions.h>
#include <cmark-gfm.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "formats.h"
#include "inlines.h"
#include "mtx/util/errors.h"
#include "mtx/util/utf8.h"

namespace mtx::doc {
namespace {

struct Block {
  size_t begin = 0, end = 0;  // the inline content's bytes
  bool cell = false;          // a table cell: '|' is escaped
  Inlines inlines;
  std::vector<std::string> opens, closes, points;
};

struct MarkdownReader {
  const std::string& source;
  std::vector<size_t> line_starts;  // byte offset of each line (1-based lines: index line - 1)

  explicit MarkdownReader(const std::string& s) : source(s) {
    line_starts.push_back(0);
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\n') line_starts.push_back(i + 1);
    }
  }
  // Byte offset of (line, column), 1-based; npos for a node without a position.
  size_t offset(int line, int column) const {
    if (line <= 0 || column <= 0 || size_t(line) > line_starts.size()) return std::string::npos;
    return std::min(source.size(), line_starts[size_t(line) - 1] + size_t(column) - 1);
  }
  // A node's bytes [begin, end); a code span's include its backticks.
  std::pair<size_t, size_t> range(cmark_node* n) const {
    const size_t b = offset(cmark_node_get_start_line(n), cmark_node_get_start_column(n));
    size_t e = offset(cmark_node_get_end_line(n), cmark_node_get_end_column(n));
    if (b == std::string::npos || e == std::string::npos) return {std::string::npos, std::string::npos};
    e = std::min(source.size(), e + 1);
    size_t begin = b;
    if (cmark_node_get_type(n) == CMARK_NODE_CODE) {
      while (begin > 0 && source[begin - 1] == '`') --begin;
      while (e < source.size() && source[e] == '`') ++e;
    }
    return {begin, e};
  }
  std::string bytes(cmark_node* n) const {
    const auto r = range(n);
    return r.first == std::string::npos ? "" : source.substr(r.first, r.second - r.first);
  }

  void inlines(cmark_node* parent, Block& b) const {
    for (cmark_node* n = cmark_node_first_child(parent); n; n = cmark_node_next(n)) {
      const cmark_node_type t = cmark_node_get_type(n);
      const char* literal = cmark_node_get_literal(n);
      if (t == CMARK_NODE_TEXT) {
        add_text(b.inlines, literal ? literal : "");
      } else if (t == CMARK_NODE_SOFTBREAK) {
        add_text(b.inlines, " ");
      } else if (t == CMARK_NODE_LINEBREAK) {
        b.points.push_back("\\\n");
        b.inlines.push_back({Inline::space_point, "", int(b.points.size()) - 1});
      } else if (t == CMARK_NODE_EMPH || t == CMARK_NODE_STRONG || t == CMARK_NODE_LINK ||
                 std::string(cmark_node_get_type_string(n)) == "strikethrough") {
        const auto r = range(n);
        std::string open, close;
        if (t == CMARK_NODE_LINK) {
          const std::string url = cmark_node_get_url(n) ? cmark_node_get_url(n) : "";
          const std::string title = cmark_node_get_title(n) ? cmark_node_get_title(n) : "";
          open = "[";
          close = "](" + (url.find_first_of(" ()") == std::string::npos ? url : "<" + url + ">") +
                  (title.empty() ? "" : " \"" + title + "\"") + ")";
        } else {
          const char marker = r.first != std::string::npos && (source[r.first] == '_' || source[r.first] == '*')
                                  ? source[r.first]
                                  : '*';
          open = t == CMARK_NODE_EMPH ? std::string(1, marker) : t == CMARK_NODE_STRONG ? std::string(2, marker) : "~~";
          close = open;
        }
        b.opens.push_back(open);
        b.closes.push_back(close);
        const int id = int(b.opens.size()) - 1;
        b.inlines.push_back({Inline::open, "", id});
        inlines(n, b);
        b.inlines.push_back({Inline::close, "", id});
      } else {  // code spans, images, inline HTML, anything else: as written
        const std::string kept = bytes(n);
        b.points.push_back(kept.empty() && literal ? literal : kept);
        b.inlines.push_back({Inline::point, "", int(b.points.size()) - 1});
      }
    }
  }

  // The bytes a block's inline content spans: from its first positioned child to its last.
  bool content_range(cmark_node* block, Block& b) const {
    size_t begin = std::string::npos, end = 0;
    for (cmark_node* n = cmark_node_first_child(block); n; n = cmark_node_next(n)) {
      const auto r = range(n);
      if (r.first == std::string::npos) continue;
      begin = std::min(begin, r.first);
      end = std::max(end, r.second);
    }
    if (begin == std::string::npos || end <= begin) return false;
    b.begin = begin;
    b.end = end;
    return true;
  }
};

std::string markdown_escaped(const std::string& text, bool cell) {
  std::string out;
  for (const char c : text) {
    if (c == '\\' || c == '`' || c == '*' || c == '_' || c == '[' || c == ']' || c == '<' || (cell && c == '|')) {
      out += '\\';
    }
    out += c;
  }
  return out;
}

// Markdown of a block's translated inlines; spaces at an element's edges go outside its markers (CommonMark's
// emphasis must not start or end with a space).
std::string markdown_of(const Block& b, const Inlines& translated) {
  std::string out;
  std::vector<int> open;
  std::string pending;  // spaces held back at an element's inner edge
  for (size_t k = 0; k < translated.size(); ++k) {
    const Inline& i = translated[k];
    switch (i.kind) {
      case Inline::text: {
        std::string t = i.value;
        if (k > 0 && translated[k - 1].kind == Inline::open) {  // leading spaces before the opening marker
          const size_t lead = std::min(t.find_first_not_of(' '), t.size());
          out.insert(out.size() - b.opens.at(size_t(translated[k - 1].id)).size(), t.substr(0, lead));
          t.erase(0, lead);
        }
        std::string trail;
        if (k + 1 < translated.size() && translated[k + 1].kind == Inline::close) {
          const size_t last = t.find_last_not_of(' ');
          const size_t keep = last == std::string::npos ? 0 : last + 1;
          trail = t.substr(keep);
          t.erase(keep);
        }
        out += markdown_escaped(t, b.cell);
        pending = trail;
        break;
      }
      case Inline::open:
        out += pending;
        pending.clear();
        out += b.opens.at(size_t(i.id));
        open.push_back(i.id);
        break;
      case Inline::close:
        out += b.closes.at(size_t(open.back()));
        open.pop_back();
        out += pending;
        pending.clear();
        break;
      case Inline::point:
      case Inline::space_point:
        out += pending;
        pending.clear();
        out += b.points.at(size_t(i.id));
        break;
    }
  }
  return out + pending;
}

}  // namespace

std::string translate_markdown(const std::string& bytes, const std::string& name, const Translate& translate,
                               const Progress& progress) {
  const size_t invalid = utf8::find_invalid(bytes);
  if (invalid != utf8::kValid) {
    throw DataError(name + ": not valid UTF-8 (byte " + std::to_string(invalid) + "); Markdown must be UTF-8");
  }
  cmark_gfm_core_extensions_ensure_registered();
  const std::unique_ptr<cmark_parser, void (*)(cmark_parser*)> parser(cmark_parser_new(CMARK_OPT_SOURCEPOS),
                                                                      cmark_parser_free);
  for (const char* extension : {"table", "strikethrough"}) {
    if (cmark_syntax_extension* e = cmark_find_syntax_extension(extension)) {
      cmark_parser_attach_syntax_extension(parser.get(), e);
    }
  }
  cmark_parser_feed(parser.get(), bytes.data(), bytes.size());
  const std::unique_ptr<cmark_node, void (*)(cmark_node*)> document(cmark_parser_finish(parser.get()), cmark_node_free);
  if (!document) throw DataError(name + ": cannot be parsed as Markdown");
  const MarkdownReader reader(bytes);
  std::vector<Block> blocks;
  const std::unique_ptr<cmark_iter, void (*)(cmark_iter*)> it(cmark_iter_new(document.get()), cmark_iter_free);
  for (cmark_event_type e; (e = cmark_iter_next(it.get())) != CMARK_EVENT_DONE;) {
    cmark_node* n = cmark_iter_get_node(it.get());
    if (e != CMARK_EVENT_ENTER) continue;
    const cmark_node_type t = cmark_node_get_type(n);
    const std::string type = cmark_node_get_type_string(n);
    if (t != CMARK_NODE_PARAGRAPH && t != CMARK_NODE_HEADING && type != "table_cell") continue;
    Block b;
    b.cell = type == "table_cell";
    if (!reader.content_range(n, b)) continue;
    reader.inlines(n, b);
    blocks.push_back(std::move(b));
  }
  // Blocks in byte order, none inside another (cmark's blocks do not overlap).
  std::sort(blocks.begin(), blocks.end(), [](const Block& a, const Block& b) { return a.begin < b.begin; });
  std::vector<Inlines> paragraphs;
  for (const Block& b : blocks) paragraphs.push_back(b.inlines);
  const std::vector<Inlines> translated = translate_paragraphs(paragraphs, name, translate, progress);
  std::string out;
  size_t at = 0;
  for (size_t k = 0; k < blocks.size(); ++k) {
    const Block& b = blocks[k];
    if (b.begin < at) continue;
    out.append(bytes, at, b.begin - at);
    out += has_words(b.inlines) ? markdown_of(b, translated[k]) : bytes.substr(b.begin, b.end - b.begin);
    at = b.end;
  }
  out.append(bytes, at, std::string::npos);
  return out;
}

}  // namespace mtx::doc
