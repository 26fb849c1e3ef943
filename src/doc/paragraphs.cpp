#include "paragraphs.h"

#include <algorithm>
#include <memory>
#include <set>

#include "xml.h"

namespace mtx::doc {

void rewrite(XmlParagraph& p, const Inlines& translated, const XmlWriter& writer) {
  std::vector<pugi::xml_node> old;
  for (pugi::xml_node c = p.node.first_child(); c; c = c.next_sibling()) {
    if (std::find(p.first.begin(), p.first.end(), c) == p.first.end() &&
        std::find(p.last.begin(), p.last.end(), c) == p.last.end()) {
      old.push_back(c);
    }
  }
  std::set<pugi::xml_node_struct*> moved;
  std::vector<pugi::xml_node> parents{p.node};
  std::vector<int> styles{p.base_style};
  std::vector<int> open;  // element ids
  for (const Inline& i : translated) {
    pugi::xml_node parent = parents.back();
    switch (i.kind) {
      case Inline::text:
        if (!i.value.empty()) writer.text(parent, styles.back(), i.value, p);
        break;
      case Inline::open: {
        const XmlParagraph::Element& e = p.elements.at(size_t(i.id));
        open.push_back(i.id);
        if (e.container) {
          pugi::xml_node c = parent.append_child(e.container.name());
          for (const pugi::xml_attribute a : e.container.attributes()) c.append_copy(a);
          parents.push_back(c);
        }
        styles.push_back(e.style >= 0 ? e.style : styles.back());
        break;
      }
      case Inline::close: {
        const XmlParagraph::Element& e = p.elements.at(size_t(open.back()));
        open.pop_back();
        if (e.container) parents.pop_back();
        styles.pop_back();
        break;
      }
      case Inline::point:
      case Inline::space_point:
        for (const auto& node_style : p.points.at(size_t(i.id)).nodes) {
          pugi::xml_node into = node_style.second >= 0 ? writer.run(parent, node_style.second, p) : parent;
          into.append_move(node_style.first);
          moved.insert(node_style.first.internal_object());
        }
        break;
    }
  }
  for (pugi::xml_node l : p.last) p.node.append_move(l);
  for (pugi::xml_node o : old) {
    if (!moved.count(o.internal_object()) && o.parent() == p.node) p.node.remove_child(o);
  }
}

void translate_parts(std::vector<Entry>& entries, const std::vector<std::string>& parts, const std::string& name,
                     const std::function<std::vector<XmlParagraph>(pugi::xml_node root)>& read,
                     const std::function<XmlWriter(pugi::xml_node root)>& writer_for, const Translate& translate,
                     const Progress& progress) {
  struct Part {
    Entry* entry;
    pugi::xml_document doc;
    std::vector<XmlParagraph> paragraphs;
  };
  std::vector<std::unique_ptr<Part>> read_parts;
  std::vector<Inlines> all;
  for (Entry& e : entries) {
    if (std::find(parts.begin(), parts.end(), e.name) == parts.end()) continue;
    auto part = std::make_unique<Part>();
    part->entry = &e;
    parse_xml(part->doc, e.bytes, name + ": " + e.name);
    part->paragraphs = read(part->doc.document_element());
    for (const XmlParagraph& p : part->paragraphs) all.push_back(p.inlines);
    read_parts.push_back(std::move(part));
  }
  const std::vector<Inlines> translated = translate_paragraphs(all, name, translate, progress);
  size_t k = 0;
  for (auto& part : read_parts) {
    const XmlWriter writer = writer_for(part->doc.document_element());
    for (XmlParagraph& p : part->paragraphs) {
      if (has_words(p.inlines)) rewrite(p, translated[k], writer);
      ++k;
    }
    part->entry->bytes = write_xml(part->doc);
  }
}

}  // namespace mtx::doc
