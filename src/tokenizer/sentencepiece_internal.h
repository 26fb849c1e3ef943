// Private to src/tokenizer: sentencepiece training through the shim.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace mtx::tokenizer {

// Runs the sentencepiece trainer with these flags (names without "--"); throws Error on failure.
void train_sentencepiece(const std::vector<std::pair<std::string, std::string>>& flags);

}  // namespace mtx::tokenizer
