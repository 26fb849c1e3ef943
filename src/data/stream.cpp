#include "mtx/data/stream.h"

#include <fmt/format.h>

#include <algorithm>

#include "mtx/util/errors.h"

namespace mtx::data {

std::vector<int32_t> encode_stream(const tokenizer::Model& model, const std::vector<std::string>& lines) {
  std::vector<int32_t> stream, ids;
  const int32_t eos = model.special_ids().eos;
  for (const auto& line : lines) {
    model.encode(line, ids);
    if (ids.empty()) continue;
    stream.insert(stream.end(), ids.begin(), ids.end());
    stream.push_back(eos);
  }
  return stream;
}

StreamBatcher::StreamBatcher(const std::vector<int32_t>& stream, int64_t columns, int64_t bptt, const std::string& what)
    : columns_(columns), length_(columns > 0 ? int64_t(stream.size()) / columns : 0), bptt_(bptt) {
  if (columns <= 0 || bptt <= 0) throw Error("StreamBatcher: columns and bptt must be positive");
  if (length_ < 2) {
    throw DataError(
        fmt::format("{}: {} tokens cannot be cut into {} streams of 2 or more (one input and its next "
                    "token); give more text or a smaller batch size",
                    what, stream.size(), columns));
  }
  torch::Tensor flat = torch::empty({columns_ * length_}, torch::kLong);  // [columns * length]
  auto* p = flat.data_ptr<int64_t>();
  for (int64_t i = 0; i < columns_ * length_; ++i) p[i] = stream[size_t(i)];
  rows_ = flat.view({columns_, length_});  // [columns, length]: row j holds tokens j*length ..
}

Batch StreamBatcher::window(int64_t index) const {
  const int64_t start = index * bptt_;
  if (index < 0 || start >= length_ - 1) throw Error("StreamBatcher: window out of range");
  const int64_t len = std::min(bptt_, length_ - 1 - start);
  Batch b;
  b.tgt_in = rows_.narrow(1, start, len).contiguous();       // [columns, len]
  b.tgt_out = rows_.narrow(1, start + 1, len).contiguous();  // [columns, len]: the next tokens
  b.tgt_tokens = columns_ * len;
  return b;
}

bool StreamBatcher::next(Batch& batch) {
  if (position_.index >= epoch_batches()) {
    position_ = {position_.epoch + 1, 0};
    return false;
  }
  batch = window(position_.index++);
  return true;
}

}  // namespace mtx::data
