// One validated translation request for every front end (the CLI, the server, the Python package), after TGI's
// validation.rs: each sentence checked (UTF-8, one line, not empty), tokenized with its language code where the
// tokenizer puts it (decode::source_ids), and the whole held to the front end's limits -- refused, or cut by the
// translator -- in one place, with errors typed for each front end to map (the server: 400 and 413; the CLI: one
// line and exit 2; Python: ValueError).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "mtx/tokenizer/tokenizer.h"
#include "mtx/util/errors.h"

namespace mtx::decode {

struct RequestLimits {
  int64_t max_sentences = 0;  // sentences in a request (0: any)
  int64_t max_tokens = 0;     // source tokens of a request, each sentence's EOS included (0: any)
  bool refuse_long = false;   // a sentence longer than the model takes: refused, or (false) cut by the translator
  bool refuse_empty = false;  // an empty or blank sentence: refused, or (false) left out, its translation empty
  bool one_line = false;      // a line break in a sentence: refused, or (false) taken as a space
};

// A request that breaks a rule: `too_large` when it can never succeed as it is (too many sentences or tokens),
// else it is malformed. The message names the sentence (`where`).
class InvalidRequest : public ConfigError {
 public:
  InvalidRequest(const std::string& message, bool too_large) : ConfigError(message), too_large(too_large) {}
  bool too_large;
};

struct ValidSources {
  std::vector<std::vector<int32_t>> ids;  // per sentence: its source ids without EOS (empty: left out)
  std::vector<uint8_t> truncated;         // per sentence: longer than the model takes (the translator cuts it)
  int64_t tokens = 0;                     // source tokens, each kept sentence's EOS included
};

// `sentences` checked and tokenized for a model that takes `max_source_tokens` (without EOS); `codes`: a
// multilingual model's source language tokens (none: empty; one for all, or one per sentence; -1: none);
// `where(i)` names sentence i in errors.
ValidSources validate_sources(const tokenizer::Tokenizer& tokenizer, const std::vector<std::string>& sentences,
                              const std::vector<int32_t>& codes, int64_t max_source_tokens, const RequestLimits& limits,
                              const std::function<std::string(size_t)>& where);

}  // namespace mtx::decode
