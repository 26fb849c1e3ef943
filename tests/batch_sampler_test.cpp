#include "mtx/data/batch_sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "mtx/data/batch.h"
#include "mtx/util/errors.h"
#include "mtx/util/random.h"

namespace data = mtx::data;

namespace {

// A corpus of n pairs with varied lengths (1..60 source, roughly proportional target).
data::EncodedCorpus synthetic_corpus(size_t n, uint64_t seed = 3) {
  mtx::Rng rng(seed);
  data::EncodedCorpus c;
  for (size_t i = 0; i < n; ++i) {
    const int64_t ls = 1 + int64_t(rng.below(60));
    const int64_t lt = std::max<int64_t>(1, ls + int64_t(rng.below(9)) - 4);
    std::vector<int32_t> s(static_cast<size_t>(ls)), t(static_cast<size_t>(lt));
    for (auto& x : s) x = int32_t(4 + rng.below(100));
    for (auto& x : t) x = int32_t(4 + rng.below(100));
    c.src.push_back(s);
    c.tgt.push_back(t);
  }
  return c;
}

data::BatchSamplerOptions options(int64_t max_tokens, uint64_t seed = 1, int64_t window = 0) {
  data::BatchSamplerOptions o;
  o.max_tokens = max_tokens;
  o.seed = seed;
  o.sort_window = window;
  return o;
}

}  // namespace

TEST(BatchSampler, EveryExampleOncePerEpochWithinTheBudget) {
  const auto corpus = synthetic_corpus(2000);
  for (int64_t window : {0, 300}) {
    const data::BatchSampler b = data::BatchSampler::for_corpus(corpus, options(1000, 1, window));
    const data::BatchPlan plan = b.plan(1);
    std::vector<int> seen(corpus.size(), 0);
    for (const auto& batch : plan) {
      ASSERT_FALSE(batch.empty());
      size_t longest = 0;
      for (uint32_t i : batch) {
        ++seen[i];
        longest = std::max({longest, corpus.src.length(i) + 1, corpus.tgt.length(i) + 1});
      }
      EXPECT_LE(batch.size() * longest, 1000u) << "budget counts padding";
    }
    for (int s : seen) EXPECT_EQ(s, 1);
    const data::PaddingStats pad = b.padding(plan);
    EXPECT_EQ(pad.examples, 2000);
    EXPECT_LE(pad.max_batch_slots, 1000);
    EXPECT_GT(pad.efficiency(), 0.8) << "sorting by length keeps padding low";
  }
}

TEST(BatchSampler, OversizedExampleGetsABatchOfItsOwn) {
  data::BatchSampler b({5, 500, 5}, {5, 400, 5}, options(100));
  const auto plan = b.plan(1);
  size_t singletons_with_long = 0;
  for (const auto& batch : plan) {
    if (std::find(batch.begin(), batch.end(), 1u) != batch.end()) {
      EXPECT_EQ(batch.size(), 1u);
      ++singletons_with_long;
    }
  }
  EXPECT_EQ(singletons_with_long, 1u);
}

TEST(BatchSampler, DeterministicForSeedAndEpoch) {
  const auto corpus = synthetic_corpus(1000);
  const data::BatchSampler a = data::BatchSampler::for_corpus(corpus, options(800, 5));
  const data::BatchSampler b = data::BatchSampler::for_corpus(corpus, options(800, 5));
  const data::BatchSampler c = data::BatchSampler::for_corpus(corpus, options(800, 6));
  EXPECT_EQ(a.plan(1), b.plan(1));
  EXPECT_EQ(a.plan(2), b.plan(2));
  EXPECT_NE(a.plan(1), a.plan(2)) << "each epoch is shuffled differently";
  EXPECT_NE(a.plan(1), c.plan(1)) << "the seed changes the order";
}

TEST(BatchSampler, NextWalksEpochsAndRestoresPositionExactly) {
  const auto corpus = synthetic_corpus(500);
  data::BatchSampler a = data::BatchSampler::for_corpus(corpus, options(600, 9));
  const size_t per_epoch = a.plan(1).size();
  std::vector<uint32_t> idx;
  size_t n = 0;
  while (a.next(idx)) ++n;
  EXPECT_EQ(n, per_epoch);
  EXPECT_EQ(a.position(), (data::BatchPosition{2, 0}));

  // Take a few batches of epoch 2, save the position, continue; a restored sampler continues identically.
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(a.next(idx));
  const data::BatchPosition saved = a.position();
  EXPECT_EQ(saved, (data::BatchPosition{2, 5}));
  std::vector<std::vector<uint32_t>> rest_a, rest_b;
  while (a.next(idx)) rest_a.push_back(idx);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(a.next(idx));
    rest_a.push_back(idx);
  }

  data::BatchSampler b = data::BatchSampler::for_corpus(corpus, options(600, 9));
  b.restore(saved);
  while (b.next(idx)) rest_b.push_back(idx);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(b.next(idx));
    rest_b.push_back(idx);
  }
  EXPECT_EQ(rest_a, rest_b);
  EXPECT_THROW(b.restore({2, int64_t(per_epoch) + 10}), mtx::Error);
}

TEST(BatchSampler, EvaluationOrderIsSortedAndUnshuffled) {
  data::BatchSamplerOptions o = options(50);
  o.shuffle = false;
  data::BatchSampler b({3, 1, 2, 9}, {3, 1, 2, 9}, o);
  const auto plan = b.plan(1);
  std::vector<uint32_t> flat;
  for (const auto& batch : plan) flat.insert(flat.end(), batch.begin(), batch.end());
  EXPECT_EQ(flat, (std::vector<uint32_t>{1, 2, 0, 3}));
  EXPECT_EQ(b.plan(1), b.plan(2));
}

TEST(Batch, TensorsCarryShiftedTargetsAndPadding) {
  data::EncodedCorpus c;
  c.src.push_back(std::vector<int32_t>{10, 11, 12});
  c.tgt.push_back(std::vector<int32_t>{20, 21});
  c.src.push_back(std::vector<int32_t>{13});
  c.tgt.push_back(std::vector<int32_t>{22, 23, 24, 25});
  const mtx::tokenizer::SpecialIds ids;  // pad 0, unk 1, bos 2, eos 3
  const data::Batch b = data::make_batch(c, {1, 0}, ids);
  ASSERT_EQ(b.src.sizes(), (std::vector<int64_t>{2, 4}));
  ASSERT_EQ(b.tgt_in.sizes(), (std::vector<int64_t>{2, 5}));
  auto row = [](const torch::Tensor& t, int64_t r) {
    auto v = t[r].contiguous();
    return std::vector<int64_t>(v.data_ptr<int64_t>(), v.data_ptr<int64_t>() + v.numel());
  };
  EXPECT_EQ(row(b.src, 0), (std::vector<int64_t>{13, 3, 0, 0}));
  EXPECT_EQ(row(b.src, 1), (std::vector<int64_t>{10, 11, 12, 3}));
  EXPECT_EQ(row(b.tgt_in, 0), (std::vector<int64_t>{2, 22, 23, 24, 25}));
  EXPECT_EQ(row(b.tgt_out, 0), (std::vector<int64_t>{22, 23, 24, 25, 3}));
  EXPECT_EQ(row(b.tgt_in, 1), (std::vector<int64_t>{2, 20, 21, 0, 0}));
  EXPECT_EQ(row(b.tgt_out, 1), (std::vector<int64_t>{20, 21, 3, 0, 0}));
  auto values = [](const torch::Tensor& t) {
    auto v = t.contiguous();
    return std::vector<int64_t>(v.data_ptr<int64_t>(), v.data_ptr<int64_t>() + v.numel());
  };
  EXPECT_EQ(values(b.src_lengths), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(values(b.tgt_lengths), (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(b.src_tokens, 6);
  EXPECT_EQ(b.tgt_tokens, 8);
  EXPECT_EQ(b.indices, (std::vector<uint32_t>{1, 0}));
}

TEST(Permutation, IsABijectionFixedByItsKey) {
  for (uint64_t n : {1ull, 2ull, 3ull, 1000ull, 4097ull}) {
    const mtx::Permutation p(n, 42);
    std::vector<int> hits(n, 0);
    for (uint64_t i = 0; i < n; ++i) ++hits[p(i)];
    EXPECT_EQ(std::count(hits.begin(), hits.end(), 1), int64_t(n)) << n;
  }
  const mtx::Permutation a(1000, 1), b(1000, 1), c(1000, 2);
  size_t same_as_b = 0, same_as_c = 0, fixed = 0;
  for (uint64_t i = 0; i < 1000; ++i) {
    same_as_b += a(i) == b(i);
    same_as_c += a(i) == c(i);
    fixed += a(i) == i;
  }
  EXPECT_EQ(same_as_b, 1000u);
  EXPECT_LT(same_as_c, 20u) << "another key, another permutation";
  EXPECT_LT(fixed, 20u) << "it shuffles";
}

TEST(BatchSampler, StreamedPlansWindowByWindowAndResumesExactly) {
  const auto corpus = synthetic_corpus(2000);
  data::BatchSamplerOptions o = options(1000, 4);
  o.streamed_above = 450;  // windows of 450: the last one short
  data::BatchSampler a = data::BatchSampler::for_corpus(corpus, o);
  ASSERT_TRUE(a.streamed());
  const data::BatchPlan plan = a.plan(1);
  std::vector<int> seen(corpus.size(), 0);
  for (const auto& batch : plan) {
    size_t longest = 0;
    for (uint32_t i : batch) {
      ++seen[i];
      longest = std::max({longest, corpus.src.length(i) + 1, corpus.tgt.length(i) + 1});
    }
    EXPECT_LE(batch.size() * longest, 1000u);
  }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 2000) << "every example once per epoch";
  EXPECT_GT(a.padding(1).efficiency(), 0.8);
  EXPECT_EQ(a.padding(1).examples, 2000);
  EXPECT_EQ(a.epoch_batches(), plan.size());
  EXPECT_NE(a.plan(2), plan) << "each epoch is shuffled differently";
  EXPECT_EQ(data::BatchSampler::for_corpus(corpus, o).plan(1), plan) << "deterministic";
  // The first window's examples are a shuffle of the whole corpus, not its first 450.
  std::set<uint32_t> first_window;
  for (size_t b = 0, n = 0; n < 450 && b < plan.size(); ++b) {
    for (uint32_t i : plan[b]) first_window.insert(i), ++n;
  }
  EXPECT_GT(*first_window.rbegin(), 1500u);

  std::vector<uint32_t> idx;
  std::vector<std::vector<uint32_t>> walked;
  while (a.next(idx)) walked.push_back(idx);
  EXPECT_EQ(walked, plan);
  EXPECT_EQ(a.position(), (data::BatchPosition{2, 0}));
  // Restore to every position of epoch 2 in turn (window boundaries included): the rest is the same.
  const data::BatchPlan second = a.plan(2);
  for (size_t at = 0; at <= second.size(); at += 7) {
    data::BatchSampler b = data::BatchSampler::for_corpus(corpus, o);
    b.restore({2, int64_t(at)});
    std::vector<std::vector<uint32_t>> rest;
    while (b.next(idx)) rest.push_back(idx);
    EXPECT_EQ(rest, data::BatchPlan(second.begin() + ptrdiff_t(at), second.end())) << at;
    EXPECT_EQ(b.position(), (data::BatchPosition{3, 0}));
  }
  data::BatchSampler c = data::BatchSampler::for_corpus(corpus, o);
  EXPECT_THROW(c.restore({2, int64_t(second.size()) + 1}), mtx::Error);
}

TEST(BatchSampler, UpToTheStreamedSizeAnEpochIsPlannedWhole) {
  const auto corpus = synthetic_corpus(2000);
  data::BatchSamplerOptions o = options(1000, 4);
  o.streamed_above = 2000;
  const data::BatchSampler whole = data::BatchSampler::for_corpus(corpus, o);
  EXPECT_FALSE(whole.streamed());
  o.streamed_above = int64_t(1) << 20;
  EXPECT_EQ(data::BatchSampler::for_corpus(corpus, o).plan(1), whole.plan(1)) << "the default keeps whole-epoch plans";
}
