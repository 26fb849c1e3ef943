// Dropout for training. On CPU, torch's bernoulli_ draws every mask element serially from one
// mt19937, on one core; mtx instead takes one 64-bit seed per call from torch's default CPU generator (so
// torch::manual_seed and the checkpointed RNG state still make runs exactly reproducible) and derives each element's
// keep/drop decision from a counter-based hash of (seed, element index), in parallel. The result does
// not depend on the thread count. Other devices use torch::dropout.
#pragma once

#include <torch/types.h>

namespace mtx::model {

// x with each element zeroed with probability p and the rest scaled by 1 / (1 - p); x itself when
// !training or p == 0. Differentiable (the backward multiplies by the same mask).
torch::Tensor dropout(const torch::Tensor& x, double p, bool training);

// The scaled keep mask dropout() multiplies by: values 0 or 1 / (1 - p), shape `sizes`, dtype float,
// from `seed` alone. Exposed for tests.
torch::Tensor dropout_mask(at::IntArrayRef sizes, double p, uint64_t seed);

}  // namespace mtx::model
