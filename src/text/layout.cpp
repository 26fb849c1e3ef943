#include "mtx/text/layout.h"

#include <gumbo.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "mtx/util/errors.h"

namespace mtx::text {

Format parse_format(const std::string& name, const std::string& field) {
  if (name == "text") return Format::text;
  if (name == "html") return Format::html;
  throw ConfigError(field + " must be text or html, not \"" + name + "\"");
}

std::vector<Range> words_of(std::string_view s) {
  std::vector<Range> out;
  size_t n = 0;
  for (size_t i = 0; i < s.size();) {
    if (is_space(s, i, &n)) {
      i += n;
      continue;
    }
    Range w{i, i};
    while (w.end < s.size() && !is_space(s, w.end, &n)) w.end += n;
    out.push_back(w);
    i = w.end;
  }
  return out;
}

namespace {

bool ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }

// The pieces a sentence is translated in: itself, or its clauses where the model does not take it whole.
std::vector<Range> pieces_of(std::string_view text, Range sentence, const Fits& fits) {
  if (!fits || fits(text.substr(sentence.begin, sentence.size()))) return {sentence};
  return Segmenter::clauses(text, sentence, fits);
}

// ---- HTML ----------------------------------------------------------------------------------------------------

enum class Kind { text, inline_element, point, block, kept_block };

struct HtmlLayout {
  const std::string& source;
  const Segmenter& segmenter;
  const Fits& fits;
  Layout& out;

  // A run being gathered: the text of its nodes with whitespace runs as one space, and its elements.
  struct Builder {
    std::string plain;
    bool pending = false;  // whitespace seen since the last character
    std::vector<InlineElement> elements;
    std::vector<std::pair<Range, std::string>> texts;  // its text nodes: bytes and text (the fallback)
    size_t begin = std::string::npos, end = 0;
    bool ordered = true;  // the nodes' bytes in document order (HTML5 recovery can move nodes)
    void add_text(const char* s, size_t n) {
      for (size_t i = 0; i < n; ++i) {
        if (ascii_space(s[i])) {
          pending = !plain.empty();
          continue;
        }
        if (pending) plain += ' ';
        pending = false;
        plain += s[i];
      }
    }
  };

  // Byte offset of a piece of the source, or npos where it is not one (text Gumbo made up).
  size_t offset(const GumboStringPiece& p) const {
    if (p.data == nullptr || p.data < source.data() || p.data + p.length > source.data() + source.size())
      return std::string::npos;
    return size_t(p.data - source.data());
  }
  static const GumboVector* children(const GumboNode* n) {
    if (n->type == GUMBO_NODE_ELEMENT || n->type == GUMBO_NODE_TEMPLATE) return &n->v.element.children;
    if (n->type == GUMBO_NODE_DOCUMENT) return &n->v.document.children;
    return nullptr;
  }
  Range bytes(const GumboNode* n) const {
    if (n->type == GUMBO_NODE_ELEMENT || n->type == GUMBO_NODE_TEMPLATE) {
      const GumboElement& e = n->v.element;
      size_t b = offset(e.original_tag), end = b == std::string::npos ? 0 : b + e.original_tag.length;
      for (unsigned i = 0; i < e.children.length; ++i) {
        const Range c = bytes(static_cast<const GumboNode*>(e.children.data[i]));
        if (c.begin == std::string::npos) continue;
        b = std::min(b, c.begin);
        end = std::max(end, c.end);
      }
      const size_t close = offset(e.original_end_tag);
      if (close != std::string::npos && e.original_end_tag.length > 0)
        end = std::max(end, close + e.original_end_tag.length);
      return {b, end};
    }
    const GumboText& t = n->v.text;
    const size_t b = offset(t.original_text);
    return {b, b == std::string::npos ? 0 : b + t.original_text.length};
  }
  static bool has_attribute(const GumboNode* n, const char* name, const char* value) {
    const GumboVector& a = n->v.element.attributes;
    for (unsigned i = 0; i < a.length; ++i) {
      const auto* attr = static_cast<const GumboAttribute*>(a.data[i]);
      if (strcasecmp(attr->name, name) != 0) continue;
      if (std::strcmp(name, "class") == 0) {  // one of the classes
        const std::string classes = std::string(" ") + attr->value + " ";
        if (classes.find(std::string(" ") + value + " ") != std::string::npos) return true;
      } else if (strcasecmp(attr->value, value) == 0) {
        return true;
      }
    }
    return false;
  }
  static bool inline_tag(GumboTag t) {
    switch (t) {
      case GUMBO_TAG_A:
      case GUMBO_TAG_ABBR:
      case GUMBO_TAG_B:
      case GUMBO_TAG_BDI:
      case GUMBO_TAG_BDO:
      case GUMBO_TAG_BIG:
      case GUMBO_TAG_CITE:
      case GUMBO_TAG_DATA:
      case GUMBO_TAG_DFN:
      case GUMBO_TAG_EM:
      case GUMBO_TAG_FONT:
      case GUMBO_TAG_I:
      case GUMBO_TAG_INS:
      case GUMBO_TAG_DEL:
      case GUMBO_TAG_LABEL:
      case GUMBO_TAG_MARK:
      case GUMBO_TAG_Q:
      case GUMBO_TAG_S:
      case GUMBO_TAG_SMALL:
      case GUMBO_TAG_SPAN:
      case GUMBO_TAG_STRIKE:
      case GUMBO_TAG_STRONG:
      case GUMBO_TAG_SUB:
      case GUMBO_TAG_SUP:
      case GUMBO_TAG_TIME:
      case GUMBO_TAG_TT:
      case GUMBO_TAG_U:
      case GUMBO_TAG_NOBR:
      case GUMBO_TAG_RUBY:
      case GUMBO_TAG_RT:
      case GUMBO_TAG_RP:
        return true;
      default:
        return false;
    }
  }
  static bool kept_inline_tag(GumboTag t) {
    return t == GUMBO_TAG_CODE || t == GUMBO_TAG_KBD || t == GUMBO_TAG_SAMP || t == GUMBO_TAG_VAR ||
           t == GUMBO_TAG_SCRIPT || t == GUMBO_TAG_STYLE || t == GUMBO_TAG_NOSCRIPT || t == GUMBO_TAG_TEMPLATE;
  }
  static bool void_tag(GumboTag t) {
    return t == GUMBO_TAG_BR || t == GUMBO_TAG_IMG || t == GUMBO_TAG_WBR || t == GUMBO_TAG_INPUT;
  }
  Kind kind(const GumboNode* n) const {
    switch (n->type) {
      case GUMBO_NODE_TEXT:
      case GUMBO_NODE_WHITESPACE:
      case GUMBO_NODE_CDATA:
        return Kind::text;
      case GUMBO_NODE_COMMENT:
      case GUMBO_NODE_TEMPLATE:
        return Kind::point;
      case GUMBO_NODE_ELEMENT:
        break;
      default:
        return Kind::block;
    }
    const GumboTag t = n->v.element.tag;
    const bool kept = has_attribute(n, "translate", "no") || has_attribute(n, "class", "notranslate") ||
                      t == GUMBO_TAG_PRE || t == GUMBO_TAG_TEXTAREA || kept_inline_tag(t);
    const bool inline_like = inline_tag(t) || kept_inline_tag(t) || void_tag(t);
    if (kept) return inline_like && all_inline(n) ? Kind::point : Kind::kept_block;
    if (void_tag(t)) return Kind::point;
    return inline_tag(t) && all_inline(n) ? Kind::inline_element : Kind::block;
  }
  bool all_inline(const GumboNode* n) const {
    const GumboVector* c = children(n);
    for (unsigned i = 0; c && i < c->length; ++i) {
      const auto* child = static_cast<const GumboNode*>(c->data[i]);
      const Kind k = kind(child);
      if (k == Kind::block || k == Kind::kept_block) return false;
    }
    return true;
  }

  void add(Builder& b, const GumboNode* n, int parent, bool top) {
    const Range r = bytes(n);
    if (top && r.begin != std::string::npos) {
      if (r.begin < b.end) b.ordered = false;
      b.begin = std::min(b.begin, r.begin);
      b.end = std::max(b.end, r.end);
    }
    const Kind k = kind(n);
    if (k == Kind::text) {
      const GumboText& t = n->v.text;
      b.add_text(t.text, std::strlen(t.text));
      if (r.begin != std::string::npos) b.texts.emplace_back(r, t.text);
      return;
    }
    InlineElement e;
    e.parent = parent;
    e.first_char = e.end_char = b.plain.size();
    if (k == Kind::point) {
      if (r.begin != std::string::npos) e.open = source.substr(r.begin, r.end - r.begin);
      b.elements.push_back(e);
      if (n->type == GUMBO_NODE_ELEMENT && n->v.element.tag == GUMBO_TAG_BR) b.pending = !b.plain.empty();
      return;
    }
    const GumboElement& el = n->v.element;
    const size_t open = offset(el.original_tag), close = offset(el.original_end_tag);
    if (open != std::string::npos) e.open = source.substr(open, el.original_tag.length);
    if (close != std::string::npos && el.original_end_tag.length > 0) {
      e.close = source.substr(close, el.original_end_tag.length);
    } else if (!e.open.empty()) {
      e.close = std::string("</") + gumbo_normalized_tagname(el.tag) + ">";
    }
    const auto index = int(b.elements.size());
    b.elements.push_back(e);
    for (unsigned i = 0; i < el.children.length; ++i)
      add(b, static_cast<const GumboNode*>(el.children.data[i]), index, false);
    b.elements[size_t(index)].end_char = b.plain.size();
  }

  void walk(const GumboNode* node) {
    const GumboVector* c = children(node);
    Builder b;
    for (unsigned i = 0; c && i < c->length; ++i) {
      const auto* child = static_cast<const GumboNode*>(c->data[i]);
      const Kind k = kind(child);
      if (k == Kind::block || k == Kind::kept_block) {
        flush(b);
        b = Builder();
        if (k == Kind::block) walk(child);
        continue;
      }
      add(b, child, -1, true);
    }
    flush(b);
  }

  void flush(Builder& b) {
    if (b.plain.empty() || b.begin == std::string::npos) return;
    if (!b.ordered) {  // nodes moved by error recovery: each text node alone, as plain text
      for (const auto& [range, text] : b.texts) {
        Builder one;
        one.add_text(text.data(), text.size());
        one.begin = range.begin;
        one.end = range.end;
        flush(one);
      }
      return;
    }
    Run run;
    run.markup = true;
    run.bytes = {b.begin, b.end};
    while (run.bytes.begin < run.bytes.end && ascii_space(source[run.bytes.begin])) ++run.bytes.begin;
    while (run.bytes.end > run.bytes.begin && ascii_space(source[run.bytes.end - 1])) --run.bytes.end;
    run.first_sentence = out.sentences.size();
    std::vector<Range> words;  // over b.plain
    std::vector<std::pair<int, int>> piece_words;
    for (const Range& s : segmenter.sentences(b.plain)) {
      for (const Range& p : pieces_of(b.plain, s, fits)) {
        const int first = int(words.size());
        for (Range w : words_of(std::string_view(b.plain).substr(p.begin, p.size()))) {
          words.push_back({w.begin + p.begin, w.end + p.begin});
        }
        out.sentences.push_back(b.plain.substr(p.begin, p.size()));
        run.words.push_back(int(words.size()) - first);
        piece_words.emplace_back(first, int(words.size()));
      }
    }
    run.sentences = out.sentences.size() - run.first_sentence;
    if (run.sentences == 0) return;
    const auto first_at_or_after = [&](size_t c) {
      return int(std::lower_bound(words.begin(), words.end(), c, [](const Range& w, size_t x) { return w.begin < x; }) -
                 words.begin());
    };
    for (InlineElement& e : b.elements) {
      const int point = first_at_or_after(e.first_char);
      e.first_word = e.end_word = point;
      if (e.end_char > e.first_char) {
        // Words overlapping [first_char, end_char): the first that ends after its start, up to the first that
        // starts at or after its end.
        int f = int(std::upper_bound(words.begin(), words.end(), e.first_char,
                                     [](size_t x, const Range& w) { return x < w.end; }) -
                    words.begin());
        const int end = first_at_or_after(e.end_char);
        if (f < end) {
          e.first_word = f;
          e.end_word = end;
        }
      }
    }
    for (const auto& [first, end] : piece_words) {
      bool needs = false;
      for (const InlineElement& e : b.elements) {
        const auto inside = [&, first = first, end = end](int w) { return w > first && w < end; };
        needs = needs || inside(e.first_word) || inside(e.end_word);
      }
      out.needs_alignment.push_back(needs);
    }
    run.elements = std::move(b.elements);
    out.runs.push_back(std::move(run));
  }
};

std::string escaped(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == '&')
      out += "&amp;";
    else if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else
      out += c;
  }
  return out;
}

// One HTML run put back: its target words with its elements placed on them.
struct Placer {
  const Run& run;
  std::vector<std::string> words;  // target words, all sentences
  std::vector<int> source;         // per target word: the run's source word it is aligned to
  struct Span {
    int begin = 0, end = 0;
  };
  std::vector<Span> spans;             // per element: its target words
  std::vector<std::vector<int>> kids;  // per element + 1 (0: the run): children in document order
  std::string out;
  bool space = false;

  Placer(const Run& r, const std::vector<std::string>& translations, const std::vector<WordLinks>& links) : run(r) {
    int offset = 0;
    for (size_t s = 0; s < run.sentences; ++s) {
      const size_t i = run.first_sentence + s;
      const std::string& t = translations[i];
      const std::vector<Range> w = words_of(t);
      const int n_src = run.words[s];
      const WordLinks* l = i < links.size() && links[i].size() == w.size() ? &links[i] : nullptr;
      int last = offset;
      for (size_t j = 0; j < w.size(); ++j) {
        words.push_back(t.substr(w[j].begin, w[j].size()));
        int src = l ? (*l)[j] : (n_src == 0 ? -1 : int(j * size_t(n_src) / w.size()));
        src = src < 0 || src >= n_src ? -1 : offset + src;
        if (src < 0) src = last;  // unaligned: with the word before it
        source.push_back(src);
        last = src;
      }
      offset += n_src;
    }
    kids.resize(run.elements.size() + 1);
    for (size_t e = 0; e < run.elements.size(); ++e) kids[size_t(run.elements[e].parent + 1)].push_back(int(e));
    spans.resize(run.elements.size());
    for (size_t e = 0; e < run.elements.size(); ++e) spans[e] = target_span(run.elements[e]);
    fix(0, {0, int(words.size())});
    emit(0, {0, int(words.size())});
  }
  Span target_span(const InlineElement& e) const {
    const auto n = int(words.size());
    if (e.end_word > e.first_word) {
      Span s{n, -1};
      for (int t = 0; t < n; ++t) {
        if (source[size_t(t)] >= e.first_word && source[size_t(t)] < e.end_word) {
          s.begin = std::min(s.begin, t);
          s.end = std::max(s.end, t + 1);
        }
      }
      if (s.end >= 0) return s;
      // Words nothing was aligned to: onto the target words aligned nearest to them (an element keeps its text).
      int best = -1;
      for (int t = 0; t < n; ++t) {
        const int src = source[size_t(t)];
        const int d = src < e.first_word ? e.first_word - src : src - (e.end_word - 1);
        if (best < 0 || d < best) {
          best = d;
          s = {t, t + 1};
        } else if (d == best) {
          s.end = t + 1;
        }
      }
      if (best >= 0) return s;
    }
    // A point, or words nothing was aligned to: before the first target word aligned at or after it.
    int at = n;
    for (int t = 0; t < n; ++t) {
      if (source[size_t(t)] >= e.first_word) {
        at = t;
        break;
      }
    }
    return {at, at};
  }
  // Children inside their parent, and siblings apart, in target order: each element once, well nested. An element
  // that wraps words but whose siblings took all of its target words (two elements aligned to one word) gets one:
  // the last of the sibling before it when that has two or more, else the next word -- it keeps its text.
  void fix(size_t node, Span within) {
    std::vector<int>& c = kids[node];
    for (const int e : c) {
      Span& s = spans[size_t(e)];
      s.begin = std::clamp(s.begin, within.begin, within.end);
      s.end = std::clamp(s.end, s.begin, within.end);
    }
    std::stable_sort(c.begin(), c.end(), [&](int a, int b) { return spans[size_t(a)].begin < spans[size_t(b)].begin; });
    int cursor = within.begin;
    for (size_t k = 0; k < c.size(); ++k) {
      Span& s = spans[size_t(c[k])];
      if (s.begin < cursor) s.begin = cursor;
      if (s.end < s.begin) s.end = s.begin;
      const InlineElement& el = run.elements[size_t(c[k])];
      if (s.end == s.begin && el.end_word > el.first_word && !el.close.empty()) {
        Span* before = k > 0 ? &spans[size_t(c[k - 1])] : nullptr;
        if (before && before->end == s.begin && before->end - before->begin >= 2) {
          --before->end;
          s = {before->end, before->end + 1};
        } else if (s.begin < within.end) {
          s.end = s.begin + 1;
        }
      }
      cursor = s.end;
    }
    for (const int e : c) fix(size_t(e) + 1, spans[size_t(e)]);
  }
  void word(int t) {
    if (space) out += ' ';
    out += escaped(words[size_t(t)]);
    space = true;
  }
  void emit(size_t node, Span within) {
    int cursor = within.begin;
    for (const int e : kids[node]) {
      const Span s = spans[size_t(e)];
      for (; cursor < s.begin; ++cursor) word(cursor);
      const InlineElement& el = run.elements[size_t(e)];
      if (space && !el.open.empty()) {
        out += ' ';
        space = false;
      }
      out += el.open;
      emit(size_t(e) + 1, s);
      out += el.close;
      cursor = s.end;
    }
    for (; cursor < within.end; ++cursor) word(cursor);
  }
};

}  // namespace

Layout layout(std::string text, Format format, const Segmenter& segmenter, const Fits& fits) {
  Layout out;
  out.format = format;
  out.original = std::move(text);
  const std::string& source = out.original;
  if (format == Format::text) {
    for (const Range& s : segmenter.sentences(source)) {
      for (const Range& p : pieces_of(source, s, fits)) {
        Run run;
        run.bytes = p;
        run.first_sentence = out.sentences.size();
        run.sentences = 1;
        out.sentences.push_back(source.substr(p.begin, p.size()));
        out.needs_alignment.push_back(0);
        out.runs.push_back(std::move(run));
      }
    }
    return out;
  }
  GumboOptions options = kGumboDefaultOptions;
  options.fragment_context = GUMBO_TAG_BODY;  // a fragment, as a page's body would hold it
  options.fragment_namespace = GUMBO_NAMESPACE_HTML;
  const std::unique_ptr<GumboOutput, void (*)(GumboOutput*)> parsed(
      gumbo_parse_with_options(&options, source.data(), source.size()),
      [](GumboOutput* o) { gumbo_destroy_output(&kGumboDefaultOptions, o); });
  if (parsed) {
    HtmlLayout html{source, segmenter, fits, out};
    html.walk(parsed->root);
  }
  // Runs in byte order without overlap (what error recovery moved is left as it is).
  Layout kept = out;
  kept.runs.clear();
  size_t at = 0;
  std::vector<Run> runs = out.runs;
  for (Run& r : runs) {
    if (r.bytes.begin < at) continue;
    at = r.bytes.end;
    kept.runs.push_back(std::move(r));
  }
  return kept;
}

std::string render(const Layout& layout, const std::vector<std::string>& translations,
                   const std::vector<WordLinks>& links) {
  if (translations.size() != layout.sentences.size()) {
    throw ConfigError("render: " + std::to_string(translations.size()) + " translations for " +
                      std::to_string(layout.sentences.size()) + " sentences");
  }
  std::string out;
  size_t at = 0;
  for (const Run& run : layout.runs) {
    out.append(layout.original, at, run.bytes.begin - at);
    if (run.markup) {
      out += Placer(run, translations, links).out;
    } else {
      out += translations[run.first_sentence];
    }
    at = run.bytes.end;
  }
  out.append(layout.original, at, std::string::npos);
  return out;
}

}  // namespace mtx::text
