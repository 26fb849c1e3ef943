// torchtext's basic_english tokenizer and the LM tutorial's word vocabulary (WordModel).
#include <algorithm>
#include <unordered_set>

#include "mtx/tokenizer/tokenizer.h"
#include "mtx/util/errors.h"
#include "mtx/util/text.h"
#include "mtx/util/utf8.h"

namespace mtx::tokenizer {
namespace {

constexpr std::string_view kWordsMagic = "mtx-words 1\n";
const char* const kSpecials[] = {"<pad>", "<unk>", "<s>", "<eos>"};  // ids 0..3 (SpecialIds)

// Replaces every occurrence of `from` in `text` by `to`.
void replace_all(std::u32string& text, std::u32string_view from, std::u32string_view to) {
  std::u32string out;
  out.reserve(text.size() + text.size() / 4);
  size_t i = 0;
  while (i < text.size()) {
    if (text.compare(i, from.size(), from) == 0) {
      out += to;
      i += from.size();
    } else {
      out += text[i++];
    }
  }
  text.swap(out);
}

}  // namespace

std::vector<std::string> basic_english(std::string_view line) {
  // torchtext.data.utils._basic_english_normalize: its patterns in its order, on the lowercased line
  // (the final \s+ -> ' ' is subsumed by the whitespace split).
  static const std::pair<std::u32string_view, std::u32string_view> kRules[] = {
      {U"'", U" '  "}, {U"\"", U""},   {U".", U" . "}, {U"<br />", U" "}, {U",", U" , "}, {U"(", U" ( "},
      {U")", U" ) "},  {U"!", U" ! "}, {U"?", U" ? "}, {U";", U" "},      {U":", U" "},
  };
  std::u32string text = text::lower(text::to_u32(line));
  for (const auto& [from, to] : kRules) replace_all(text, from, to);
  std::vector<std::string> words;
  for (const auto& w : text::split(text)) words.push_back(text::to_utf8(w));
  return words;
}

WordModel::WordModel(std::vector<std::string> words, std::string bytes)
    : Model(std::move(bytes)), words_(std::move(words)) {
  vocab_size_ = int32_t(words_.size());
  special_ = SpecialIds{};
  for (size_t i = 0; i < words_.size(); ++i) index_.emplace(words_[i], int32_t(i));
}

bool WordModel::is_word_model(std::string_view bytes) { return bytes.substr(0, kWordsMagic.size()) == kWordsMagic; }

std::shared_ptr<const WordModel> WordModel::train(const std::vector<std::string>& lines, int min_freq) {
  std::unordered_map<std::string, int64_t> counts;
  for (const auto& line : lines) {
    for (auto& w : basic_english(line)) ++counts[std::move(w)];
  }
  std::vector<std::pair<std::string, int64_t>> sorted(counts.begin(), counts.end());
  // Most frequent first; ties in code-point order (UTF-8 byte order is code-point order).
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  std::vector<std::string> words(std::begin(kSpecials), std::end(kSpecials));
  for (const auto& [word, count] : sorted) {
    if (count < min_freq) break;
    if (std::find(std::begin(kSpecials), std::end(kSpecials), word) != std::end(kSpecials)) continue;
    words.push_back(word);
  }
  std::string bytes(kWordsMagic);
  for (const auto& w : words) bytes += w + "\n";
  return std::shared_ptr<const WordModel>(new WordModel(std::move(words), std::move(bytes)));
}

std::shared_ptr<const WordModel> WordModel::from_bytes(std::string bytes) {
  if (!is_word_model(bytes)) throw DataError("not an mtx word vocabulary (no 'mtx-words 1' header)");
  if (!utf8::is_valid(bytes)) throw DataError("mtx word vocabulary: invalid UTF-8");
  if (bytes.back() != '\n') throw DataError("mtx word vocabulary: truncated (no final newline)");
  std::vector<std::string> words;
  size_t start = kWordsMagic.size();
  while (start < bytes.size()) {
    const size_t end = bytes.find('\n', start);
    words.push_back(bytes.substr(start, end - start));
    start = end + 1;
  }
  if (words.size() < 4 || !std::equal(std::begin(kSpecials), std::end(kSpecials), words.begin())) {
    throw DataError("mtx word vocabulary: must start with <pad> <unk> <s> <eos>");
  }
  std::unordered_set<std::string> seen;
  for (const auto& w : words) {
    if (w.empty() || text::split(text::to_u32(w)).size() != 1 || !seen.insert(w).second) {
      throw DataError("mtx word vocabulary: entry '" + w + "' is empty, holds whitespace or repeats");
    }
  }
  return std::shared_ptr<const WordModel>(new WordModel(std::move(words), std::move(bytes)));
}

void WordModel::encode(std::string_view text, std::vector<int32_t>& ids) const {
  ids.clear();
  for (const auto& w : basic_english(text)) {
    const auto it = index_.find(w);
    ids.push_back(it == index_.end() ? special_.unk : it->second);
  }
}

std::string WordModel::decode(const int32_t* ids, size_t n) const {
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    if (ids[i] == special_.pad || ids[i] == special_.bos) continue;
    if (!out.empty()) out += ' ';
    out += piece(ids[i]);
  }
  return out;
}

std::string WordModel::piece(int32_t id) const {
  if (id < 0 || id >= vocab_size_) throw Error("word id " + std::to_string(id) + " is out of range");
  return words_[size_t(id)];
}

}  // namespace mtx::tokenizer
