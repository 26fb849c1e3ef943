#include "mtx/data/lm_text.h"

#include <fmt/format.h>

#include <algorithm>

#include "mtx/util/errors.h"

namespace mtx::data {

std::vector<int32_t> encode_lm_text(const tokenizer::Model& model, const std::vector<std::string>& lines) {
  std::vector<int32_t> tokens, ids;
  const int32_t eos = model.special_ids().eos;
  for (const auto& line : lines) {
    model.encode(line, ids);
    if (ids.empty()) continue;
    tokens.insert(tokens.end(), ids.begin(), ids.end());
    tokens.push_back(eos);
  }
  return tokens;
}

BpttBatches::BpttBatches(const std::vector<int32_t>& ids, int64_t columns, int64_t bptt, const std::string& what)
    : columns_(columns), length_(columns > 0 ? int64_t(ids.size()) / columns : 0), bptt_(bptt) {
  if (columns <= 0 || bptt <= 0) throw Error("BpttBatches: columns and bptt must be positive");
  if (length_ < 2) {
    throw DataError(
        fmt::format("{}: {} tokens cannot be cut into {} rows of 2 or more (one input and its next "
                    "token); give more text or a smaller batch size",
                    what, ids.size(), columns));
  }
  torch::Tensor flat = torch::empty({columns_ * length_}, torch::kLong);  // [columns * length]
  auto* p = flat.data_ptr<int64_t>();
  for (int64_t i = 0; i < columns_ * length_; ++i) p[i] = ids[size_t(i)];
  rows_ = flat.view({columns_, length_});  // [columns, length]: row j holds tokens j*length ..
}

Batch BpttBatches::window(int64_t index) const {
  const int64_t start = index * bptt_;
  if (index < 0 || start >= length_ - 1) throw Error("BpttBatches: window out of range");
  const int64_t len = std::min(bptt_, length_ - 1 - start);
  Batch b;
  b.tgt_in = rows_.narrow(1, start, len).contiguous();       // [columns, len]
  b.tgt_out = rows_.narrow(1, start + 1, len).contiguous();  // [columns, len]: the next tokens
  b.tgt_tokens = columns_ * len;
  return b;
}

bool BpttBatches::next(Batch& batch) {
  if (position_.index >= epoch_batches()) {
    position_ = {position_.epoch + 1, 0};
    return false;
  }
  batch = window(position_.index++);
  return true;
}

}  // namespace mtx::data
