#include "mtx/text/segment.h"

#include <unicode/brkiter.h>
#include <unicode/uchar.h>
#include <unicode/udata.h>
#include <unicode/ures.h>
#include <unicode/utext.h>
#include <unicode/utf8.h>

#include <mutex>

#include "mtx/text/languages.h"
#include "mtx/util/errors.h"

namespace mtx::text {

bool is_space(std::string_view text, size_t at, size_t* length) {
  int32_t i = int32_t(at);
  UChar32 c = 0;
  U8_NEXT(reinterpret_cast<const uint8_t*>(text.data()), i, int32_t(text.size()), c);
  if (length) *length = size_t(i) - at;
  return c >= 0 && u_isUWhiteSpace(c);
}

namespace {

// The code point that ends just before byte `at` (-1 at the start).
UChar32 before(std::string_view text, size_t at) {
  if (at == 0) return -1;
  int32_t i = int32_t(at);
  UChar32 c = 0;
  U8_PREV(reinterpret_cast<const uint8_t*>(text.data()), 0, i, c);
  return c;
}

UChar32 at_char(std::string_view text, size_t at) {
  if (at >= text.size()) return -1;
  int32_t i = int32_t(at);
  UChar32 c = 0;
  U8_NEXT(reinterpret_cast<const uint8_t*>(text.data()), i, int32_t(text.size()), c);
  return c;
}

// [begin, end) without the whitespace at either end.
Range trimmed(std::string_view text, size_t begin, size_t end) {
  size_t n = 0;
  while (begin < end && is_space(text, begin, &n)) begin += n;
  while (end > begin) {
    size_t back = end - 1;
    while (back > begin && (uint8_t(text[back]) & 0xC0) == 0x80) --back;
    if (!is_space(text, back)) break;
    end = back;
  }
  return {begin, end};
}

// Abbreviations after which a sentence does not end, beyond CLDR's (measured on tests/text_test.cpp's cases):
// titles and common abbreviations, and German day-of-month ordinals ("am 3. Mai").
std::vector<const char*> extra_abbreviations(const std::string& language) {
  if (language == "en") {
    return {"Dr.",  "Prof.", "St.", "Mt.",   "Jr.",  "Sr.",  "vs.",  "etc.",  "approx.", "No.",  "Fig.",
            "Inc.", "Ltd.",  "Co.", "Corp.", "Jan.", "Feb.", "Aug.", "Sept.", "Oct.",    "Nov.", "Dec."};
  }
  if (language == "de") {
    std::vector<const char*> a = {"z. B.", "d. h.", "u. a.", "o. ä.", "u. U.", "v. a.", "s. o.", "s. u.", "ca.", "bzw.",
                                  "usw.",  "Nr.",   "Dr.",   "Prof.", "Str.",  "vgl.",  "ggf.",  "evtl.", "S.",  "Abs.",
                                  "Jh.",   "Mio.",  "Mrd.",  "inkl.", "zzgl.", "sog.",  "bspw.", "Hr.",   "Fr."};
    static const char* const days[] = {"1.",  "2.",  "3.",  "4.",  "5.",  "6.",  "7.",  "8.",  "9.",  "10.", "11.",
                                       "12.", "13.", "14.", "15.", "16.", "17.", "18.", "19.", "20.", "21.", "22.",
                                       "23.", "24.", "25.", "26.", "27.", "28.", "29.", "30.", "31."};
    a.insert(a.end(), std::begin(days), std::end(days));
    return a;
  }
  return {};
}

// CLDR's sentence-break exceptions of a language (ICU's data: brkitr/<language>, exceptions/SentenceBreak).
std::vector<std::string> cldr_abbreviations(const std::string& language) {
  std::vector<std::string> out;
  if (language.empty()) return out;
  UErrorCode status = U_ZERO_ERROR;
  UResourceBundle* root = ures_open(U_ICUDATA_NAME U_TREE_SEPARATOR_STRING "brkitr", language.c_str(), &status);
  UResourceBundle* exceptions = ures_getByKey(root, "exceptions", nullptr, &status);
  UResourceBundle* list = ures_getByKey(exceptions, "SentenceBreak", nullptr, &status);
  while (U_SUCCESS(status) && ures_hasNext(list)) {
    int32_t length = 0;
    const UChar* s = ures_getNextString(list, &length, nullptr, &status);
    if (U_FAILURE(status)) break;
    std::string word;
    icu::UnicodeString(s, length).toUTF8String(word);
    out.push_back(word);
  }
  ures_close(list);
  ures_close(exceptions);
  ures_close(root);
  return out;
}

}  // namespace

struct Segmenter::Impl {
  std::string locale;
  std::vector<std::string> abbreviations;  // a sentence does not end after one of these words
  bool ordinals = false;                   // nor after a day of the month ("am 3. Mai")
  // Whether the text before `end` (trailing whitespace left out) ends in an abbreviation, as whole words.
  bool abbreviation_before(std::string_view text, size_t end) const {
    while (end > 0 && (text[end - 1] == ' ' || text[end - 1] == '\t')) --end;
    const std::string_view head = text.substr(0, end);
    const auto whole = [&](size_t n) {
      if (n > head.size()) return false;
      const size_t at = head.size() - n;
      return at == 0 || is_space(text, at - 1) || text[at - 1] == '(' || text[at - 1] == '"';
    };
    for (const std::string& a : abbreviations) {
      if (head.size() >= a.size() && head.compare(head.size() - a.size(), a.size(), a) == 0 && whole(a.size()))
        return true;
    }
    if (ordinals && !head.empty() && head.back() == '.') {
      size_t digits = 0;
      while (digits < 3 && digits + 1 < head.size() &&
             std::isdigit(static_cast<unsigned char>(head[head.size() - 2 - digits])))
        ++digits;
      if (digits >= 1 && digits <= 2 && whole(digits + 1)) return true;
    }
    return false;
  }
  std::unique_ptr<icu::BreakIterator> prototype;
  std::mutex mutex;  // clone() of one prototype from several threads
};

Segmenter::Segmenter(const std::string& language) : impl_(std::make_unique<Impl>()) {
  const Language* l = language.empty() ? nullptr : find_language(language);
  std::string base = l ? (l->iso639_1.empty() ? l->iso639_3 : l->iso639_1) : "";
  // ICU's sentence rules; the locale's abbreviations (CLDR's "ss=standard" list, and mtx's own) are applied in
  // sentences() as whole words: ICU's own filter matches them as word endings ("Wasser." ends in "r.").
  impl_->locale = base.empty() ? "und" : base + "@ss=standard";
  UErrorCode status = U_ZERO_ERROR;
  const icu::Locale locale(base.empty() ? "und" : base.c_str());
  impl_->abbreviations = cldr_abbreviations(base);
  for (const char* a : extra_abbreviations(base)) impl_->abbreviations.emplace_back(a);
  impl_->ordinals = base == "de";
  impl_->prototype.reset(icu::BreakIterator::createSentenceInstance(locale, status));
  if (U_FAILURE(status) || !impl_->prototype) {
    throw ConfigError(std::string("sentence segmentation: ICU has no sentence rules for ") + impl_->locale + ": " +
                      u_errorName(status));
  }
}

Segmenter::~Segmenter() = default;
Segmenter::Segmenter(Segmenter&&) noexcept = default;
Segmenter& Segmenter::operator=(Segmenter&&) noexcept = default;

const std::string& Segmenter::locale() const { return impl_->locale; }

std::vector<Range> Segmenter::sentences(std::string_view text) const {
  std::unique_ptr<icu::BreakIterator> it;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    it.reset(impl_->prototype->clone());
  }
  UErrorCode status = U_ZERO_ERROR;
  UText* ut = utext_openUTF8(nullptr, text.data(), int64_t(text.size()), &status);
  std::vector<Range> out;
  if (U_FAILURE(status)) throw ConfigError(std::string("sentence segmentation: ") + u_errorName(status));
  it->setText(ut, status);
  if (U_SUCCESS(status)) {
    int32_t start = it->first();
    for (int32_t end = it->next(); end != icu::BreakIterator::DONE; end = it->next()) {
      // A boundary's native index is a byte offset into the UTF-8 text. After an abbreviation it is none, unless
      // a line break ends the line there.
      // Nor where the next sentence would start in lower case: ICU ends one after "!" or "?" whatever follows
      // ("„Komm her!“ rief er.").
      if (size_t(end) < text.size() && text[size_t(end) - 1] != '\n' && text[size_t(end) - 1] != '\r' &&
          (impl_->abbreviation_before(text, size_t(end)) || u_islower(at_char(text, size_t(end))))) {
        continue;
      }
      const Range r = trimmed(text, size_t(start), size_t(end));
      if (r.size() > 0) out.push_back(r);
      start = end;
    }
  }
  utext_close(ut);
  if (U_FAILURE(status)) throw ConfigError(std::string("sentence segmentation: ") + u_errorName(status));
  return out;
}

std::vector<Range> Segmenter::clauses(std::string_view text, Range sentence,
                                      const std::function<bool(std::string_view)>& fits) {
  // Cuts: a whitespace run [begin, end) inside the sentence; `clause` where a clause ends before it or a dash or
  // an opening bracket starts after it.
  struct Cut {
    size_t begin, end;
    bool clause;
  };
  std::vector<Cut> cuts;
  for (size_t i = sentence.begin, n = 0; i < sentence.end; i += n) {
    if (!is_space(text, i, &n)) continue;
    Cut c{i, i, false};
    while (c.end < sentence.end && is_space(text, c.end, &n)) c.end += n;
    const UChar32 prev = before(text, c.begin), next = at_char(text, c.end);
    c.clause = prev == ',' || prev == ';' || prev == ':' || prev == 0x060C || prev == 0x3001 || prev == 0xFF0C ||
               prev == 0xFF1B || prev == 0xFF1A || next == 0x2013 || next == 0x2014 || next == '(' || next == '-';
    if (c.begin > sentence.begin && c.end < sentence.end) cuts.push_back(c);
    n = c.end - i;
  }
  std::vector<Range> out;
  size_t at = sentence.begin;
  auto piece = [&](size_t end) { return text.substr(at, end - at); };
  while (at < sentence.end) {
    if (fits(piece(sentence.end))) {
      out.push_back({at, sentence.end});
      break;
    }
    const Cut* best = nullptr;
    for (const bool clause_only : {true, false}) {
      for (const Cut& c : cuts) {
        if (c.begin <= at || (clause_only && !c.clause)) continue;
        if (!fits(piece(c.begin))) break;
        best = &c;
      }
      if (best) break;
    }
    if (!best) {  // one word longer than the model takes: alone, for the translator to cut
      for (const Cut& c : cuts) {
        if (c.begin > at) {
          best = &c;
          break;
        }
      }
    }
    if (!best) {
      out.push_back({at, sentence.end});
      break;
    }
    out.push_back({at, best->begin});
    at = best->end;
  }
  return out;
}

}  // namespace mtx::text
