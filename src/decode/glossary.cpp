#include "mtx/decode/glossary.h"

#include <libstemmer.h>
#include <utf8proc.h>

#include <algorithm>
#include <fstream>
#include <mutex>

#include "mtx/util/errors.h"
#include "mtx/util/text.h"
#include "mtx/util/utf8.h"

namespace mtx::decode {

namespace {

bool word_char(char32_t c) { return text::is_letter(c) || text::is_number(c); }

char32_t folded(char32_t c) {
  const std::u32string l = text::lower(std::u32string(1, c));
  return l.size() == 1 ? l[0] : c;
}

std::u32string folded(std::u32string s) {
  for (char32_t& c : s) c = folded(c);
  return s;
}

// `term` with its first character in upper case (simple case mapping): a term that starts the sentence.
std::string capitalized(const std::string& term) {
  std::u32string t = text::to_u32(term);
  if (!t.empty()) t[0] = char32_t(utf8proc_toupper(utf8proc_int32_t(t[0])));
  return text::to_utf8(t);
}

// The words of `text` (runs of letters and digits) as [begin, end) character ranges.
std::vector<std::pair<size_t, size_t>> word_ranges(const std::u32string& text) {
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t i = 0; i < text.size();) {
    if (!word_char(text[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && word_char(text[j])) ++j;
    out.emplace_back(i, j);
    i = j;
  }
  return out;
}

// A glossary side's forms: "Hund|Hunde" -> Hund, Hunde.
std::vector<std::string> forms_of(const std::string& side) {
  std::vector<std::string> out;
  for (size_t at = 0;;) {
    const size_t bar = side.find('|', at);
    out.push_back(side.substr(at, bar == std::string::npos ? std::string::npos : bar - at));
    if (bar == std::string::npos) return out;
    at = bar + 1;
  }
}

}  // namespace

// One Snowball stemmer, shared by a glossary's copies: Snowball's are not safe to use from two threads at once.
class Glossary::Stemmer {
 public:
  explicit Stemmer(const std::string& name) : stemmer_(sb_stemmer_new(name.c_str(), "UTF_8")) {
    if (stemmer_) return;
    std::string names;
    for (const char** n = sb_stemmer_list(); *n; ++n) names += std::string(names.empty() ? "" : ", ") + *n;
    throw ConfigError("glossary stemmer '" + name + "': Snowball has no such stemmer; it has " + names);
  }
  ~Stemmer() { sb_stemmer_delete(stemmer_); }
  Stemmer(const Stemmer&) = delete;
  Stemmer& operator=(const Stemmer&) = delete;
  // The stem of a lower-cased word.
  std::string stem(const std::u32string& word) {
    const std::string w = text::to_utf8(word);
    std::lock_guard<std::mutex> lock(mutex_);
    const sb_symbol* s = sb_stemmer_stem(stemmer_, reinterpret_cast<const sb_symbol*>(w.data()), int(w.size()));
    if (!s) throw std::bad_alloc();
    return std::string(reinterpret_cast<const char*>(s), size_t(sb_stemmer_length(stemmer_)));
  }

 private:
  sb_stemmer* stemmer_;
  std::mutex mutex_;
};

Glossary Glossary::load(const std::string& path, const Matching& matching) {
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
    for (const std::string& side : {source, target}) {
      for (const std::string& form : forms_of(side)) {
        if (form.empty()) throw DataError(where + ": an empty term");
      }
    }
    entries.emplace_back(std::move(source), std::move(target));
  }
  if (in.bad()) throw DataError("--glossary: reading '" + path + "' failed");
  return of(std::move(entries), matching);
}

Glossary Glossary::of(std::vector<std::pair<std::string, std::string>> entries, const Matching& matching) {
  Glossary g;
  g.matching_ = matching;
  if (!matching.stem.empty()) g.stemmer_ = std::make_shared<Stemmer>(matching.stem);
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& [source, target] = entries[i];
    const std::string where = "glossary entry " + std::to_string(i + 1) + " (\"" + source + "\")";
    for (const std::string& side : {source, target}) {
      if (!utf8::is_valid(side)) throw ConfigError(where + ": not valid UTF-8");
      if (side.find_first_of("\t\r\n") != std::string::npos)
        throw ConfigError(where + ": a tab or line break in a term");
      for (const std::string& form : forms_of(side)) {
        if (form.empty()) throw ConfigError(where + ": an empty term");
      }
    }
    Entry e;
    e.forms = forms_of(source);
    for (const std::string& f : e.forms) {
      e.sources.push_back(matching.ignore_case ? folded(text::to_u32(f)) : text::to_u32(f));
      if (!g.stemmer_) continue;
      const std::u32string form = folded(text::to_u32(f));
      std::vector<std::string> stems;
      for (const auto& [b, end] : word_ranges(form)) stems.push_back(g.stemmer_->stem(form.substr(b, end - b)));
      e.stems.push_back(std::move(stems));
    }
    e.targets = forms_of(target);
    g.entries_.push_back(std::move(e));
  }
  return g;
}

void Glossary::find_stemmed(const Entry& e, const std::u32string& text, std::vector<Found>& found) const {
  const std::vector<std::pair<size_t, size_t>> words = word_ranges(text);
  std::vector<std::string> stems;
  for (const auto& [b, x] : words) stems.push_back(stemmer_->stem(folded(text.substr(b, x - b))));
  for (size_t i = 0; i < stems.size(); ++i) {
    for (size_t f = 0; f < e.stems.size(); ++f) {
      const auto& want = e.stems[f];
      if (want.empty() || i + want.size() > stems.size() ||
          !std::equal(want.begin(), want.end(), stems.begin() + std::ptrdiff_t(i))) {
        continue;
      }
      const size_t begin = words[i].first, end = words[i + want.size() - 1].second;
      const bool taken = std::any_of(found.begin(), found.end(), [&](const Found& x) {
        return x.begin < end && begin < x.end;  // an exact match of this entry already holds these words
      });
      if (!taken) found.push_back({begin, end, e.sources.size()});  // no form of its own: the first target form
      i += want.size() - 1;
      break;
    }
  }
}

std::vector<Glossary::Term> Glossary::terms_for(const std::string& line) const {
  std::vector<Term> out;
  if (entries_.empty() || line.empty()) return out;
  const std::u32string original = text::to_u32(line);
  const std::u32string text = matching_.ignore_case ? folded(original) : original;
  std::vector<size_t> byte_of(text.size() + 1, line.size());  // each character's first byte
  for (size_t b = 0, c = 0; b < line.size() && c < text.size(); ++c) {
    byte_of[c] = b;
    const auto lead = static_cast<unsigned char>(line[b]);
    b += lead < 0x80 ? 1 : (lead >> 5) == 6 ? 2 : (lead >> 4) == 14 ? 3 : 4;
  }
  std::vector<Found> found;
  for (const Entry& e : entries_) {
    found.clear();
    for (size_t f = 0; f < e.sources.size(); ++f) {
      const std::u32string& source = e.sources[f];
      for (size_t at = text.find(source); at != std::u32string::npos; at = text.find(source, at + 1)) {
        const size_t end = at + source.size();
        if ((at == 0 || !word_char(text[at - 1]) || !word_char(source.front())) &&
            (end == text.size() || !word_char(text[end]) || !word_char(source.back())) &&
            std::none_of(found.begin(), found.end(), [&](const Found& x) { return x.begin < end && at < x.end; })) {
          found.push_back({at, end, f});
        }
      }
    }
    if (stemmer_) find_stemmed(e, original, found);
    std::sort(found.begin(), found.end(), [](const Found& x, const Found& y) { return x.begin < y.begin; });
    for (const Found& x : found) {
      const std::string& target = e.targets[x.form < e.targets.size() ? x.form : 0];
      const bool first_word = std::none_of(text.begin(), text.begin() + std::ptrdiff_t(x.begin), word_char);
      Term term{first_word ? capitalized(target) : target, byte_of[x.begin], byte_of[x.end], {}};
      for (size_t f = 0; f < e.targets.size() && f < e.forms.size(); ++f) {  // each other target once
        const std::string& other = e.targets[f];
        if (other == target || std::find(e.targets.begin(), e.targets.begin() + std::ptrdiff_t(f), other) !=
                                   e.targets.begin() + std::ptrdiff_t(f)) {
          continue;
        }
        term.forms.push_back({e.forms[f], first_word ? capitalized(other) : other});
      }
      out.push_back(std::move(term));
    }
  }
  return out;
}

std::vector<std::string> Glossary::constraints_for(const std::string& line) const {
  std::vector<std::string> out;
  for (Term& t : terms_for(line)) {
    if (std::find(out.begin(), out.end(), t.target) == out.end()) out.push_back(std::move(t.target));
  }
  return out;
}

}  // namespace mtx::decode
