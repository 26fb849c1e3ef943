// .docx and .pptx: WordprocessingML's w:p and DrawingML's a:p paragraphs, in the parts [Content_Types].xml names
// (a document's body, headers, footers, footnotes, endnotes and comments; slides and their notes).
#include <algorithm>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include "mtx/util/errors.h"

#include "archive.h"
#include "formats.h"
#include "paragraphs.h"
#include "xml.h"

namespace mtx::doc {
namespace {

constexpr const char* kWordUri = "http://schemas.openxmlformats.org/wordprocessingml/2006/main";
constexpr const char* kDrawingUri = "http://schemas.openxmlformats.org/drawingml/2006/main";

std::string local_name(const pugi::xml_node& n, const std::string& prefix) {
  const std::string name = n.name();
  return name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : "";
}

// One paragraph's content read into an XmlParagraph.
struct OoxmlReader {
  const std::string& P;  // "w:" or "a:"
  bool word;             // WordprocessingML (else DrawingML)
  XmlParagraph& out;
  std::map<std::string, int> style_of;  // run properties as written -> style
  struct Piece {
    enum Kind { text, point, open, close } kind;
    std::string value;
    int style = -1, id = -1;
  };
  std::vector<Piece> pieces;
  std::vector<size_t> chars;  // per style: characters of text
  int field = -1;             // the point a complex field (fldChar begin .. end) goes into, -1: none
  int field_depth = 0;

  int style(const pugi::xml_node& run) {
    const pugi::xml_node props = run.child((P + "rPr").c_str());
    std::string key;
    if (props) {
      std::ostringstream s;
      props.print(s, "", pugi::format_raw);
      key = s.str();
    }
    const auto [it, added] = style_of.emplace(key, int(out.styles.size()));
    if (added) {
      out.styles.push_back(props);
      chars.push_back(0);
    }
    return it->second;
  }
  int new_point() {
    out.points.emplace_back();
    return int(out.points.size()) - 1;
  }
  void point(const pugi::xml_node& n, int style, bool space = false) {
    if (field >= 0) {
      out.points[size_t(field)].nodes.emplace_back(n, style);
      return;
    }
    const int id = new_point();
    out.points[size_t(id)].nodes.emplace_back(n, style);
    pieces.push_back({Piece::point, space ? " " : "", style, id});
  }
  void run(const pugi::xml_node& r) {
    const int s = style(r);
    for (pugi::xml_node c = r.first_child(); c; c = c.next_sibling()) {
      if (c.type() != pugi::node_element) continue;
      const std::string name = local_name(c, P);
      if (name == "rPr") continue;
      if (word && name == "fldChar") {
        const std::string type = c.attribute((P + "fldCharType").c_str()).value();
        if (type == "begin" && field_depth++ == 0) {
          field = new_point();
          pieces.push_back({Piece::point, "", s, field});
        }
        point(c, s);  // into the field's point
        if (type == "end" && field_depth > 0 && --field_depth == 0) field = -1;
        continue;
      }
      if (name == "t" && field < 0) {
        const std::string t = c.text().get();
        pieces.push_back({Piece::text, t, s, -1});
        chars[size_t(s)] += t.size();
        continue;
      }
      point(c, s, name == "tab" || name == "br" || name == "cr");
    }
  }
  void content(const pugi::xml_node& parent) {
    for (pugi::xml_node c = parent.first_child(); c; c = c.next_sibling()) {
      if (c.type() != pugi::node_element) continue;  // whitespace between elements is not text
      const std::string name = local_name(c, P);
      if (name == "pPr") {
        if (parent == out.node) out.first.push_back(c);
        continue;
      }
      if (!word && name == "endParaRPr") {
        out.last.push_back(c);
        continue;
      }
      if (name == "r") {
        run(c);
      } else if (word && field < 0 &&
                 (name == "hyperlink" || name == "smartTag" || name == "ins" || name == "customXml" || name == "dir" ||
                  name == "bdo")) {
        out.elements.push_back({-1, c});
        const int id = int(out.elements.size()) - 1;
        pieces.push_back({Piece::open, "", -1, id});
        content(c);
        pieces.push_back({Piece::close, "", -1, id});
      } else if (name == "br" && !word) {
        point(c, -1, true);
      } else {
        point(c, -1);
      }
    }
  }
  // Text of the base style (the one with the most characters) outside every element; other styles' text inside
  // a span of its own, consecutive text of one style (points between) in one span.
  void finish() {
    out.base_style = -1;
    for (size_t s = 0; s < chars.size(); ++s) {
      if (out.base_style < 0 || chars[s] > chars[size_t(out.base_style)]) out.base_style = int(s);
    }
    int span = -1, span_style = -1;
    const auto close_span = [&] {
      if (span >= 0) out.inlines.push_back({Inline::close, "", span});
      span = span_style = -1;
    };
    for (const Piece& p : pieces) {
      switch (p.kind) {
        case Piece::text:
          if (p.style != span_style) {
            close_span();
            if (p.style != out.base_style) {
              out.elements.push_back({p.style, {}});
              span = int(out.elements.size()) - 1;
              span_style = p.style;
              out.inlines.push_back({Inline::open, "", span});
            }
          }
          add_text(out.inlines, p.value);
          break;
        case Piece::point:
          out.inlines.push_back({p.value.empty() ? Inline::point : Inline::space_point, "", p.id});
          break;
        case Piece::open:
          close_span();
          out.inlines.push_back({Inline::open, "", p.id});
          break;
        case Piece::close:
          close_span();
          out.inlines.push_back({Inline::close, "", p.id});
          break;
      }
    }
    close_span();
  }
};

void word_paragraphs(const pugi::xml_node& n, const std::string& paragraph, std::vector<pugi::xml_node>& out) {
  for (pugi::xml_node c = n.first_child(); c; c = c.next_sibling()) {
    if (c.type() != pugi::node_element) continue;
    if (paragraph == c.name()) out.push_back(c);
    word_paragraphs(c, paragraph, out);  // paragraphs inside a paragraph: text boxes, a drawing's text
  }
}

// The part names [Content_Types].xml gives a content type that ends with one of `wanted`.
std::vector<std::string> parts_of(const std::vector<Entry>& entries, const std::string& name,
                                  const std::vector<std::string>& wanted) {
  const Entry* types = nullptr;
  for (const Entry& e : entries) {
    if (e.name == "[Content_Types].xml") types = &e;
  }
  if (!types) throw DataError(name + ": no [Content_Types].xml (not an Office Open XML document)");
  pugi::xml_document doc;
  parse_xml(doc, types->bytes, name + ": [Content_Types].xml");
  std::vector<std::string> out;
  for (const pugi::xml_node o : doc.document_element().children()) {
    const std::string element = o.name();
    const bool override_ =
        element == "Override" || (element.size() > 9 && element.compare(element.size() - 9, 9, ":Override") == 0);
    if (!override_) continue;
    const std::string type = o.attribute("ContentType").value();
    std::string part = o.attribute("PartName").value();
    if (!part.empty() && part[0] == '/') part = part.substr(1);
    for (const std::string& w : wanted) {
      if (type.size() >= w.size() && type.compare(type.size() - w.size(), w.size(), w) == 0) out.push_back(part);
    }
  }
  return out;
}

}  // namespace

std::string translate_ooxml(const std::string& bytes, Format format, const std::string& name,
                            const Translate& translate, const Limits& limits, const Progress& progress) {
  const bool word = format == Format::docx;
  std::vector<Entry> entries = read_archive(bytes, name, limits);
  const std::vector<std::string> wanted =
      word ? std::vector<std::string>{"wordprocessingml.document.main+xml", "wordprocessingml.header+xml",
                                      "wordprocessingml.footer+xml",        "wordprocessingml.footnotes+xml",
                                      "wordprocessingml.endnotes+xml",      "wordprocessingml.comments+xml",
                                      "wordprocessingml.template.main+xml", "macroEnabled.main+xml"}
           : std::vector<std::string>{"presentationml.slide+xml", "presentationml.notesSlide+xml"};
  const std::vector<std::string> parts = parts_of(entries, name, wanted);
  if (parts.empty()) {
    throw DataError(name + ": [Content_Types].xml names no " + (word ? "document" : "slide") + " part (not a ." +
                    info(format).name + " file?)");
  }
  const auto prefix = [word](pugi::xml_node root) {
    return prefix_of(root, word ? kWordUri : kDrawingUri, word ? "w:" : "a:");
  };
  const auto read = [&](pugi::xml_node root) {
    const std::string P = prefix(root);
    std::vector<pugi::xml_node> nodes;
    word_paragraphs(root, P + "p", nodes);
    std::vector<XmlParagraph> out(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) {
      out[i].node = nodes[i];
      OoxmlReader reader{P, word, out[i], {}, {}, {}};
      reader.content(nodes[i]);
      reader.finish();
    }
    return out;
  };
  const auto writer_for = [&](pugi::xml_node root) {
    const std::string P = prefix(root);
    XmlWriter writer;
    writer.run = [P](pugi::xml_node parent, int style, const XmlParagraph& p) {
      pugi::xml_node r = parent.append_child((P + "r").c_str());
      if (style >= 0 && p.styles[size_t(style)]) r.append_copy(p.styles[size_t(style)]);
      return r;
    };
    writer.text = [P, word, run = writer.run](pugi::xml_node parent, int style, const std::string& text,
                                              const XmlParagraph& p) {
      pugi::xml_node t = run(parent, style, p).append_child((P + "t").c_str());
      if (word) t.append_attribute("xml:space") = "preserve";
      t.append_child(pugi::node_pcdata).set_value(text.c_str());
    };
    return writer;
  };
  translate_parts(entries, parts, name, read, writer_for, translate, progress);
  return write_archive(entries, name);
}

}  // namespace mtx::doc
