// Token-budget bucketing batcher (Marian's maxi-batch idea): shuffle, read a window, sort it by
// length, cut batches under the budget (padding counted), shuffle batch order. Deterministic for
// (seed, epoch); its position can be saved and restored for exact resume. Knows nothing of torch.
#pragma once

#include <cstdint>
#include <vector>

#include "mtx/data/dataset.h"

namespace mtx::data {

struct BatcherOptions {
  int64_t max_tokens = 4096;  // batch_size * longest sequence (source or target, specials included)
  int64_t sort_window = 0;    // examples sorted together (0 = the whole epoch)
  uint64_t seed = 1;
  bool shuffle = true;  // false: no shuffling at all, batches in length order (evaluation)
};

// Where the batcher stands: `index` is the next batch of `epoch` (epochs count from 1).
struct BatchPosition {
  int64_t epoch = 1;
  int64_t index = 0;
  bool operator==(const BatchPosition& o) const { return epoch == o.epoch && index == o.index; }
};

struct PaddingStats {
  int64_t batches = 0;
  int64_t examples = 0;
  int64_t real_tokens = 0;      // source + target tokens, specials included
  int64_t padded_slots = 0;     // batch * longest, summed over both sides
  int64_t max_batch_slots = 0;  // largest batch * longest side seen (compare with max_tokens)
  double efficiency() const { return padded_slots ? double(real_tokens) / double(padded_slots) : 1.0; }
};

using BatchPlan = std::vector<std::vector<uint32_t>>;

class Batcher {
 public:
  // Lengths as the model sees them (EOS or BOS included).
  Batcher(std::vector<int32_t> src_lengths, std::vector<int32_t> tgt_lengths, BatcherOptions options);
  // For a corpus of raw ids: source gets EOS, target gets BOS/EOS shifted (+1 each).
  static Batcher for_corpus(const EncodedCorpus& corpus, BatcherOptions options);

  // The indices of the next batch. At the end of an epoch returns false once and moves to the
  // next epoch, so `while (b.next(idx))` walks one epoch.
  bool next(std::vector<uint32_t>& indices);
  BatchPosition position() const { return position_; }
  // Batches in the epoch the batcher stands in (its plan is built once and reused by next()).
  size_t epoch_batches() { return current_plan().size(); }
  void restore(BatchPosition position);

  // Every batch of an epoch, in the order next() yields them.
  BatchPlan plan(int64_t epoch) const;
  PaddingStats padding(const BatchPlan& plan) const;
  size_t examples() const { return src_len_.size(); }
  const BatcherOptions& options() const { return options_; }

 private:
  const BatchPlan& current_plan();
  std::vector<int32_t> src_len_;
  std::vector<int32_t> tgt_len_;
  BatcherOptions options_;
  BatchPosition position_;
  BatchPlan plan_;
  int64_t plan_epoch_ = -1;
};

}  // namespace mtx::data
