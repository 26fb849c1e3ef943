#include "mtx/util/text.h"

#include <utf8proc.h>

namespace mtx::text {

std::u32string to_u32(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  utf8proc_ssize_t left = utf8proc_ssize_t(s.size());
  while (left > 0) {
    utf8proc_int32_t c;
    const utf8proc_ssize_t n = utf8proc_iterate(p, left, &c);
    if (n <= 0) {
      out.push_back(0xFFFD);
      ++p;
      --left;
      continue;
    }
    out.push_back(char32_t(c));
    p += n;
    left -= n;
  }
  return out;
}

std::string to_utf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  utf8proc_uint8_t buf[4];
  for (const char32_t c : text) {
    const utf8proc_ssize_t n = utf8proc_encode_char(utf8proc_int32_t(c), buf);
    out.append(reinterpret_cast<const char*>(buf), size_t(n));
  }
  return out;
}

bool is_space(char32_t c) {
  // Python: characters with bidirectional type WS, B or S, or category Zs.
  switch (c) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x1C:
    case 0x1D:
    case 0x1E:
    case 0x1F:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

namespace {

// Unicode's Cased property: letters Lu/Ll/Lt and the Other_Lowercase / Other_Uppercase code points.
bool is_cased(char32_t c) {
  const auto cat = utf8proc_category(utf8proc_int32_t(c));
  if (cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT) return true;
  return c == 0xAA || c == 0xBA || (c >= 0x2B0 && c <= 0x2B8) || c == 0x2C0 || c == 0x2C1 ||
         (c >= 0x2E0 && c <= 0x2E4) || c == 0x345 || c == 0x37A || (c >= 0x1D2C && c <= 0x1D6A) || c == 0x1D78 ||
         (c >= 0x1D9B && c <= 0x1DBF) || c == 0x2071 || c == 0x207F || (c >= 0x2090 && c <= 0x209C) ||
         (c >= 0x2160 && c <= 0x217F) || (c >= 0x24B6 && c <= 0x24E9) || c == 0x2C7C || c == 0x2C7D || c == 0xA69C ||
         c == 0xA69D || c == 0xA770 || c == 0xA7F8 || c == 0xA7F9 || (c >= 0xAB5C && c <= 0xAB5F) ||
         (c >= 0x1F130 && c <= 0x1F149) || (c >= 0x1F150 && c <= 0x1F169) || (c >= 0x1F170 && c <= 0x1F189);
}

// Unicode's Case_Ignorable property: Mn, Me, Cf, Lm, Sk and the word-break MidLetter/MidNumLet/Single_Quote marks.
bool is_case_ignorable(char32_t c) {
  const auto cat = utf8proc_category(utf8proc_int32_t(c));
  if (cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_ME || cat == UTF8PROC_CATEGORY_CF ||
      cat == UTF8PROC_CATEGORY_LM || cat == UTF8PROC_CATEGORY_SK) {
    return true;
  }
  switch (c) {
    case 0x27:
    case 0x2E:
    case 0x3A:
    case 0xB7:
    case 0x387:
    case 0x55F:
    case 0x5F4:
    case 0x2018:
    case 0x2019:
    case 0x2024:
    case 0x2027:
    case 0xFE13:
    case 0xFE52:
    case 0xFE55:
    case 0xFF07:
    case 0xFF0E:
    case 0xFF1A:
      return true;
    default:
      return false;
  }
}

// Python's rule for capital sigma: final form when a cased letter precedes (case-ignorables skipped) and
// none follows.
bool final_sigma(std::u32string_view text, size_t i) {
  size_t j = i;
  while (j > 0 && is_case_ignorable(text[j - 1])) --j;
  if (j == 0 || !is_cased(text[j - 1])) return false;
  size_t k = i + 1;
  while (k < text.size() && is_case_ignorable(text[k])) ++k;
  return k == text.size() || !is_cased(text[k]);
}

}  // namespace

std::u32string lower(std::u32string_view text) {
  // Python's str.lower(): full case mapping (U+0130 becomes two code points) and the final-sigma rule.
  std::u32string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char32_t c = text[i];
    if (c >= 'A' && c <= 'Z') {
      out.push_back(c + 32);
    } else if (c < 0x80) {
      out.push_back(c);
    } else if (c == 0x130) {
      out += U"i\u0307";
    } else if (c == 0x3A3) {
      out.push_back(final_sigma(text, i) ? char32_t(0x3C2) : char32_t(0x3C3));
    } else {
      out.push_back(char32_t(utf8proc_tolower(utf8proc_int32_t(c))));
    }
  }
  return out;
}

std::u32string rstrip(std::u32string_view text) {
  size_t end = text.size();
  while (end > 0 && is_space(text[end - 1])) --end;
  return std::u32string(text.substr(0, end));
}

std::vector<std::u32string> split(std::u32string_view text) {
  std::vector<std::u32string> out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    const size_t start = i;
    while (i < text.size() && !is_space(text[i])) ++i;
    if (i > start) out.emplace_back(text.substr(start, i - start));
  }
  return out;
}

std::u32string join_words(const std::vector<std::u32string>& words) {
  std::u32string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i) out.push_back(U' ');
    out += words[i];
  }
  return out;
}

namespace {
utf8proc_category_t category(char32_t c) { return utf8proc_category(utf8proc_int32_t(c)); }
}  // namespace

bool is_number(char32_t c) {
  const auto k = category(c);
  return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}

bool is_punctuation(char32_t c) {
  const auto k = category(c);
  return k == UTF8PROC_CATEGORY_PC || k == UTF8PROC_CATEGORY_PD || k == UTF8PROC_CATEGORY_PS ||
         k == UTF8PROC_CATEGORY_PE || k == UTF8PROC_CATEGORY_PI || k == UTF8PROC_CATEGORY_PF ||
         k == UTF8PROC_CATEGORY_PO;
}

bool is_symbol(char32_t c) {
  const auto k = category(c);
  return k == UTF8PROC_CATEGORY_SM || k == UTF8PROC_CATEGORY_SC || k == UTF8PROC_CATEGORY_SK ||
         k == UTF8PROC_CATEGORY_SO;
}

bool is_letter(char32_t c) {
  const auto k = category(c);
  return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT ||
         k == UTF8PROC_CATEGORY_LM || k == UTF8PROC_CATEGORY_LO;
}

bool is_lower_letter(char32_t c) {
  const auto k = category(c);
  return k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LO;
}

bool is_upper_letter(char32_t c) {
  const auto k = category(c);
  return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LT || k == UTF8PROC_CATEGORY_LO;
}

bool is_other_symbol(char32_t c) { return category(c) == UTF8PROC_CATEGORY_SO; }

}  // namespace mtx::text
