#include "mtx/serve/html.h"

#include <gumbo.h>

#include <cctype>
#include <memory>

namespace mtx::serve::html {
namespace {

bool space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }

// Whitespace runs as one space, trimmed: one line for the translator.
std::string one_line(const std::string& s) {
  std::string out;
  bool gap = false;
  for (const char c : s) {
    if (space(c)) {
      gap = !out.empty();
      continue;
    }
    if (gap) out += ' ';
    gap = false;
    out += c;
  }
  return out;
}

void collect(const GumboNode* node, const std::string& source, std::vector<Span>& spans) {
  if (node->type == GUMBO_NODE_TEXT) {
    const GumboText& t = node->v.text;
    // Text that Gumbo made up (no bytes in the source) has nothing to replace.
    if (t.original_text.data == nullptr || t.original_text.length == 0) return;
    const auto begin = size_t(t.original_text.data - source.data());
    if (begin > source.size() || begin + t.original_text.length > source.size()) return;
    Span s;
    s.begin = begin;
    s.end = begin + t.original_text.length;
    const std::string raw = source.substr(s.begin, s.end - s.begin);
    size_t a = 0, b = raw.size();
    while (a < b && space(raw[a])) ++a;
    while (b > a && space(raw[b - 1])) --b;
    s.lead = raw.substr(0, a);
    s.trail = raw.substr(b);
    s.text = one_line(t.text);
    if (!s.text.empty()) spans.push_back(std::move(s));
    return;
  }
  if (node->type != GUMBO_NODE_ELEMENT && node->type != GUMBO_NODE_DOCUMENT) return;
  if (node->type == GUMBO_NODE_ELEMENT) {
    const GumboTag tag = node->v.element.tag;
    if (tag == GUMBO_TAG_SCRIPT || tag == GUMBO_TAG_STYLE || tag == GUMBO_TAG_TEMPLATE || tag == GUMBO_TAG_NOSCRIPT)
      return;
  }
  const GumboVector& children = node->type == GUMBO_NODE_ELEMENT ? node->v.element.children : node->v.document.children;
  for (unsigned i = 0; i < children.length; ++i) {
    collect(static_cast<const GumboNode*>(children.data[i]), source, spans);
  }
}

std::string escaped(const std::string& text) {
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

}  // namespace

std::vector<Span> text_spans(const std::string& fragment) {
  GumboOptions options = kGumboDefaultOptions;
  options.fragment_context = GUMBO_TAG_BODY;  // a fragment, as a page's body would hold it
  options.fragment_namespace = GUMBO_NAMESPACE_HTML;
  const std::unique_ptr<GumboOutput, void (*)(GumboOutput*)> out(
      gumbo_parse_with_options(&options, fragment.data(), fragment.size()),
      [](GumboOutput* o) { gumbo_destroy_output(&kGumboDefaultOptions, o); });
  std::vector<Span> spans;
  if (out) collect(out->root, fragment, spans);
  // Document order is source order for text Gumbo did not move; keep only spans that do not overlap, in order.
  std::vector<Span> ordered;
  for (auto& s : spans) {
    if (!ordered.empty() && s.begin < ordered.back().end) continue;
    ordered.push_back(std::move(s));
  }
  return ordered;
}

std::string replace(const std::string& fragment, const std::vector<Span>& spans,
                    const std::vector<std::string>& translations) {
  std::string out;
  size_t at = 0;
  for (size_t i = 0; i < spans.size() && i < translations.size(); ++i) {
    out.append(fragment, at, spans[i].begin - at);
    out += spans[i].lead + escaped(translations[i]) + spans[i].trail;
    at = spans[i].end;
  }
  out.append(fragment, at, std::string::npos);
  return out;
}

}  // namespace mtx::serve::html
