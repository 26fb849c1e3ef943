// XML parts of office documents through pugixml (private to src/doc/): parsed with their declaration and every
// whitespace text node, refused when they declare a DTD (so no entity, internal or external, is ever expanded),
// and written back raw.
#pragma once

#include <pugixml.hpp>

#include <string>

namespace mtx::doc {

// `bytes` parsed into `doc`; DataError naming `where` (the file and the part) when it is not well-formed XML or
// declares a DTD.
void parse_xml(pugi::xml_document& doc, const std::string& bytes, const std::string& where);
// The document as bytes: its own declaration, no indentation added.
std::string write_xml(const pugi::xml_document& doc);

// The prefix ("w:", "" for the default namespace) `root` gives the namespace `uri`; `fallback` when it gives none.
std::string prefix_of(const pugi::xml_node& root, const char* uri, const std::string& fallback);

}  // namespace mtx::doc
