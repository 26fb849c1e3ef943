#include "mtx/decode/glossary.h"

#include <algorithm>
#include <fstream>

#include "mtx/util/errors.h"
#include "mtx/util/text.h"
#include "mtx/util/utf8.h"

namespace mtx::decode {

namespace {

bool word_char(char32_t c) { return text::is_letter(c) || text::is_number(c); }

}  // namespace

Glossary Glossary::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError("--glossary: cannot read '" + path + "'");
  std::vector<std::pair<std::string, std::string>> entries;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const std::string where = "--glossary '" + path + "' line " + std::to_string(number);
    if (!utf8::is_valid(line)) throw DataError(where + ": not valid UTF-8");
    const size_t tab = line.find('\t');
    if (tab == std::string::npos || line.find('\t', tab + 1) != std::string::npos) {
      throw DataError(where + ": expected \"source term<TAB>target term\"");
    }
    std::string source = line.substr(0, tab), target = line.substr(tab + 1);
    if (source.empty() || target.empty()) throw DataError(where + ": an empty term");
    entries.emplace_back(std::move(source), std::move(target));
  }
  if (in.bad()) throw DataError("--glossary: reading '" + path + "' failed");
  return of(std::move(entries));
}

Glossary Glossary::of(std::vector<std::pair<std::string, std::string>> entries) {
  Glossary g;
  for (auto& [source, target] : entries) g.entries_.push_back({text::to_u32(source), std::move(target)});
  return g;
}

std::vector<std::string> Glossary::constraints_for(const std::string& line) const {
  std::vector<std::string> out;
  if (entries_.empty() || line.empty()) return out;
  const std::u32string text = text::to_u32(line);
  for (const Entry& e : entries_) {
    bool found = false;
    for (size_t at = text.find(e.source); at != std::u32string::npos && !found; at = text.find(e.source, at + 1)) {
      const size_t end = at + e.source.size();
      found = (at == 0 || !word_char(text[at - 1]) || !word_char(e.source.front())) &&
              (end == text.size() || !word_char(text[end]) || !word_char(e.source.back()));
    }
    if (found && std::find(out.begin(), out.end(), e.target) == out.end()) out.push_back(e.target);
  }
  return out;
}

}  // namespace mtx::decode
