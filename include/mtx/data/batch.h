// A training/evaluation batch as tensors: src, tgt_in (BOS + y), tgt_out (y + EOS), lengths; for a
// language model (data/lm_text.h) src and the lengths are undefined and tgt_out is tgt_in shifted by one.
// The trainer consumes these directly; nobody slices [:, :-1].
#pragma once

#include <torch/types.h>

#include <vector>

#include "mtx/data/dataset.h"
#include "mtx/tokenizer/tokenizer.h"

namespace mtx::data {

struct Batch {
  torch::Tensor src;              // [batch, src_len] int64: ids + EOS, right-padded with pad
  torch::Tensor tgt_in;           // [batch, tgt_len] int64: BOS + ids, padded
  torch::Tensor tgt_out;          // [batch, tgt_len] int64: ids + EOS, padded
  torch::Tensor src_lengths;      // [batch] int64, EOS included
  torch::Tensor tgt_lengths;      // [batch] int64, BOS (tgt_in) / EOS (tgt_out) included
  std::vector<uint32_t> indices;  // corpus positions of the rows (to restore input order)
  int64_t src_tokens = 0;         // non-pad source tokens
  int64_t tgt_tokens = 0;         // non-pad target tokens (what the loss averages over)

  int64_t size() const { return int64_t(indices.size()); }
  // Same batch on `device` (tensors moved, bookkeeping copied).
  Batch to(const torch::Device& device) const;
};

Batch make_batch(const EncodedCorpus& corpus, const std::vector<uint32_t>& indices, const tokenizer::SpecialIds& ids);

}  // namespace mtx::data
