#include "mtx/train/loss.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

using mtx::train::label_smoothed_loss;

TEST(Loss, MatchesAHandComputation) {
  // One sentence of two real tokens and one pad, vocabulary of 3.
  const torch::Tensor logits = torch::tensor({1.0, 2.0, 0.5, 0.0, 0.0, 3.0, 9.0, 9.0, 9.0}).view({1, 3, 3});
  const torch::Tensor target = torch::tensor({1, 2, 0}, torch::kLong).view({1, 3});  // pad = 0
  const double eps = 0.1;
  auto logsumexp = [](double a, double b, double c) { return std::log(std::exp(a) + std::exp(b) + std::exp(c)); };
  const double z0 = logsumexp(1.0, 2.0, 0.5), z1 = logsumexp(0.0, 0.0, 3.0);
  const double nll = (z0 - 2.0) + (z1 - 3.0);
  const double uniform = ((z0 - 1.0) + (z0 - 2.0) + (z0 - 0.5)) / 3 + ((z1 - 0.0) + (z1 - 0.0) + (z1 - 3.0)) / 3;
  const auto t = label_smoothed_loss(logits, target, 0, eps);
  EXPECT_EQ(t.tokens, 2);
  EXPECT_NEAR(t.nll_sum.item<double>(), nll, 1e-5);
  EXPECT_NEAR(t.smoothed_sum.item<double>(), (1 - eps) * nll + eps * uniform, 1e-5);
}

TEST(Loss, AgreesWithTorchCrossEntropyPerToken) {
  torch::manual_seed(1);
  const torch::Tensor logits = torch::randn({3, 5, 11});
  torch::Tensor target = torch::randint(1, 11, {3, 5}, torch::kLong);
  target[0][4] = 0;
  target[2][3] = 0;
  target[2][4] = 0;
  const auto t = label_smoothed_loss(logits, target, 0, 0.1);
  const torch::Tensor ref = torch::nn::functional::cross_entropy(
      logits.view({15, 11}), target.view({15}),
      torch::nn::functional::CrossEntropyFuncOptions().ignore_index(0).label_smoothing(0.1));
  EXPECT_EQ(t.tokens, 12);
  EXPECT_NEAR(t.smoothed_sum.item<double>() / double(t.tokens), ref.item<double>(), 1e-5)
      << "averaged per target token, padding ignored";
}

TEST(Loss, OwnBackwardEqualsAutogradOfTheDefinition) {
  torch::manual_seed(2);
  const torch::Tensor x = torch::randn({7, 13}, torch::requires_grad());
  const torch::Tensor target = torch::randint(0, 13, {7}, torch::kLong);
  for (const double eps : {0.0, 0.1, 0.3}) {
    const auto t = mtx::train::token_loss(x, target, eps);
    const torch::Tensor g = torch::autograd::grad({t.smoothed_sum * 0.37}, {x})[0];
    // The definition, differentiated by autograd.
    const torch::Tensor y = x.detach().clone().requires_grad_(true);
    const torch::Tensor logp = torch::log_softmax(y, -1);
    const torch::Tensor ref = ((1 - eps) * -logp.gather(1, target.unsqueeze(1)).squeeze(1) - eps * logp.mean(-1)).sum();
    const torch::Tensor g_ref = torch::autograd::grad({ref * 0.37}, {y})[0];
    EXPECT_NEAR(t.smoothed_sum.item<double>(), ref.item<double>(), 1e-4) << "eps " << eps;
    EXPECT_TRUE(torch::allclose(g, g_ref, 1e-5, 1e-6)) << "eps " << eps << "\n" << (g - g_ref).abs().max();
    EXPECT_NEAR(t.nll_sum.item<double>(), -logp.gather(1, target.unsqueeze(1)).sum().item<double>(), 1e-4);
    EXPECT_FALSE(t.nll_sum.requires_grad());
  }
}
