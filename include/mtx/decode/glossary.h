// A translator's glossary (mtx translate --glossary FILE): source term -> target term, one entry a line
// ("source<TAB>target"; empty lines and lines starting with '#' are skipped). A side may list forms separated by
// '|' ("Hund|Hunde<TAB>puppy|puppies"): any source form matches, and the target form at the matched form's place
// is the term (the first one where the target lists fewer); the entry's other forms may stand for it where the model
// writes its own word for their source form (Term::forms). Each entry whose source term occurs in a line becomes
// a constraint of its translation tied to the source words it matched (decode/search.h, SearchSentence::spans):
// the term takes the place of the model's own translation of those words.
// Matching is case-sensitive and exact by default; Matching makes it case-insensitive, or by Snowball stems
// (Debian's libstemmer: "Hund" matches Hunde, Hundes, hund), word by word.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mtx::decode {

// How a glossary's source terms match a line.
struct GlossaryMatching {
  bool ignore_case = false;  // source terms match in any case
  // A Snowball stemmer's name or language code ("german", "de"; sb_stemmer_list()): the words of a source term
  // match words with the same stems, in any case. Empty: no stemming.
  std::string stem;
};

class Glossary {
 public:
  using Matching = GlossaryMatching;
  // Throws DataError naming the file (unreadable) and line (no tab, an empty term or form, invalid UTF-8), and
  // ConfigError for a stemmer Snowball does not have.
  static Glossary load(const std::string& path, const Matching& matching = {});
  // Entries as (source, target) pairs, in file order, forms separated by '|'. Throws ConfigError naming the entry
  // for an empty term or form, invalid UTF-8, or a tab or line break in a term.
  static Glossary of(std::vector<std::pair<std::string, std::string>> entries, const Matching& matching = {});

  // An entry found in a line: its target term and the bytes [begin, end) of the source form it matched; and the
  // entry's other forms, (source form, target form) for each other target form once: a form of the source is often
  // another's too ("Jungen": the plural, and the singular's accusative), and where the model's own word for the
  // matched words is that of another source form ("boy" for Junge), that form's target may stand for the term.
  struct Term {
    std::string target;
    size_t begin = 0, end = 0;
    std::vector<std::pair<std::string, std::string>> forms = {};
  };
  // Every occurrence in `line` of an entry's source term as whole words (the characters on either side, if any,
  // are neither letters nor digits; as Matching says): entries in file order, each one's occurrences in line order.
  // A term for the line's first word starts with a capital, as the translation's first word does.
  std::vector<Term> terms_for(const std::string& line) const;
  // terms_for's targets, each once.
  std::vector<std::string> constraints_for(const std::string& line) const;
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::vector<std::string> forms;               // the source forms as written
    std::vector<std::u32string> sources;          // the same, folded where matching ignores case
    std::vector<std::vector<std::string>> stems;  // per source form, its words' stems (stemming only)
    std::vector<std::string> targets;
  };
  class Stemmer;
  std::vector<Entry> entries_;
  Matching matching_;
  std::shared_ptr<Stemmer> stemmer_;  // null: no stemming
  struct Found {
    size_t begin, end;  // characters
    size_t form;        // the source form matched (sources.size(): by stem)
  };
  // Stemming: the entry's occurrences as sequences of stemmed words that no exact match in `found` holds.
  void find_stemmed(const Entry& e, const std::u32string& text, std::vector<Found>& found) const;
};

}  // namespace mtx::decode
