// XML paragraphs (private to src/doc/): what an office format's reader finds in a paragraph element, and the one
// writer that rebuilds the paragraph from its translation.
#pragma once

#include <pugixml.hpp>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "archive.h"
#include "inlines.h"

namespace mtx::doc {

struct XmlParagraph {
  pugi::xml_node node;
  Inlines inlines;
  // Per element id: a run's properties (OOXML: index into `styles`) or a container copied without its children
  // (a link, an ODF span), or both absent for a span the reader made.
  struct Element {
    int style = -1;
    pugi::xml_node container;
  };
  std::vector<Element> elements;
  // Per point id: nodes moved as they are (style -1) or each into a new run with a style's properties.
  struct Point {
    std::vector<std::pair<pugi::xml_node, int>> nodes;
  };
  std::vector<Point> points;
  std::vector<pugi::xml_node> styles;       // OOXML: run properties (an empty node: a run without)
  int base_style = -1;                      // the style of text outside every element
  std::vector<pugi::xml_node> first, last;  // children kept in place at the start (pPr) and moved to the end
};

// What a format writes: text of a style into a parent; a run of a style (for a point's node) into a parent.
struct XmlWriter {
  std::function<void(pugi::xml_node parent, int style, const std::string& text, const XmlParagraph& p)> text;
  std::function<pugi::xml_node(pugi::xml_node parent, int style, const XmlParagraph& p)> run;
};

// Rebuilds `p`'s children from `translated` (its inlines, translated): `first` stay, text and elements are
// written anew, points moved, `last` moved after them, everything else removed.
void rewrite(XmlParagraph& p, const Inlines& translated, const XmlWriter& writer);

// The entries of `entries` named in `parts`, in archive order: each parsed (its errors naming `name` and the part),
// its paragraphs read by `read` from its root, all of them translated together, each with words rewritten by the
// writer `writer_for` gives for its root, and the part written back into its entry.
void translate_parts(std::vector<Entry>& entries, const std::vector<std::string>& parts, const std::string& name,
                     const std::function<std::vector<XmlParagraph>(pugi::xml_node root)>& read,
                     const std::function<XmlWriter(pugi::xml_node root)>& writer_for, const Translate& translate,
                     const Progress& progress);

}  // namespace mtx::doc
