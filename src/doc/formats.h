// Each format's translation (private to src/doc/; document.cpp picks one by Format).
#pragma once

#include <string>

#include "mtx/doc/document.h"

namespace mtx::doc {

std::string translate_ooxml(const std::string& bytes, Format format, const std::string& name,
                            const Translate& translate, const Limits& limits, const Progress& progress);
std::string translate_odf(const std::string& bytes, Format format, const std::string& name, const Translate& translate,
                          const Limits& limits, const Progress& progress);
std::string translate_markdown(const std::string& bytes, const std::string& name, const Translate& translate,
                               const Progress& progress);
std::string translate_subtitles(const std::string& bytes, Format format, const std::string& name,
                                const Translate& translate, const Progress& progress);

}  // namespace mtx::doc
