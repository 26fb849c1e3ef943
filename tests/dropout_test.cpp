#include "mtx/model/dropout.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

using mtx::model::dropout_mask;

TEST(Dropout, KeepsTheRightShareScaledAndIsIdentityWhenOff) {
  const torch::Tensor x = torch::ones({1000, 100});
  torch::manual_seed(3);
  const torch::Tensor y = mtx::model::dropout(x, 0.1, true);
  const double kept = y.ne(0).to(torch::kDouble).mean().item<double>();
  EXPECT_NEAR(kept, 0.9, 0.005);
  EXPECT_TRUE(torch::equal(y.masked_select(y.ne(0)), torch::full({y.ne(0).sum().item<int64_t>()}, 1 / 0.9f)));
  EXPECT_NEAR(y.mean().item<double>(), 1.0, 0.01) << "expectation preserved";
  EXPECT_TRUE(mtx::model::dropout(x, 0.1, false).is_same(x));
  EXPECT_TRUE(mtx::model::dropout(x, 0.0, true).is_same(x));
}

TEST(Dropout, FollowsTorchSeedAndNotTheThreadCount) {
  const int threads = at::get_num_threads();
  const torch::Tensor x = torch::randn({1000, 257});  // 257k elements: 8 chunks of 32k, several per thread
  std::vector<torch::Tensor> masks;
  for (const int n : {1, 2, 4}) {
    at::set_num_threads(n);
    ASSERT_EQ(at::get_num_threads(), n);
    torch::manual_seed(7);
    masks.push_back(mtx::model::dropout(x, 0.3, true));
  }
  at::set_num_threads(threads);
  EXPECT_TRUE(torch::equal(masks[0], masks[1])) << "1 vs 2 threads: same seed, same mask";
  EXPECT_TRUE(torch::equal(masks[0], masks[2])) << "1 vs 4 threads: same seed, same mask";
  torch::manual_seed(7);
  const torch::Tensor a = mtx::model::dropout(x, 0.3, true);
  const torch::Tensor a2 = mtx::model::dropout(x, 0.3, true);
  EXPECT_TRUE(torch::equal(a, masks[0]));
  EXPECT_FALSE(torch::equal(a, a2)) << "each call draws a new mask";
  // The mask is a function of (seed, element index): another seed gives another mask, and an element's
  // fate does not depend on the tensor's size (how the work was cut into chunks).
  EXPECT_FALSE(torch::equal(dropout_mask({64, 64}, 0.5, 42), dropout_mask({64, 64}, 0.5, 43)));
  EXPECT_TRUE(torch::equal(dropout_mask({200000}, 0.5, 42).slice(0, 0, 1000), dropout_mask({1000}, 0.5, 42)));
}

TEST(Dropout, BackwardUsesTheSameMask) {
  torch::manual_seed(5);
  const torch::Tensor x = torch::randn({64, 32}, torch::requires_grad());
  const torch::Tensor y = mtx::model::dropout(x, 0.25, true);
  y.sum().backward();
  // d(sum y)/dx is the scaled mask: zero exactly where y dropped x.
  EXPECT_TRUE(torch::equal(x.grad().eq(0), y.eq(0) & x.ne(0)));
  EXPECT_TRUE(torch::allclose(x.grad().masked_select(x.grad().ne(0)), torch::full({1}, 1 / 0.75f)));
}
