// Unicode text helpers with Python's semantics, so that metrics agree with sacreBLEU (and the LM's
// basic_english with torchtext) to the token: str.split(), str.lower(), str.rstrip(), code-point strings.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mtx::text {

std::u32string to_u32(std::string_view utf8);  // invalid bytes become U+FFFD
std::string to_utf8(std::u32string_view text);

bool is_space(char32_t c);                       // Python's str.isspace()
std::u32string lower(std::u32string_view text);  // str.lower(): full case mapping, final sigma
std::u32string rstrip(std::u32string_view text);
std::vector<std::u32string> split(std::u32string_view text);          // str.split()
std::u32string join_words(const std::vector<std::u32string>& words);  // ' '.join(words)

// Unicode general-category tests (Python regex's \p{N}, \p{P}, \p{S}).
bool is_number(char32_t c);
bool is_punctuation(char32_t c);
bool is_symbol(char32_t c);
bool is_letter(char32_t c);        // \p{L}
bool is_lower_letter(char32_t c);  // \p{Ll}, or a letter of an uncased script (\p{Lo})
bool is_upper_letter(char32_t c);  // \p{Lu}, or a letter of an uncased script (\p{Lo})
bool is_other_symbol(char32_t c);  // \p{So}: dingbats, emoji

}  // namespace mtx::text
