// Documents: a file translated with its formatting. Each format's reader turns the file into paragraphs of text
// with their inline formatting (a Word run's properties, an ODF span, a link, a subtitle's <i>); the paragraphs go
// through the text layer as HTML fragments (text/layout.h), which places every inline element on the target words
// aligned to the words it wrapped; the writer puts the translated paragraphs back into the same file. What is not
// text -- styles, images, fields, equations, bookmarks, timings -- is copied unchanged.
//
// Office files (.docx, .pptx, .odt, .odp) are zip archives of XML. An archive is read within Limits (entry count,
// inflated sizes and ratio: zip bombs), and refused when an entry name is absolute or has a ".." component, when
// an entry is encrypted or damaged, or when an XML part declares a DTD (no entity is ever expanded). Every refusal
// is a DataError whose message names the file and the part.
//
// No LibTorch here: the translation is a function the caller passes (decode/text.h's translate_texts, or the
// server's batcher).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "mtx/text/layout.h"

namespace mtx::doc {

enum class Format { txt, html, md, srt, vtt, docx, pptx, odt, odp };

// The one table of formats: what the CLI's --format, Python's format= and the server's /translate_file and
// /frontend/settings take and list.
struct FormatInfo {
  Format format;
  std::string name;                     // "docx"
  std::vector<std::string> extensions;  // ".docx" (lower case, with the dot)
  std::string media_type;               // the download's Content-Type
  bool archive = false;                 // a zip archive of XML parts
};
const std::vector<FormatInfo>& formats();
const FormatInfo& info(Format format);

// The format a file name's extension says (any case); a DataError naming `path` and the supported extensions
// otherwise (PDF's says that PDF is not translated).
Format format_of_path(const std::string& path);
// For front ends that read lines unless told otherwise (mtx translate --input, Python's translate_file): the
// document format `path`'s extension names, or none for .txt and for names without a document's extension; PDF's
// DataError says that it is not translated.
std::optional<Format> document_of_path(const std::string& path);
// "docx", ...; a ConfigError naming `field` and the formats otherwise.
Format parse_format(const std::string& name, const std::string& field);

// What an archive may inflate to. A ratio is checked once the archive's entries pass 1 MiB in all.
struct Limits {
  size_t max_entries = 10000;
  uint64_t max_entry_bytes = uint64_t(256) << 20;     // one entry, inflated
  uint64_t max_inflated_bytes = uint64_t(512) << 20;  // all entries, inflated
  uint64_t max_ratio = 200;                           // inflated bytes per archive byte
};

// Translates texts: one translation per text, in order. `format` says whether the texts are plain text or HTML
// fragments (as text/layout.h takes them).
using Translate = std::function<std::vector<std::string>(const std::vector<std::string>& texts, text::Format format)>;
// Called after each batch of paragraphs: how many of how many are done.
using Progress = std::function<void(size_t done, size_t total)>;

// `bytes` (the whole file, `name` in errors) as `format`, translated: the file's bytes in the same format.
std::string translate_document(const std::string& bytes, Format format, const std::string& name,
                               const Translate& translate, const Limits& limits = {}, const Progress& progress = {});

}  // namespace mtx::doc
