#include "xml.h"

#include <cstring>
#include <sstream>

#include "mtx/util/errors.h"

namespace mtx::doc {

void parse_xml(pugi::xml_document& doc, const std::string& bytes, const std::string& where) {
  const unsigned options = pugi::parse_default | pugi::parse_declaration | pugi::parse_doctype | pugi::parse_ws_pcdata;
  const pugi::xml_parse_result r = doc.load_buffer(bytes.data(), bytes.size(), options, pugi::encoding_utf8);
  if (!r) {
    throw DataError(where + ": damaged XML at byte " + std::to_string(r.offset) + " (" + r.description() + ")");
  }
  for (const pugi::xml_node n : doc.children()) {
    if (n.type() == pugi::node_doctype) {
      throw DataError(where + ": declares a DTD (<!DOCTYPE>); documents with entity declarations are refused");
    }
  }
}

std::string write_xml(const pugi::xml_document& doc) {
  std::ostringstream out;
  doc.save(out, "", pugi::format_raw | pugi::format_no_declaration, pugi::encoding_utf8);
  return out.str();
}

std::string prefix_of(const pugi::xml_node& root, const char* uri, const std::string& fallback) {
  for (const pugi::xml_attribute a : root.attributes()) {
    if (std::strcmp(a.value(), uri) != 0) continue;
    const std::string name = a.name();
    if (name == "xmlns") return "";
    if (name.rfind("xmlns:", 0) == 0) return name.substr(6) + ":";
  }
  return fallback;
}

}  // namespace mtx::doc
