// The word tokenisation of the PyTorch seq2seq tutorials: spaCy 2's rule-based English tokenizer
// (`spacy.load("en")` / en_core_web_sm, which torchtext's Field(tokenize="spacy") called), re-implemented
// from its published rules so that the tutorials' BLEU convention can be reproduced without Python:
//
//   1. split on whitespace;
//   2. per chunk, strip prefixes and suffixes repeatedly, stopping early where the remainder is a
//      tokenizer exception ("don't", "o'clock", "Mr.", "a.m.", ...);
//   3. expand an exception, or split the remainder at its infixes (hyphens and commas between
//      letters, "..." etc.);
//   4. prefixes in order, then the middle, then suffixes innermost first.
//
// The affix rules are regular-expression alternations in spaCy; each is written here as the code-point
// test it amounts to. Python's `re` semantics are kept where they decide a token boundary: a prefix is
// the first alternative that matches at the start, a suffix is the match that starts leftmost and runs to
// the end, infixes are found left to right without overlap. Letter classes come from Unicode categories
// (spaCy lists Latin, Greek and Cyrillic ranges; they agree on all of those). Not reproduced: the URL
// matcher (a URL is split like any other text).
#include <algorithm>
#include <array>
#include <string_view>
#include <unordered_map>

#include "mtx/eval/internal.h"

namespace mtx::eval {
namespace {

using Exceptions = std::unordered_map<std::u32string, std::vector<std::u32string>>;

// LIST_PUNCT (one code point each; "……" is handled where it matters, in suffixes).
constexpr std::u32string_view kPunct =
    U"\u2026,:;!?\u00BF\u061F\u00A1()[]{}<>_#*&\u3002\uFF1F\uFF01\uFF0C\u3001\uFF1B\uFF1A\uFF5E\u00B7\u0964"
    U"\u060C\u06D4\u061B\u066A";
// LIST_QUOTES.
constexpr std::u32string_view kQuotes =
    U"'\"\u201D\u201C`\u2018\u00B4\u2019\u201A,\u201E\u00BB\u00AB\u300C\u300D\u300E\u300F\uFF08\uFF09"
    U"\u3014\u3015\u3010\u3011\u300A\u300B\u3008\u3009";
constexpr std::array<std::u32string_view, 11> kCurrency = {U"$",  U"\u00A3", U"\u20AC", U"\u00A5", U"\u0E3F", U"US$",
                                                           U"C$", U"A$",     U"\u20BD", U"\uFDFC", U"\u20B4"};
// The Latin-script part of UNITS.
constexpr std::array<std::u32string_view, 47> kUnits = {
    U"km",       U"km\u00B2", U"km\u00B3", U"m",        U"m\u00B2", U"m\u00B3",  U"dm",       U"dm\u00B2",
    U"dm\u00B3", U"cm",       U"cm\u00B2", U"cm\u00B3", U"mm",      U"mm\u00B2", U"mm\u00B3", U"ha",
    U"\u00B5m",  U"nm",       U"yd",       U"in",       U"ft",      U"kg",       U"g",        U"mg",
    U"\u00B5g",  U"t",        U"lb",       U"oz",       U"m/s",     U"km/h",     U"kmh",      U"mph",
    U"hPa",      U"Pa",       U"mbar",     U"mb",       U"MB",      U"kb",       U"KB",       U"gb",
    U"GB",       U"tb",       U"TB",       U"T",        U"G",       U"M",        U"K"};
// HYPHENS, in alternation order.
constexpr std::array<std::u32string_view, 7> kHyphens = {U"-",   U"\u2013",       U"\u2014", U"--",
                                                         U"---", U"\u2014\u2014", U"~"};

bool in(std::u32string_view set, char32_t c) { return set.find(c) != std::u32string_view::npos; }
bool digit(char32_t c) { return c >= U'0' && c <= U'9'; }
bool quote(char32_t c) { return in(kQuotes, c); }
bool starts_with(std::u32string_view s, std::u32string_view p) { return s.substr(0, p.size()) == p; }
size_t dot_run(std::u32string_view s, size_t i) {
  size_t j = i;
  while (j < s.size() && s[j] == U'.') ++j;
  return j - i;
}

// Length of the prefix at the start of s (0 = none).
size_t find_prefix(std::u32string_view s) {
  if (s.empty()) return 0;
  const char32_t c = s[0];
  if (c == U'\u00A7' || c == U'%' || c == U'=' || c == U'\u2014' || c == U'\u2013') return 1;
  if (c == U'+') return s.size() > 1 && digit(s[1]) ? 0 : 1;
  if (in(kPunct, c)) return 1;
  if (const size_t dots = dot_run(s, 0); dots >= 2) return dots;
  if (quote(c)) return 1;
  for (const auto cur : kCurrency) {
    if (starts_with(s, cur)) return cur.size();
  }
  return is_other_symbol(c) ? 1 : 0;
}

// Does some suffix alternative match exactly s[i:]?
bool suffix_at(std::u32string_view s, size_t i) {
  const std::u32string_view rest = s.substr(i);
  const char32_t before = i > 0 ? s[i - 1] : 0;
  if (rest.size() == 1) {
    const char32_t c = rest[0];
    if (in(kPunct, c) || quote(c) || is_other_symbol(c) || c == U'\u2014' || c == U'\u2013') return true;
    if (c == U'+' && digit(before)) return true;
    if (c == U'.') {
      if (i >= 2 && s[i - 2] == U'\u00B0' && in(U"FfCcKk", before)) return true;
      if (i > 0 && (digit(before) || is_lower_letter(before) || in(U"%\u00B2-+|\\", before) || in(kPunct, before) ||
                    quote(before))) {
        return true;
      }
      if (i >= 2 && is_upper_letter(before) && is_upper_letter(s[i - 2])) return true;
    }
  }
  if (rest == U"\u2026\u2026") return true;
  if (rest.size() >= 2 && dot_run(rest, 0) == rest.size()) return true;
  if (rest == U"'s" || rest == U"'S" || rest == U"\u2019s" || rest == U"\u2019S") return true;
  if (digit(before)) {
    if (std::find(kCurrency.begin(), kCurrency.end(), rest) != kCurrency.end()) return true;
    if (std::find(kUnits.begin(), kUnits.end(), rest) != kUnits.end()) return true;
  }
  return false;
}

// Length of the suffix at the end of s: the leftmost start at which an alternative runs to the end.
size_t find_suffix(std::u32string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (suffix_at(s, i)) return s.size() - i;
  }
  return 0;
}

// Length of the infix starting at s[p] (0 = none), alternatives in spaCy's order.
size_t infix_at(std::u32string_view s, size_t p) {
  const char32_t c = s[p];
  const char32_t prev = p > 0 ? s[p - 1] : 0;
  const auto next = [&](size_t k) -> char32_t { return p + k < s.size() ? s[p + k] : 0; };
  if (const size_t dots = dot_run(s, p); dots >= 2) return dots;
  if (c == U'\u2026' || is_other_symbol(c)) return 1;
  if (p > 0 && digit(prev) && in(U"+-*^", c) && (digit(next(1)) || next(1) == U'-')) return 1;
  if (p > 0 && c == U'.' && (is_lower_letter(prev) || quote(prev)) && (is_upper_letter(next(1)) || quote(next(1)))) {
    return 1;
  }
  if (p > 0 && c == U',' && is_letter(prev) && is_letter(next(1))) return 1;
  if (p > 0 && (is_letter(prev) || digit(prev))) {
    for (const auto h : kHyphens) {
      if (starts_with(s.substr(p), h) && is_letter(next(h.size()))) return h.size();
    }
    if (in(U":<>=/", c) && is_letter(next(1))) return 1;
  }
  return 0;
}

std::u32string title(std::u32string s) {
  if (!s.empty() && s[0] >= U'a' && s[0] <= U'z') s[0] = s[0] - U'a' + U'A';
  return s;
}

// TOKENIZER_EXCEPTIONS of spaCy 2's English plus the language-independent ones.
Exceptions build_exceptions() {
  Exceptions exc;
  using V = std::vector<std::u32string>;
  const auto both = [](const std::u32string& w) { return V{w, title(w)}; };

  for (const auto& o : both(U"i")) {
    exc[o + U"'m"] = {o, U"'m"};
    exc[o + U"m"] = {o, U"m"};
    exc[o + U"'ma"] = {o, U"'m", U"a"};
    exc[o + U"ma"] = {o, U"m", U"a"};
  }
  for (const auto* p : {U"i", U"you", U"he", U"she", U"it", U"we", U"they"}) {
    for (const auto& o : both(p)) {
      exc[o + U"'ll"] = {o, U"'ll"};
      exc[o + U"ll"] = {o, U"ll"};
      exc[o + U"'ll've"] = {o, U"'ll", U"'ve"};
      exc[o + U"llve"] = {o, U"ll", U"ve"};
      exc[o + U"'d"] = {o, U"'d"};
      exc[o + U"d"] = {o, U"d"};
      exc[o + U"'d've"] = {o, U"'d", U"'ve"};
      exc[o + U"dve"] = {o, U"d", U"ve"};
    }
  }
  for (const auto* p : {U"i", U"you", U"we", U"they"}) {
    for (const auto& o : both(p)) {
      exc[o + U"'ve"] = {o, U"'ve"};
      exc[o + U"ve"] = {o, U"ve"};
    }
  }
  for (const auto* p : {U"you", U"we", U"they"}) {
    for (const auto& o : both(p)) {
      exc[o + U"'re"] = {o, U"'re"};
      exc[o + U"re"] = {o, U"re"};
    }
  }
  for (const auto* p : {U"he", U"she", U"it"}) {
    for (const auto& o : both(p)) {
      exc[o + U"'s"] = {o, U"'s"};
      exc[o + U"s"] = {o, U"s"};
    }
  }
  for (const auto* w : {U"who", U"what", U"when", U"where", U"why", U"how", U"there", U"that"}) {
    for (const auto& o : both(w)) {
      for (const auto* suffix : {U"'s", U"s", U"'ll", U"ll", U"'re", U"re", U"'ve", U"ve", U"'d", U"d"}) {
        exc[o + suffix] = {o, suffix};
      }
      exc[o + U"'ll've"] = {o, U"'ll", U"'ve"};
      exc[o + U"llve"] = {o, U"ll", U"ve"};
      exc[o + U"'d've"] = {o, U"'d", U"'ve"};
      exc[o + U"dve"] = {o, U"d", U"ve"};
    }
  }
  for (const auto* v : {U"ca", U"could", U"do", U"does", U"did", U"had", U"may", U"might", U"must", U"need", U"ought",
                        U"sha", U"should", U"wo", U"would"}) {
    for (const auto& o : both(v)) {
      exc[o + U"n't"] = {o, U"n't"};
      exc[o + U"nt"] = {o, U"nt"};
      exc[o + U"n't've"] = {o, U"n't", U"'ve"};
      exc[o + U"ntve"] = {o, U"nt", U"ve"};
    }
  }
  for (const auto* v : {U"could", U"might", U"must", U"should", U"would"}) {
    for (const auto& o : both(v)) {
      exc[o + U"'ve"] = {o, U"'ve"};
      exc[o + U"ve"] = {o, U"ve"};
    }
  }
  for (const auto* v : {U"ai", U"are", U"is", U"was", U"were", U"have", U"has", U"dare"}) {
    for (const auto& o : both(v)) {
      exc[o + U"n't"] = {o, U"n't"};
      exc[o + U"nt"] = {o, U"nt"};
    }
  }
  for (const auto* w : {U"doin", U"goin", U"nothin", U"nuthin", U"ol", U"somethin"}) {
    for (const auto& o : both(w)) {
      exc[o] = {o};
      exc[o + U"'"] = {o + U"'"};
    }
  }
  for (const std::u32string w : {U"cause", U"em", U"ll", U"nuff"}) {
    exc[w] = {w};
    exc[U"'" + w] = {U"'" + w};
  }
  for (int h = 1; h <= 12; ++h) {
    std::u32string hour;
    for (const char ch : std::to_string(h)) hour.push_back(char32_t(ch));
    for (const auto* period : {U"a.m.", U"am", U"p.m.", U"pm"}) exc[hour + period] = {hour, period};
  }
  const std::pair<const char32_t*, V> other[] = {
      {U"y'all", {U"y'", U"all"}},          {U"yall", {U"y", U"all"}},     {U"how'd'y", {U"how", U"'d", U"'y"}},
      {U"How'd'y", {U"How", U"'d", U"'y"}}, {U"not've", {U"not", U"'ve"}}, {U"notve", {U"not", U"ve"}},
      {U"Not've", {U"Not", U"'ve"}},        {U"Notve", {U"Not", U"ve"}},   {U"cannot", {U"can", U"not"}},
      {U"Cannot", {U"Can", U"not"}},        {U"gonna", {U"gon", U"na"}},   {U"Gonna", {U"Gon", U"na"}},
      {U"gotta", {U"got", U"ta"}},          {U"Gotta", {U"Got", U"ta"}},   {U"let's", {U"let", U"'s"}},
      {U"Let's", {U"Let", U"'s"}},
  };
  for (const auto& [k, v] : other) exc[k] = v;
  // Single tokens: abbreviations and contractions that keep their period or apostrophe.
  for (const auto* o :
       {U"'S", U"'s", U"\u2018S", U"\u2018s", U"and/or", U"w/o", U"'re", U"'Cause", U"'cause", U"'cos", U"'Cos",
        U"'coz", U"'Coz", U"'cuz", U"'Cuz", U"'bout", U"ma'am", U"Ma'am", U"o'clock", U"O'clock", U"lovin'", U"Lovin'",
        U"lovin", U"Lovin", U"havin'", U"Havin'", U"havin", U"Havin", U"doin'", U"Doin'", U"doin", U"Doin", U"goin'",
        U"Goin'", U"goin", U"Goin", U"Mt.", U"Ak.", U"Ala.", U"Apr.", U"Ariz.", U"Ark.", U"Aug.", U"Calif.", U"Colo.",
        U"Conn.", U"Dec.", U"Del.", U"Feb.", U"Fla.", U"Ga.", U"Ia.", U"Id.", U"Ill.", U"Ind.", U"Jan.", U"Jul.",
        U"Jun.", U"Kan.", U"Kans.", U"Ky.", U"La.", U"Mar.", U"Mass.", U"May.", U"Mich.", U"Minn.", U"Miss.", U"N.C.",
        U"N.D.", U"N.H.", U"N.J.", U"N.M.", U"N.Y.", U"Neb.", U"Nebr.", U"Nev.", U"Nov.", U"Oct.", U"Okla.", U"Ore.",
        U"Pa.", U"S.C.", U"Sep.", U"Sept.", U"Tenn.", U"Va.", U"Wash.", U"Wis.", U"'d", U"a.m.", U"Adm.", U"Bros.",
        U"co.", U"Co.", U"Corp.", U"D.C.", U"Dr.", U"e.g.", U"E.g.", U"E.G.", U"Gen.", U"Gov.", U"i.e.", U"I.e.",
        U"I.E.", U"Inc.", U"Jr.", U"Ltd.", U"Md.", U"Messrs.", U"Mo.", U"Mont.", U"Mr.", U"Mrs.", U"Ms.", U"p.m.",
        U"Ph.D.", U"Rep.", U"Rev.", U"Sen.", U"St.", U"vs.",
        // language-independent
        U"\u2014", U"'", U"\\\")", U"<space>", U"''", U"C++", U"\u00E4.", U"\u00F6.", U"\u00FC.",
        // emoticons
        U":)", U":-)", U":))", U":-))", U":)))", U":-)))", U"(:", U"(-:", U"=)", U"(=", U"\")", U":]", U":-]", U"[:",
        U"[-:", U":o)", U"(o:", U":}", U":-}", U"8)", U"8-)", U"(-8", U";)", U";-)", U"(;", U"(-;", U":(", U":-(",
        U":((", U":-((", U":(((", U":-(((", U"):", U")-:", U"=(", U">:(", U":')", U":'-)", U":'(", U":'-(", U":/",
        U":-/", U"=/", U"=|", U":|", U":-|", U":1", U":P", U":-P", U":p", U":-p", U":O", U":-O", U":o", U":-o", U":0",
        U":-0", U":()", U">:o", U":*", U":-*", U":3", U":-3", U"=3", U":>", U":->", U":X", U":-X", U":x", U":-x", U":D",
        U":-D", U";D", U";-D", U"=D", U"xD", U"XD", U"xDD", U"XDD", U"8D", U"8-D", U"^_^", U"^__^", U"^___^", U">.<",
        U">.>", U"<.<", U"._.", U";_;", U"-_-", U"-__-", U"v.v", U"V.V", U"v_v", U"V_V", U"o_o", U"o_O", U"O_o", U"O_O",
        U"0_o", U"o_0", U"0_0", U"o.O", U"O.o", U"O.O", U"o.o", U"0.0", U"o.0", U"0.o", U"@_@", U"<3", U"<33", U"<333",
        U"</3", U"(^_^)", U"(-_-)", U"(._.)", U"(>_<)", U"(*_*)"}) {
    exc[o] = {o};
  }
  for (char32_t c = U'a'; c <= U'z'; ++c) exc[std::u32string{c, U'.'}] = {std::u32string{c, U'.'}};
  for (const auto* o : {U"Ill", U"ill", U"Its", U"its", U"Hell", U"hell", U"Shell", U"shell", U"Shed", U"shed", U"were",
                        U"Were", U"Well", U"well", U"Whore", U"whore"}) {
    exc.erase(o);
  }
  return exc;
}

const Exceptions& exceptions() {
  static const Exceptions exc = build_exceptions();
  return exc;
}

const std::vector<std::u32string>* special(std::u32string_view s) {
  const auto& exc = exceptions();
  const auto it = exc.find(std::u32string(s));
  return it == exc.end() ? nullptr : &it->second;
}

void tokenize_chunk(std::u32string_view s, std::vector<std::u32string>& out) {
  std::vector<std::u32string_view> prefixes, suffixes;
  size_t last_size = 0;
  while (!s.empty() && s.size() != last_size) {
    if (special(s)) break;
    last_size = s.size();
    const size_t pre = find_prefix(s);
    if (pre && pre < s.size() && special(s.substr(pre))) {
      prefixes.push_back(s.substr(0, pre));
      s = s.substr(pre);
      break;
    }
    const size_t suf = find_suffix(s.substr(pre));
    if (suf && suf < s.size() && special(s.substr(0, s.size() - suf))) {
      suffixes.push_back(s.substr(s.size() - suf));
      s = s.substr(0, s.size() - suf);
      break;
    }
    if (pre && suf && pre + suf <= s.size()) {
      prefixes.push_back(s.substr(0, pre));
      suffixes.push_back(s.substr(s.size() - suf));
      s = s.substr(pre, s.size() - pre - suf);
    } else if (pre) {
      prefixes.push_back(s.substr(0, pre));
      s = s.substr(pre);
    } else if (suf) {
      suffixes.push_back(s.substr(s.size() - suf));
      s = s.substr(0, s.size() - suf);
    }
    if (!s.empty() && special(s)) break;
  }
  for (const auto p : prefixes) out.emplace_back(p);
  if (!s.empty()) {
    if (const auto* sp = special(s)) {
      out.insert(out.end(), sp->begin(), sp->end());
    } else {
      size_t start = 0;
      for (size_t p = 0; p < s.size();) {
        const size_t len = infix_at(s, p);
        if (!len) {
          ++p;
          continue;
        }
        if (p != 0) {  // an infix at the very start is not split off
          if (p != start) out.emplace_back(s.substr(start, p - start));
          out.emplace_back(s.substr(p, len));
          start = p + len;
        }
        p += len;
      }
      if (start < s.size()) out.emplace_back(s.substr(start));
    }
  }
  for (auto it = suffixes.rbegin(); it != suffixes.rend(); ++it) out.emplace_back(*it);
}

}  // namespace

std::vector<std::u32string> spacy_en_tokens(std::u32string_view line) {
  std::vector<std::u32string> out;
  for (const auto& chunk : split(line)) tokenize_chunk(chunk, out);
  return out;
}

}  // namespace mtx::eval
