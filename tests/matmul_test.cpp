#include "mtx/model/matmul.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

TEST(BatchedMatmul, EqualsTorchMatmulBitwiseWithGradients) {
  const int threads = at::get_num_threads();
  at::set_num_threads(2);  // take the parallel path even on a 1-core machine
  torch::manual_seed(4);
  const torch::Tensor a = torch::randn({5, 8, 17, 32}, torch::requires_grad());
  const torch::Tensor b0 = torch::randn({5, 8, 19, 32}, torch::requires_grad());
  const torch::Tensor b = b0.transpose(-2, -1);              // a strided view, as attention passes k^T
  const torch::Tensor y = mtx::model::batched_matmul(a, b);  // [5, 8, 17, 19]
  const torch::Tensor g = torch::randn_like(y);
  const auto grads = torch::autograd::grad({y}, {a, b0}, {g});
  const torch::Tensor y_ref = torch::matmul(a, b);
  const auto ref = torch::autograd::grad({y_ref}, {a, b0}, {g});
  at::set_num_threads(threads);
  EXPECT_EQ(y.sizes(), y_ref.sizes());
  EXPECT_TRUE(torch::equal(y, y_ref));
  EXPECT_TRUE(torch::allclose(grads[0], ref[0], 1e-5, 1e-6));
  EXPECT_TRUE(torch::allclose(grads[1], ref[1], 1e-5, 1e-6));
}

TEST(BatchedMatmul, RejectsMismatchedShapes) {
  EXPECT_THROW(mtx::model::batched_matmul(torch::zeros({2, 3, 4}), torch::zeros({3, 4, 5})), c10::Error);
  EXPECT_THROW(mtx::model::batched_matmul(torch::zeros({8, 3, 4}), torch::zeros({8, 5, 5})), c10::Error);
}
