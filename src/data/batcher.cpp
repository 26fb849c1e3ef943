#include "mtx/data/batcher.h"

#include <algorithm>
#include <numeric>

#include "mtx/util/errors.h"
#include "mtx/util/random.h"

namespace mtx::data {

Batcher::Batcher(std::vector<int32_t> src_lengths, std::vector<int32_t> tgt_lengths, BatcherOptions options)
    : src_len_(std::move(src_lengths)), tgt_len_(std::move(tgt_lengths)), options_(options) {
  if (src_len_.size() != tgt_len_.size()) throw Error("batcher: source and target length lists differ in size");
  if (options_.max_tokens <= 0) throw Error("batcher: max_tokens must be positive");
}

Batcher Batcher::for_corpus(const EncodedCorpus& corpus, BatcherOptions options) {
  std::vector<int32_t> s(corpus.size()), t(corpus.size());
  for (size_t i = 0; i < corpus.size(); ++i) {
    s[i] = int32_t(corpus.src.length(i) + 1);
    t[i] = int32_t(corpus.tgt.length(i) + 1);
  }
  return Batcher(std::move(s), std::move(t), options);
}

BatchPlan Batcher::plan(int64_t epoch) const {
  const size_t n = src_len_.size();
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  Rng rng = Rng::from({options_.seed, uint64_t(epoch)});
  if (options_.shuffle) rng.shuffle(order);

  const size_t window = options_.sort_window > 0 ? size_t(options_.sort_window) : std::max<size_t>(n, 1);
  BatchPlan batches;
  for (size_t w = 0; w < n; w += window) {
    const auto first = order.begin() + ptrdiff_t(w);
    const auto last = order.begin() + ptrdiff_t(std::min(n, w + window));
    // Longest side first, then source, then target: neighbours pad little on either side.
    std::stable_sort(first, last, [&](uint32_t a, uint32_t b) {
      const int32_t ka = std::max(src_len_[a], tgt_len_[a]), kb = std::max(src_len_[b], tgt_len_[b]);
      if (ka != kb) return ka < kb;
      if (src_len_[a] != src_len_[b]) return src_len_[a] < src_len_[b];
      return tgt_len_[a] < tgt_len_[b];
    });
    std::vector<uint32_t> current;
    int64_t longest = 0;
    for (auto it = first; it != last; ++it) {
      const int64_t len = std::max(src_len_[*it], tgt_len_[*it]);
      const int64_t new_longest = std::max(longest, len);
      if (!current.empty() && int64_t(current.size() + 1) * new_longest > options_.max_tokens) {
        batches.push_back(std::move(current));
        current.clear();
        longest = len;
      } else {
        longest = new_longest;
      }
      current.push_back(*it);
    }
    if (!current.empty()) batches.push_back(std::move(current));
  }
  if (options_.shuffle) rng.shuffle(batches);
  return batches;
}

PaddingStats Batcher::padding(const BatchPlan& plan) const {
  PaddingStats s;
  for (const auto& batch : plan) {
    int64_t max_s = 0, max_t = 0;
    for (uint32_t i : batch) {
      max_s = std::max<int64_t>(max_s, src_len_[i]);
      max_t = std::max<int64_t>(max_t, tgt_len_[i]);
      s.real_tokens += src_len_[i] + tgt_len_[i];
    }
    const int64_t b = int64_t(batch.size());
    s.padded_slots += b * (max_s + max_t);
    s.max_batch_slots = std::max(s.max_batch_slots, b * std::max(max_s, max_t));
    s.examples += b;
    ++s.batches;
  }
  return s;
}

const BatchPlan& Batcher::current_plan() {
  if (plan_epoch_ != position_.epoch) {
    plan_ = plan(position_.epoch);
    plan_epoch_ = position_.epoch;
  }
  return plan_;
}

bool Batcher::next(std::vector<uint32_t>& indices) {
  const BatchPlan& p = current_plan();
  if (position_.index >= int64_t(p.size())) {
    position_ = {position_.epoch + 1, 0};
    return false;
  }
  indices = p[size_t(position_.index++)];
  return true;
}

void Batcher::restore(BatchPosition position) {
  if (position.epoch < 1 || position.index < 0) throw Error("batcher: invalid position to restore");
  position_ = position;
  if (position_.index > int64_t(current_plan().size())) {
    throw Error("batcher: position " + std::to_string(position.index) + " is past the end of epoch " +
                std::to_string(position.epoch) + " (different data or batch settings?)");
  }
}

}  // namespace mtx::data
