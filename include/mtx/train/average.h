// Checkpoint averaging: the elementwise mean of several checkpoints' weights (e.g. the last K of a
// run), a cheap and reliable BLEU gain for Transformer NMT.
#pragma once

#include <filesystem>
#include <vector>

namespace mtx::train {

// Writes `out`: weights = the mean of `inputs`' weights; config, tokenizer and training state from the
// last input; no optimizer state (a model for translating, not for resuming). Throws DataError when the
// inputs are not the same model (config model section, tokenizer, parameter names or shapes differ).
void average_checkpoints(const std::vector<std::filesystem::path>& inputs, const std::filesystem::path& out);

}  // namespace mtx::train
