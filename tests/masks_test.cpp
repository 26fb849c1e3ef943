#include "mtx/model/masks.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>

using namespace mtx::model;

TEST(Masks, KeyPaddingMarksRealTokens) {
  const torch::Tensor tokens = torch::tensor({5, 6, 0, 7, 0, 0}, torch::kLong).view({2, 3});
  const torch::Tensor m = key_padding_mask(tokens, 0);
  ASSERT_EQ(m.sizes(), (std::vector<int64_t>{2, 1, 1, 3}));
  EXPECT_TRUE(torch::equal(m.view({2, 3}), torch::tensor({true, true, false, true, false, false}).view({2, 3})));
}

TEST(Masks, CausalIsLowerTriangular) {
  const torch::Tensor m = causal_mask(3, torch::TensorOptions()).view({3, 3});
  EXPECT_TRUE(torch::equal(m, torch::tensor({true, false, false, true, true, false, true, true, true}).view({3, 3})));
}

TEST(Masks, DecoderSelfMaskCombinesCausalAndPadding) {
  const torch::Tensor tokens = torch::tensor({2, 9, 0}, torch::kLong).view({1, 3});
  const torch::Tensor m = decoder_self_mask(tokens, 0).view({3, 3});
  EXPECT_TRUE(torch::equal(m, torch::tensor({true, false, false, true, true, false, true, true, false}).view({3, 3})));
}

TEST(Masks, MaskedScoresUseTheDtypesLowestAndSoftmaxIgnoresThem) {
  const torch::Tensor scores = torch::zeros({1, 1, 1, 3});
  const torch::Tensor mask = torch::tensor({true, false, true}).view({1, 1, 1, 3});
  const torch::Tensor filled = mask_scores(scores, mask);
  EXPECT_EQ(filled[0][0][0][1].item<float>(), std::numeric_limits<float>::lowest());
  const torch::Tensor p = torch::softmax(filled, -1).view({3});
  EXPECT_FLOAT_EQ(p[0].item<float>(), 0.5f);
  EXPECT_FLOAT_EQ(p[1].item<float>(), 0.0f);
  EXPECT_FALSE(torch::isnan(p).any().item<bool>());
  EXPECT_TRUE(torch::equal(mask_scores(scores, torch::Tensor()), scores));
}
