// Token-budget bucketing batch sampler (Marian's maxi-batch idea): shuffle, read a window, sort it by
// length, cut batches under the budget (padding counted), shuffle batch order. Deterministic for
// (seed, epoch); its position can be saved and restored for exact resume. Knows nothing of torch.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "mtx/data/dataset.h"

namespace mtx::data {

struct BatchSamplerOptions {
  int64_t max_tokens = 4096;  // batch_size * longest sequence (source or target, specials included)
  int64_t sort_window = 0;    // examples sorted together (0 = the whole epoch, or streamed_above when streamed)
  uint64_t seed = 1;
  bool shuffle = true;  // false: no shuffling at all, batches in length order (evaluation)
  // A corpus of more examples is streamed: planned one window at a time in memory that does not grow with the
  // corpus -- a pseudo-random permutation instead of an index array, lengths read from the corpus as needed, and
  // batches shuffled within their window (Marian's maxi-batches). Up to it, an epoch is planned whole.
  int64_t streamed_above = int64_t(1) << 20;
};

// Where the sampler stands: `index` is the next batch of `epoch` (epochs count from 1).
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

class BatchSampler {
 public:
  // Lengths as the model sees them (EOS or BOS included).
  BatchSampler(std::vector<int32_t> src_lengths, std::vector<int32_t> tgt_lengths, BatchSamplerOptions options);
  // For a corpus of raw ids: source gets EOS, target gets BOS/EOS shifted (+1 each). A streamed sampler reads
  // the corpus's lengths as it plans: the corpus must outlive it.
  static BatchSampler for_corpus(const EncodedCorpus& corpus, BatchSamplerOptions options);

  // The indices of the next batch. At the end of an epoch returns false once and moves to the
  // next epoch, so `while (b.next(idx))` walks one epoch.
  bool next(std::vector<uint32_t>& indices);
  BatchPosition position() const { return position_; }
  // Batches in the epoch the sampler stands in (a streamed sampler plans every window to count them).
  size_t epoch_batches();
  void restore(BatchPosition position);

  // Every batch of an epoch, in the order next() yields them, to `visit` until it returns false.
  void for_each_batch(int64_t epoch, const std::function<bool(const std::vector<uint32_t>&)>& visit) const;
  // The same, gathered (memory grows with the corpus).
  BatchPlan plan(int64_t epoch) const;
  PaddingStats padding(const BatchPlan& plan) const;
  PaddingStats padding(int64_t epoch) const;
  size_t examples() const { return n_; }
  bool streamed() const { return streamed_; }
  const BatchSamplerOptions& options() const { return options_; }

 private:
  BatchSampler(const EncodedCorpus& corpus, BatchSamplerOptions options);
  int32_t src_len(uint32_t i) const;
  int32_t tgt_len(uint32_t i) const;
  // Adds a batch to s; len(i) gives item i's (source, target) lengths.
  template <class Len>
  static void add_padding(const std::vector<uint32_t>& batch, const Len& len, PaddingStats& s);
  const BatchPlan& current_plan();
  // Streamed: the number of windows, and window w's batches in epoch `epoch`.
  size_t window_size() const;  // pairs per streamed window
  size_t windows() const;
  BatchPlan window_plan(int64_t epoch, size_t w, PaddingStats* padding = nullptr) const;  // padding: added to
  void seek(int64_t epoch, int64_t index);  // throws Error past the epoch's end

  std::vector<int32_t> src_len_;  // whole-epoch planning only
  std::vector<int32_t> tgt_len_;
  const EncodedCorpus* corpus_ = nullptr;  // streamed planning from a corpus
  size_t n_ = 0;
  bool streamed_ = false;
  BatchSamplerOptions options_;
  BatchPosition position_;
  BatchPlan plan_;  // the whole epoch's, or the current window's when streamed
  int64_t plan_epoch_ = -1;
  size_t window_ = 0;           // streamed: the window plan_ holds
  int64_t window_first_ = 0;    // streamed: the epoch index of plan_'s first batch
  int64_t counted_epoch_ = -1;  // streamed: the epoch counted_ counts
  size_t counted_ = 0;
};

}  // namespace mtx::data
