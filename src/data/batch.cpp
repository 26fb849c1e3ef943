#include "mtx/data/batch.h"

#include <algorithm>

#include "mtx/util/errors.h"

namespace mtx::data {

Batch Batch::to(const torch::Device& device) const {
  Batch b = *this;
  const bool async = device.is_cuda();
  // A language model's batch has no source side: undefined tensors stay undefined.
  auto move = [&](const torch::Tensor& t) { return t.defined() ? t.to(device, async) : t; };
  b.src = move(src);
  b.tgt_in = move(tgt_in);
  b.tgt_out = move(tgt_out);
  b.src_lengths = move(src_lengths);
  b.tgt_lengths = move(tgt_lengths);
  return b;
}

Batch make_batch(const EncodedCorpus& corpus, const std::vector<uint32_t>& indices, const tokenizer::SpecialIds& ids) {
  if (indices.empty()) throw Error("make_batch: empty batch");
  const int64_t n = int64_t(indices.size());
  // Each row's ids, copied out of the corpus (data/dataset.h: a mapped corpus is read, not mapped).
  std::vector<std::vector<int32_t>> src_rows(indices.size()), tgt_rows(indices.size());
  int64_t max_s = 0, max_t = 0;
  for (size_t r = 0; r < indices.size(); ++r) {
    if (indices[r] >= corpus.size()) throw Error("make_batch: index out of range");
    corpus.src.read(indices[r], src_rows[r]);
    corpus.tgt.read(indices[r], tgt_rows[r]);
    max_s = std::max<int64_t>(max_s, int64_t(src_rows[r].size()) + 1);
    max_t = std::max<int64_t>(max_t, int64_t(tgt_rows[r].size()) + 1);
  }
  Batch b;
  b.indices = indices;
  b.src = torch::full({n, max_s}, ids.pad, torch::kLong);      // [batch, src_len]
  b.tgt_in = torch::full({n, max_t}, ids.pad, torch::kLong);   // [batch, tgt_len]
  b.tgt_out = torch::full({n, max_t}, ids.pad, torch::kLong);  // [batch, tgt_len]
  b.src_lengths = torch::empty({n}, torch::kLong);             // [batch]
  b.tgt_lengths = torch::empty({n}, torch::kLong);             // [batch]
  auto src = b.src.accessor<int64_t, 2>();
  auto tin = b.tgt_in.accessor<int64_t, 2>();
  auto tout = b.tgt_out.accessor<int64_t, 2>();
  auto sl = b.src_lengths.accessor<int64_t, 1>();
  auto tl = b.tgt_lengths.accessor<int64_t, 1>();
  for (int64_t r = 0; r < n; ++r) {
    const std::vector<int32_t>& s = src_rows[size_t(r)];
    const std::vector<int32_t>& t = tgt_rows[size_t(r)];
    for (size_t k = 0; k < s.size(); ++k) src[r][int64_t(k)] = s[k];
    src[r][int64_t(s.size())] = ids.eos;
    tin[r][0] = ids.bos;
    for (size_t k = 0; k < t.size(); ++k) {
      tin[r][int64_t(k) + 1] = t[k];
      tout[r][int64_t(k)] = t[k];
    }
    tout[r][int64_t(t.size())] = ids.eos;
    sl[r] = int64_t(s.size()) + 1;
    tl[r] = int64_t(t.size()) + 1;
    b.src_tokens += sl[r];
    b.tgt_tokens += tl[r];
  }
  return b;
}

}  // namespace mtx::data
