#include "mtx/eval/text.h"

#include <utf8proc.h>

namespace mtx::eval {

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
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x1C: case 0x1D: case 0x1E: case 0x1F:
    case 0x20: case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F:
    case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

std::u32string lower(std::u32string_view text) {
  std::u32string out(text);
  for (char32_t& c : out) {
    if (c >= 'A' && c <= 'Z') {
      c += 32;
    } else if (c >= 0x80) {
      c = char32_t(utf8proc_tolower(utf8proc_int32_t(c)));
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

}  // namespace mtx::eval
