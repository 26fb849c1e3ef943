// sacreBLEU's tokenisers (13a, intl, char, none; tercom) with Python's re.sub semantics: each pattern is
// applied left to right over code points, non-overlapping, before the next pattern runs.
#include "mtx/eval/internal.h"

#include "mtx/util/errors.h"

namespace mtx::eval {
namespace {

bool is_digit(char32_t c) { return c >= U'0' && c <= U'9'; }
bool is_dot_comma(char32_t c) { return c == U'.' || c == U','; }

// The class [{-~[-` -&(-+:-@/] of mteval-v13a and tercom: ASCII punctuation except ' , - . (and space).
bool is_13a_punct(char32_t c) {
  return (c >= 0x7B && c <= 0x7E) || (c >= 0x5B && c <= 0x60) || (c >= 0x20 && c <= 0x26) || (c >= 0x28 && c <= 0x2B) ||
         (c >= 0x3A && c <= 0x40) || c == 0x2F;
}

// re.sub(r"(X)", r" \1 ")
template <class P>
std::u32string pad_each(const std::u32string& t, P pred) {
  std::u32string out;
  out.reserve(t.size() * 2);
  for (const char32_t c : t) {
    if (pred(c)) {
      out.push_back(U' ');
      out.push_back(c);
      out.push_back(U' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// re.sub(r"(A)(B)", r"\1 \2 ") when trailing, else r" \1 \2".
template <class PA, class PB>
std::u32string pair_sub(const std::u32string& t, PA a, PB b, bool trailing) {
  std::u32string out;
  out.reserve(t.size() + t.size() / 2);
  size_t i = 0;
  while (i < t.size()) {
    if (i + 1 < t.size() && a(t[i]) && b(t[i + 1])) {
      if (!trailing) out.push_back(U' ');
      out.push_back(t[i]);
      out.push_back(U' ');
      out.push_back(t[i + 1]);
      if (trailing) out.push_back(U' ');
      i += 2;
    } else {
      out.push_back(t[i++]);
    }
  }
  return out;
}

void replace_all(std::u32string& s, std::u32string_view from, std::u32string_view to) {
  size_t pos = 0;
  while ((pos = s.find(from, pos)) != std::u32string::npos) {
    s.replace(pos, from.size(), to);
    pos += to.size();
  }
}

}  // namespace

BleuTokenizer parse_bleu_tokenizer(const std::string& name) {
  if (name == "13a") return BleuTokenizer::k13a;
  if (name == "intl") return BleuTokenizer::intl;
  if (name == "char") return BleuTokenizer::chars;
  if (name == "none") return BleuTokenizer::none;
  if (name == "spacy") return BleuTokenizer::spacy;
  throw ConfigError("--tokenize: unknown tokenizer '" + name + "' (choose 13a, intl, char, none or spacy)");
}

std::string to_string(BleuTokenizer t) {
  switch (t) {
    case BleuTokenizer::k13a:
      return "13a";
    case BleuTokenizer::intl:
      return "intl";
    case BleuTokenizer::chars:
      return "char";
    case BleuTokenizer::none:
      return "none";
    case BleuTokenizer::spacy:
      return "spacy";
  }
  return "?";
}

std::vector<std::u32string> bleu_tokens(std::u32string line, BleuTokenizer tokenizer) {
  switch (tokenizer) {
    case BleuTokenizer::none:
      return split(line);
    case BleuTokenizer::spacy:
      return spacy_en_tokens(line);
    case BleuTokenizer::chars: {
      std::vector<std::u32string> out;
      for (const char32_t c : line) {
        if (!is_space(c)) out.emplace_back(1, c);
      }
      return out;
    }
    case BleuTokenizer::intl: {
      line = pair_sub(
          line, [](char32_t c) { return !is_number(c); }, is_punctuation, true);
      line = pair_sub(
          line, is_punctuation, [](char32_t c) { return !is_number(c); }, false);
      line = pad_each(line, is_symbol);
      return split(line);
    }
    case BleuTokenizer::k13a: {
      replace_all(line, U"<skipped>", U"");
      replace_all(line, U"-\n", U"");
      replace_all(line, U"\n", U" ");
      if (line.find(U'&') != std::u32string::npos) {
        replace_all(line, U"&quot;", U"\"");
        replace_all(line, U"&amp;", U"&");
        replace_all(line, U"&lt;", U"<");
        replace_all(line, U"&gt;", U">");
      }
      std::u32string t = U" " + line + U" ";
      t = pad_each(t, is_13a_punct);
      t = pair_sub(
          t, [](char32_t c) { return !is_digit(c); }, is_dot_comma, true);
      t = pair_sub(
          t, is_dot_comma, [](char32_t c) { return !is_digit(c); }, false);
      t = pair_sub(
          t, is_digit, [](char32_t c) { return c == U'-'; }, true);
      return split(t);
    }
  }
  return {};
}

std::vector<std::u32string> ter_tokens(const std::u32string& input, const TerOptions& o) {
  if (input.empty()) return {};
  std::u32string s = o.case_sensitive ? input : lower(input);
  if (o.normalized) {
    replace_all(s, U"\n-", U"");
    replace_all(s, U"\n", U" ");
    replace_all(s, U"&quot;", U"\"");
    replace_all(s, U"&amp;", U"&");
    replace_all(s, U"&lt;", U"<");
    replace_all(s, U"&gt;", U">");
    s = U" " + s + U" ";
    s = pad_each(s, is_13a_punct);
    replace_all(s, U"'s ", U" 's ");
    if (s.size() >= 2 && s.compare(s.size() - 2, 2, U"'s") == 0) s.replace(s.size() - 2, 2, U" 's");
    s = pair_sub(
        s, [](char32_t c) { return !is_digit(c); }, is_dot_comma, true);
    s = pair_sub(
        s, is_dot_comma, [](char32_t c) { return !is_digit(c); }, false);
    s = pair_sub(
        s, is_digit, [](char32_t c) { return c == U'-'; }, true);
    s = join_words(split(s));
  }
  if (o.no_punct) {
    std::u32string kept;
    for (const char32_t c : s) {
      const bool punct = c == U'.' || c == U',' || c == U'?' || c == U':' || c == U';' || c == U'!' || c == U'"' ||
                         c == U'(' || c == U')';
      if (!punct) kept.push_back(c);
    }
    s = std::move(kept);
  }
  return split(s);
}

std::vector<std::u32string> bleu_words(const std::string& segment, BleuTokenizer tokenizer, bool lowercase) {
  std::u32string t = to_u32(segment);
  if (tokenizer == BleuTokenizer::spacy) {
    auto words = spacy_en_tokens(rstrip(t));
    if (lowercase) {
      for (auto& w : words) w = lower(w);
    }
    return words;
  }
  if (lowercase) t = lower(t);
  return bleu_tokens(rstrip(t), tokenizer);
}

std::string tokenize_bleu(const std::string& line, BleuTokenizer tokenizer) {
  return to_utf8(join_words(bleu_words(line, tokenizer, false)));
}

std::string tokenize_ter(const std::string& line, const TerOptions& options) {
  return to_utf8(join_words(ter_tokens(rstrip(to_u32(line)), options)));
}

}  // namespace mtx::eval
