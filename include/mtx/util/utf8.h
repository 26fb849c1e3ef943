// Strict UTF-8 validation (no overlongs, no surrogates, nothing above U+10FFFF).
// Used wherever text enters mtx, so errors name the file and line instead of corrupting a model.
#pragma once

#include <cstddef>
#include <string_view>

namespace mtx::utf8 {

constexpr size_t kValid = static_cast<size_t>(-1);

// Byte offset of the first invalid sequence, or kValid.
size_t find_invalid(std::string_view text);
inline bool is_valid(std::string_view text) { return find_invalid(text) == kValid; }

}  // namespace mtx::utf8
