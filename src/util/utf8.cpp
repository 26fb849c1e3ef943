#include "mtx/util/utf8.h"

#include <cstdint>

namespace mtx::utf8 {

size_t find_invalid(std::string_view text) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const uint8_t c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07;
    } else
      return i;  // stray continuation byte, overlong lead (C0/C1) or F5..FF
    if (i + len > n) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) return i;  // overlong
    if (cp >= 0xD800 && cp <= 0xDFFF) return i;                            // surrogate
    if (cp > 0x10FFFF) return i;
    i += len;
  }
  return kValid;
}

}  // namespace mtx::utf8
