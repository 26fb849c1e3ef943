#include "mtx/data/batch_sampler.h"

#include <algorithm>
#include <numeric>

#include "mtx/util/errors.h"
#include "mtx/util/random.h"

namespace mtx::data {
namespace {

// Sorts items [first, last) -- longest side first, then source, then target, so that neighbours pad little on
// either side -- and cuts them into batches whose size * longest side stays within max_tokens (an item over the
// budget gets a batch of its own). len(item) gives (source, target) lengths.
template <class It, class Len>
void sort_and_cut(It first, It last, int64_t max_tokens, const Len& len, BatchPlan& batches) {
  std::stable_sort(first, last, [&](uint32_t a, uint32_t b) {
    const auto [sa, ta] = len(a);
    const auto [sb, tb] = len(b);
    const int32_t ka = std::max(sa, ta), kb = std::max(sb, tb);
    if (ka != kb) return ka < kb;
    if (sa != sb) return sa < sb;
    return ta < tb;
  });
  std::vector<uint32_t> current;
  int64_t longest = 0;
  for (auto it = first; it != last; ++it) {
    const auto [s, t] = len(*it);
    const int64_t l = std::max(s, t);
    const int64_t new_longest = std::max(longest, l);
    if (!current.empty() && int64_t(current.size() + 1) * new_longest > max_tokens) {
      batches.push_back(std::move(current));
      current.clear();
      longest = l;
    } else {
      longest = new_longest;
    }
    current.push_back(*it);
  }
  if (!current.empty()) batches.push_back(std::move(current));
}

}  // namespace

BatchSampler::BatchSampler(std::vector<int32_t> src_lengths, std::vector<int32_t> tgt_lengths,
                           BatchSamplerOptions options)
    : src_len_(std::move(src_lengths)), tgt_len_(std::move(tgt_lengths)), n_(src_len_.size()), options_(options) {
  if (src_len_.size() != tgt_len_.size()) throw Error("batch sampler: source and target length lists differ in size");
  if (options_.max_tokens <= 0) throw Error("batch sampler: max_tokens must be positive");
  streamed_ = int64_t(n_) > options_.streamed_above;
}

BatchSampler::BatchSampler(const EncodedCorpus& corpus, BatchSamplerOptions options)
    : corpus_(&corpus), n_(corpus.size()), streamed_(true), options_(options) {
  if (options_.max_tokens <= 0) throw Error("batch sampler: max_tokens must be positive");
}

BatchSampler BatchSampler::for_corpus(const EncodedCorpus& corpus, BatchSamplerOptions options) {
  if (int64_t(corpus.size()) > options.streamed_above) return BatchSampler(corpus, options);
  std::vector<int32_t> s(corpus.size()), t(corpus.size());
  for (size_t i = 0; i < corpus.size(); ++i) {
    s[i] = int32_t(corpus.src.length(i) + 1);
    t[i] = int32_t(corpus.tgt.length(i) + 1);
  }
  corpus.release_pages();
  return BatchSampler(std::move(s), std::move(t), options);
}

int32_t BatchSampler::src_len(uint32_t i) const { return corpus_ ? int32_t(corpus_->src.length(i) + 1) : src_len_[i]; }
int32_t BatchSampler::tgt_len(uint32_t i) const { return corpus_ ? int32_t(corpus_->tgt.length(i) + 1) : tgt_len_[i]; }

size_t BatchSampler::window_size() const {
  return size_t(options_.sort_window > 0 ? options_.sort_window : options_.streamed_above);
}

size_t BatchSampler::windows() const { return (n_ + window_size() - 1) / window_size(); }

BatchPlan BatchSampler::window_plan(int64_t epoch, size_t w, PaddingStats* padding) const {
  const size_t begin = w * window_size(), m = std::min(n_, begin + window_size()) - begin;
  const Permutation order(n_, Rng::from({options_.seed, uint64_t(epoch)}).next());
  // The window's examples and their lengths, gathered once: the sort then reads memory of the window's size.
  std::vector<uint32_t> ids(m), items(m);
  std::vector<int32_t> sl(m), tl(m);
  for (size_t k = 0; k < m; ++k) ids[k] = uint32_t(options_.shuffle ? order(begin + k) : begin + k);
  // The window's pairs lie anywhere in the corpus. Their lengths are read in corpus order, so that each page of
  // offsets is mapped once, and the pages passed are let go every kReleaseEvery reads: what stays mapped is
  // bounded by that, not by the corpus.
  constexpr size_t kReleaseEvery = size_t(1) << 12;
  std::iota(items.begin(), items.end(), 0u);
  if (corpus_) std::sort(items.begin(), items.end(), [&](uint32_t a, uint32_t b) { return ids[a] < ids[b]; });
  for (size_t j = 0; j < m; ++j) {
    const uint32_t k = items[j];
    sl[k] = src_len(ids[k]);
    tl[k] = tgt_len(ids[k]);
    if (corpus_ && (j + 1) % kReleaseEvery == 0) corpus_->release_pages();
  }
  if (corpus_) corpus_->release_pages();
  std::iota(items.begin(), items.end(), 0u);
  const auto len = [&](uint32_t k) { return std::pair{sl[k], tl[k]}; };
  BatchPlan batches;
  sort_and_cut(items.begin(), items.end(), options_.max_tokens, len, batches);
  if (padding) {
    for (const auto& batch : batches) add_padding(batch, len, *padding);
  }
  for (auto& batch : batches) {
    for (uint32_t& k : batch) k = ids[k];
  }
  if (options_.shuffle) Rng::from({options_.seed, uint64_t(epoch), uint64_t(w) + 1}).shuffle(batches);
  return batches;
}

void BatchSampler::for_each_batch(int64_t epoch, const std::function<bool(const std::vector<uint32_t>&)>& visit) const {
  if (!streamed_) {
    for (const auto& batch : plan(epoch)) {
      if (!visit(batch)) return;
    }
    return;
  }
  for (size_t w = 0; w < windows(); ++w) {
    for (const auto& batch : window_plan(epoch, w)) {
      if (!visit(batch)) return;
    }
  }
}

BatchPlan BatchSampler::plan(int64_t epoch) const {
  if (streamed_) {
    BatchPlan all;
    for_each_batch(epoch, [&](const std::vector<uint32_t>& b) {
      all.push_back(b);
      return true;
    });
    return all;
  }
  const size_t n = n_;
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  Rng rng = Rng::from({options_.seed, uint64_t(epoch)});
  if (options_.shuffle) rng.shuffle(order);

  const size_t window = options_.sort_window > 0 ? size_t(options_.sort_window) : std::max<size_t>(n, 1);
  BatchPlan batches;
  for (size_t w = 0; w < n; w += window) {
    sort_and_cut(
        order.begin() + ptrdiff_t(w), order.begin() + ptrdiff_t(std::min(n, w + window)), options_.max_tokens,
        [&](uint32_t i) {
          return std::pair{src_len_[i], tgt_len_[i]};
        },
        batches);
  }
  if (options_.shuffle) rng.shuffle(batches);
  return batches;
}

template <class Len>
void BatchSampler::add_padding(const std::vector<uint32_t>& batch, const Len& len, PaddingStats& s) {
  int64_t max_s = 0, max_t = 0;
  for (uint32_t i : batch) {
    const auto [ls, lt] = len(i);
    max_s = std::max<int64_t>(max_s, ls);
    max_t = std::max<int64_t>(max_t, lt);
    s.real_tokens += ls + lt;
  }
  const int64_t b = int64_t(batch.size());
  s.padded_slots += b * (max_s + max_t);
  s.max_batch_slots = std::max(s.max_batch_slots, b * std::max(max_s, max_t));
  s.examples += b;
  ++s.batches;
}

PaddingStats BatchSampler::padding(const BatchPlan& plan) const {
  PaddingStats s;
  for (const auto& batch : plan)
    add_padding(
        batch,
        [&](uint32_t i) {
          return std::pair{src_len(i), tgt_len(i)};
        },
        s);
  return s;
}

PaddingStats BatchSampler::padding(int64_t epoch) const {
  if (!streamed_) return padding(plan(epoch));
  // Each window's lengths as its plan read them: the corpus is not read again.
  PaddingStats s;
  for (size_t w = 0; w < windows(); ++w) window_plan(epoch, w, &s);
  return s;
}

const BatchPlan& BatchSampler::current_plan() {
  if (plan_epoch_ != position_.epoch) {
    plan_ = plan(position_.epoch);
    plan_epoch_ = position_.epoch;
  }
  return plan_;
}

size_t BatchSampler::epoch_batches() {
  if (!streamed_) return current_plan().size();
  if (counted_epoch_ != position_.epoch) {
    size_t count = 0;
    for (size_t w = 0; w < windows(); ++w) count += window_plan(position_.epoch, w).size();
    counted_ = count;
    counted_epoch_ = position_.epoch;
  }
  return counted_;
}

void BatchSampler::seek(int64_t epoch, int64_t index) {
  if (plan_epoch_ != epoch || index < window_first_) {
    plan_epoch_ = epoch;
    window_ = 0;
    window_first_ = 0;
    plan_ = window_plan(epoch, 0);
  }
  while (index - window_first_ >= int64_t(plan_.size()) && window_ + 1 < windows()) {
    window_first_ += int64_t(plan_.size());
    plan_ = window_plan(epoch, ++window_);
  }
  if (index - window_first_ > int64_t(plan_.size())) {
    throw Error("batch sampler: position " + std::to_string(index) + " is past the end of epoch " +
                std::to_string(epoch) + " (different data or batch settings?)");
  }
}

bool BatchSampler::next(std::vector<uint32_t>& indices) {
  if (streamed_) {
    seek(position_.epoch, position_.index);
    const int64_t local = position_.index - window_first_;
    if (local >= int64_t(plan_.size())) {
      position_ = {position_.epoch + 1, 0};
      return false;
    }
    indices = plan_[size_t(local)];
    ++position_.index;
    return true;
  }
  const BatchPlan& p = current_plan();
  if (position_.index >= int64_t(p.size())) {
    position_ = {position_.epoch + 1, 0};
    return false;
  }
  indices = p[size_t(position_.index++)];
  return true;
}

void BatchSampler::restore(BatchPosition position) {
  if (position.epoch < 1 || position.index < 0) throw Error("batch sampler: invalid position to restore");
  position_ = position;
  if (streamed_) {
    seek(position.epoch, position.index);
    return;
  }
  if (position_.index > int64_t(current_plan().size())) {
    throw Error("batch sampler: position " + std::to_string(position.index) + " is past the end of epoch " +
                std::to_string(position.epoch) + " (different data or batch settings?)");
  }
}

}  // namespace mtx::data
