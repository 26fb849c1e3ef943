// A translator's glossary (mtx translate --glossary FILE): source term -> target term, one entry a line
// ("source<TAB>target"; empty lines and lines starting with '#' are skipped). Each entry whose source term occurs
// in a line becomes a constraint of its translation (decode/search.h, SearchSentence).
#pragma once

#include <string>
#include <vector>

namespace mtx::decode {

class Glossary {
 public:
  // Throws DataError naming the file (unreadable) and line (no tab, an empty term, invalid UTF-8).
  static Glossary load(const std::string& path);
  // Entries as (source, target) pairs, in file order.
  static Glossary of(std::vector<std::pair<std::string, std::string>> entries);

  // The target terms of the entries whose source term occurs in `line` as whole words (case-sensitive; the
  // characters on either side, if any, are neither letters nor digits), in file order, each once.
  std::vector<std::string> constraints_for(const std::string& line) const;
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::u32string source;
    std::string target;
  };
  std::vector<Entry> entries_;
};

}  // namespace mtx::decode
