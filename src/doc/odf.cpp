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
  const auto read = [](pugi::xml_node root) {
    const std::string T = prefix_of(root, kTextUri, "text:");
    std::vector<pugi::xml_node> nodes;
    odf_paragraphs(root, T, nodes);
    std::vector<XmlParagraph> out(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) {
      out[i].node = nodes[i];
      OdfReader{T, out[i]}.content(nodes[i]);
    }
    return out;
  };
  const auto writer_for = [](pugi::xml_node) {
    XmlWriter writer;
    writer.run = [](pugi::xml_node parent, int, const XmlParagraph&) { return parent; };
    writer.text = [](pugi::xml_node parent, int, const std::string& text, const XmlParagraph&) {
      parent.append_child(pugi::node_pcdata).set_value(text.c_str());
    };
    return writer;
  };
  translate_parts(entries, parts, name, read, writer_for, translate, progress);
  return write_archive(entries, name);
}

}  // namespace mtx::doc
