#include "mtx/decode/request.h"

#include "mtx/decode/translator.h"
#include "mtx/util/utf8.h"

namespace mtx::decode {

ValidSources validate_sources(const tokenizer::Tokenizer& tokenizer, const std::vector<std::string>& sentences,
                              const std::vector<int32_t>& codes, int64_t max_source_tokens, const RequestLimits& limits,
                              const std::function<std::string(size_t)>& where) {
  if (limits.max_sentences > 0 && int64_t(sentences.size()) > limits.max_sentences) {
    throw InvalidRequest(std::to_string(sentences.size()) + " sentences; a request takes at most " +
                             std::to_string(limits.max_sentences) + " (--max-request-sentences)",
                         true);
  }
  ValidSources out;
  out.ids.resize(sentences.size());
  out.truncated.assign(sentences.size(), 0);
  for (size_t i = 0; i < sentences.size(); ++i) {
    const std::string& s = sentences[i];
    const size_t invalid = utf8::find_invalid(s);
    if (invalid != utf8::kValid) {
      throw InvalidRequest(where(i) + " is not valid UTF-8 (byte " + std::to_string(invalid) + ")", false);
    }
    if (limits.one_line && s.find_first_of("\r\n") != std::string::npos) {
      throw InvalidRequest(where(i) + " holds a line break: one line each", false);
    }
    std::vector<int32_t> pieces =
        s.find_first_not_of(" \t\f\v") == std::string::npos ? std::vector<int32_t>{} : tokenizer.src().encode(s);
    if (pieces.empty()) {
      if (limits.refuse_empty) throw InvalidRequest(where(i) + " is empty", false);
      continue;
    }
    if (limits.refuse_long && int64_t(pieces.size()) > max_source_tokens) {
      throw InvalidRequest(where(i) + " has " + std::to_string(pieces.size()) + " pieces; the model takes at most " +
                               std::to_string(max_source_tokens),
                           false);
    }
    const int32_t code = codes.empty() ? -1 : codes.size() == 1 ? codes.front() : codes[i];
    out.ids[i] = code >= 0 ? source_ids(tokenizer, s, code) : std::move(pieces);
    out.truncated[i] = int64_t(out.ids[i].size()) > max_source_tokens;
    out.tokens += int64_t(out.ids[i].size()) + 1;
  }
  if (limits.max_tokens > 0 && out.tokens > limits.max_tokens) {
    throw InvalidRequest(std::to_string(out.tokens) + " source tokens; a request takes at most " +
                             std::to_string(limits.max_tokens) + " (--max-request-tokens)",
                         true);
  }
  return out;
}

}  // namespace mtx::decode
