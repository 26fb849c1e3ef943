// .odt and .odp: OpenDocument's text:p and text:h paragraphs in content.xml (and, for text documents, the headers
// and footers of styles.xml). Spans and links are elements; spaces, tabs and line breaks separate words; notes,
// frames, annotations, fields and bookmarks are points, their own paragraphs translated where they stand.
#include <memory>
#include <string>

#include "archive.h"
#include "formats.h"
#include "mtx/util/errors.h"
#include "paragraphs.h"
#include "xml.h"

namespace mtx::doc {
namespace {

constexpr const char* kTextUri = "urn:oasis:names:tc:opendocument:xmlns:text:1.0";

struct OdfReader {
  const std::string& T;  // "text:"
  XmlParagraph& out;

  void content(const pugi::xml_node& parent) {
    for (pugi::xml_node c = parent.first_child(); c; c = c.next_sibling()) {
      if (c.type() == pugi::node_pcdata || c.type() == pugi::node_cdata) {
        add_text(out.inlines, c.value());
        continue;
      }
      if (c.type() != pugi::node_element) continue;
      const std::string name = c.name();
      if (name == T + "span" || name == T + "a") {
        out.elements.push_back({-1, c});
        const int id = int(out.elements.size()) - 1;
        out.inlines.push_back({Inline::open, "", id});
        content(c);
        out.inlines.push_back({Inline::close, "", id});
        continue;
      }
      out.points.emplace_back();
      out.points.back().nodes.emplace_back(c, -1);
      const bool space = name == T + "s" || name == T + "tab" || name == T + "line-break";
      out.inlines.push_back({space ? Inline::space_point : Inline::point, "", int(out.points.size()) - 1});
    }
  }
};

void odf_paragraphs(const pugi::xml_node& n, const std::string& T, std::vector<pugi::xml_node>& out) {
  for (pugi::xml_node c = n.first_child(); c; c = c.next_sibling()) {
    if (c.type() != pugi::node_element) continue;
    const std::string name = c.name();
    if (name == T + "p" || name == T + "h") out.push_back(c);
    odf_paragraphs(c, T, out);
  }
}

}  // namespace

std::string translate_odf(const std::string& bytes, Format format, const std::string& name, const Translate& translate,
                          const Limits& limits, const Progress& progress) {
  std::vector<Entry> entries = read_archive(bytes, name, limits);
  std::vector<std::string> parts{"content.xml"};
  if (format == Format::odt) parts.push_back("styles.xml");
  bool content = false;
  for (const Entry& e : entries) content = content || e.name == "content.xml";
  if (!content) throw DataError(name + ": no content.xml (not an OpenDocument file)");
  struct Part {
    Entry* entry;
    pugi::xml_document doc;
    std::vector<XmlParagraph> paragraphs;
  };
  std::vector<std::unique_ptr<Part>> read;
  std::vector<Inlines> all;
  for (Entry& e : entries) {
    if (std::find(parts.begin(), parts.end(), e.name) == parts.end()) continue;
    auto part = std::make_unique<Part>();
    part->entry = &e;
    parse_xml(part->doc, e.bytes, name + ": " + e.name);
    const std::string T = prefix_of(part->doc.document_element(), kTextUri, "text:");
    std::vector<pugi::xml_node> nodes;
    odf_paragraphs(part->doc.document_element(), T, nodes);
    for (const pugi::xml_node n : nodes) {
      XmlParagraph p;
      p.node = n;
      OdfReader{T, p}.content(n);
      all.push_back(p.inlines);
      part->paragraphs.push_back(std::move(p));
    }
    read.push_back(std::move(part));
  }
  const std::vector<Inlines> translated = translate_paragraphs(all, name, translate, progress);
  XmlWriter writer;
  writer.run = [](pugi::xml_node parent, int, const XmlParagraph&) { return parent; };
  writer.text = [](pugi::xml_node parent, int, const std::string& text, const XmlParagraph&) {
    parent.append_child(pugi::node_pcdata).set_value(text.c_str());
  };
  size_t k = 0;
  for (auto& part : read) {
    for (XmlParagraph& p : part->paragraphs) {
      if (has_words(p.inlines)) rewrite(p, translated[k], writer);
      ++k;
    }
    part->entry->bytes = write_xml(part->doc);
  }
  return write_archive(entries, name);
}

}  // namespace mtx::doc
