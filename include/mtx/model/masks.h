// The one place attention masks are built. Masks are boolean, true = "may attend" (the
// convention of scaled_dot_product_attention); the explicit path fills false with the dtype's lowest.
#pragma once

#include <torch/types.h>

namespace mtx::model {

// Keys that are not padding: tokens [batch, len] -> [batch, 1, 1, len].
torch::Tensor key_padding_mask(const torch::Tensor& tokens, int64_t pad_id);

// Lower-triangular causal mask: [1, 1, len, len], true on and below the diagonal.
torch::Tensor causal_mask(int64_t len, const torch::TensorOptions& options);

// Decoder self-attention: causal and not padding: tokens [batch, len] -> [batch, 1, len, len].
torch::Tensor decoder_self_mask(const torch::Tensor& tokens, int64_t pad_id);

// Applies a boolean mask to attention scores [batch, heads, q, k]: false -> the dtype's lowest value.
torch::Tensor mask_scores(const torch::Tensor& scores, const torch::Tensor& mask);

}  // namespace mtx::model
