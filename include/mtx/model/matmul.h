// Batched matrix multiply for attention, parallel over the batch on CPU.
//
// LibTorch 1.13's CPU bmm multiplies the small per-head matrices of attention (e.g. [17 x 32] x [32 x 17])
// one after another on a single core. batched_matmul splits the batch across torch's intra-op threads (each
// thread runs the same bmm kernel on its slice, so results are bitwise those of torch::matmul) and does
// the same in its backward. Elsewhere (CUDA, other dtypes, tiny batches) it is torch::matmul.
#pragma once

#include <torch/types.h>

namespace mtx::model {

// a [..., m, k] x b [..., k, n] -> [..., m, n] with identical leading (batch) dims. Differentiable.
torch::Tensor batched_matmul(const torch::Tensor& a, const torch::Tensor& b);

}  // namespace mtx::model
