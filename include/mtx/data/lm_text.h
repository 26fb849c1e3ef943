// The language-model task's data, as PyTorch's Transformer tutorial prepares it: text lines encoded into
// one token sequence (<eos> after every non-empty line), cut into `columns` contiguous rows (batchify),
// read in windows of `bptt` tokens whose targets are the next tokens. Deterministic; positions resume.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mtx/data/batch.h"
#include "mtx/data/batch_sampler.h"
#include "mtx/tokenizer/tokenizer.h"

namespace mtx::data {

// Each line's ids then <eos>; lines that encode to nothing are skipped (the tutorial's filter).
std::vector<int32_t> encode_lm_text(const tokenizer::Model& model, const std::vector<std::string>& lines);

class BpttBatches {
 public:
  // Cuts `ids` into `columns` rows of ids.size() / columns tokens (the rest dropped); a window is
  // up to `bptt` positions of every row. Throws DataError when the sequence is too short for one window.
  BpttBatches(const std::vector<int32_t>& ids, int64_t columns, int64_t bptt, const std::string& what);

  // The next window as a batch (tgt_in [columns, len], tgt_out the same positions + 1); at the end of
  // an epoch returns false once and moves to the next epoch, as BatchSampler::next.
  bool next(Batch& batch);
  BatchPosition position() const { return position_; }
  void restore(BatchPosition position) { position_ = position; }
  int64_t epoch_batches() const { return (length_ - 1 + bptt_ - 1) / bptt_; }
  int64_t columns() const { return columns_; }
  int64_t tokens() const { return columns_ * length_; }  // after the cut
  // Window `index` of an epoch (0 <= index < epoch_batches()).
  Batch window(int64_t index) const;

 private:
  torch::Tensor rows_;  // [columns, length] int64
  int64_t columns_, length_, bptt_;
  BatchPosition position_;
};

}  // namespace mtx::data
