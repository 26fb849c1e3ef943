// The language table (src/text/languages.tsv, compiled in): every language a served model or the language
// identifier may name, with its codes in each scheme -- ISO 639-1 and 639-3, NLLB-200's (deu_Latn), M2M100's
// (de, ast), mBART-50's (de_DE), CLD2's -- and its English name. One row per language and script.
#pragma once

#include <string>
#include <vector>

namespace mtx::text {

struct Language {
  std::string iso639_1;  // "de" ("" where none)
  std::string iso639_3;  // "deu" (macrolanguages: the member NLLB uses, "arb" for Arabic)
  std::string script;    // ISO 15924: "Latn", "Hans", ...
  std::string nllb;      // "deu_Latn" ("" where NLLB has none)
  std::string cld2;      // the code CLD2 reports ("" where it knows none)
  std::string name;      // "German"
};

const std::vector<Language>& languages();

// The row a code names in any scheme (case-insensitive; "de", "deu", "deu_Latn", "de_DE", "zh-Hant", "iw";
// a scheme-qualified script picks its row), or nullptr.
const Language* find_language(const std::string& code);

// A code's English name ("German"), or the code itself when the table does not know it.
std::string language_name(const std::string& code);

// Among `codes` (a model's, in any scheme), the one that names `language`: the same row first, else the same
// ISO 639-3 language in another script; "" when none does.
std::string code_for(const Language& language, const std::vector<std::string>& codes);

}  // namespace mtx::text
