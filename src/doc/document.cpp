#include "mtx/doc/document.h"

#include <algorithm>
#include <cctype>

#include "formats.h"
#include "mtx/util/errors.h"
#include "mtx/util/utf8.h"

namespace mtx::doc {

const std::vector<FormatInfo>& formats() {
  static const std::vector<FormatInfo> table{
      {Format::txt, "txt", {".txt"}, "text/plain; charset=utf-8", false},
      {Format::html, "html", {".html", ".htm"}, "text/html; charset=utf-8", false},
      {Format::md, "md", {".md", ".markdown"}, "text/markdown; charset=utf-8", false},
      {Format::srt, "srt", {".srt"}, "application/x-subrip; charset=utf-8", false},
      {Format::vtt, "vtt", {".vtt"}, "text/vtt; charset=utf-8", false},
      {Format::docx,
       "docx",
       {".docx"},
       "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
       true},
      {Format::pptx,
       "pptx",
       {".pptx"},
       "application/vnd.openxmlformats-officedocument.presentationml.presentation",
       true},
      {Format::odt, "odt", {".odt"}, "application/vnd.oasis.opendocument.text", true},
      {Format::odp, "odp", {".odp"}, "application/vnd.oasis.opendocument.presentation", true},
  };
  return table;
}

const FormatInfo& info(Format format) {
  for (const FormatInfo& f : formats()) {
    if (f.format == format) return f;
  }
  throw Error("doc: a format missing from the table");
}

namespace {

std::string extension_list() {
  std::string out;
  for (const FormatInfo& f : formats()) {
    for (const std::string& e : f.extensions) out += (out.empty() ? "" : ", ") + e;
  }
  return out;
}

std::string without_bom(const std::string& bytes, std::string* bom) {
  if (bytes.compare(0, 3, "\xef\xbb\xbf") != 0) return bytes;
  *bom = bytes.substr(0, 3);
  return bytes.substr(3);
}

}  // namespace

Format format_of_path(const std::string& path) {
  const size_t slash = path.find_last_of("/\\");
  const size_t dot = path.find_last_of('.');
  std::string ext = dot == std::string::npos || (slash != std::string::npos && dot < slash) ? "" : path.substr(dot);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  for (const FormatInfo& f : formats()) {
    if (std::find(f.extensions.begin(), f.extensions.end(), ext) != f.extensions.end()) return f.format;
  }
  if (ext == ".pdf") {
    throw DataError(path +
                    ": PDF is not translated (its text has no paragraphs or runs to keep); convert it to .docx " +
                    "or .odt first, e.g. with LibreOffice");
  }
  throw DataError(path + ": " + (ext.empty() ? "no extension" : "extension " + ext) +
                  " names no format mtx translates (" + extension_list() + "); --format names one");
}

std::optional<Format> document_of_path(const std::string& path) {
  try {
    const Format f = format_of_path(path);
    if (f == Format::txt) return std::nullopt;
    return f;
  } catch (const DataError&) {
    std::string name = path;
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".pdf") == 0) throw;
    return std::nullopt;
  }
}

Format parse_format(const std::string& name, const std::string& field) {
  for (const FormatInfo& f : formats()) {
    if (f.name == name) return f.format;
  }
  std::string names;
  for (const FormatInfo& f : formats()) names += (names.empty() ? "" : ", ") + f.name;
  throw ConfigError(field + " must be one of " + names + ", not \"" + name + "\"");
}

std::string translate_document(const std::string& bytes, Format format, const std::string& name,
                               const Translate& translate, const Limits& limits, const Progress& progress) {
  switch (format) {
    case Format::docx:
    case Format::pptx:
      return translate_ooxml(bytes, format, name, translate, limits, progress);
    case Format::odt:
    case Format::odp:
      return translate_odf(bytes, format, name, translate, limits, progress);
    case Format::srt:
    case Format::vtt:
      return translate_subtitles(bytes, format, name, translate, progress);
    case Format::md:
      return translate_markdown(bytes, name, translate, progress);
    case Format::txt:
    case Format::html:
      break;
  }
  std::string bom;
  const std::string text = without_bom(bytes, &bom);
  const size_t invalid = utf8::find_invalid(text);
  if (invalid != utf8::kValid) {
    throw DataError(name + ": not valid UTF-8 (byte " + std::to_string(invalid + bom.size()) +
                    "); convert it to UTF-8 first");
  }
  if (text.find_first_not_of(" \t\r\n\f") == std::string::npos) return bytes;
  const std::vector<std::string> out =
      translate({text}, format == Format::html ? text::Format::html : text::Format::text);
  if (out.size() != 1) throw Error("document: " + std::to_string(out.size()) + " translations for 1 text");
  if (progress) progress(1, 1);
  return bom + out[0];
}

}  // namespace mtx::doc
