#include "mtx/model/attention.h"

#include <torch/torch.h>
#include <torch/version.h>

#include <cmath>

#include "mtx/model/dropout.h"
#include "mtx/model/masks.h"
#include "mtx/model/matmul.h"

namespace mtx::model {
namespace {

// [b, t, d] -> [b, h, t, d/h]
torch::Tensor split_heads(const torch::Tensor& x, int64_t heads) {
  const int64_t b = x.size(0), t = x.size(1), d = x.size(2);
  return x.view({b, t, heads, d / heads}).transpose(1, 2);
}

// [b, h, t, hd] -> [b, t, h*hd]
torch::Tensor merge_heads(const torch::Tensor& x) {
  const int64_t b = x.size(0), h = x.size(1), t = x.size(2), hd = x.size(3);
  return x.transpose(1, 2).reshape({b, t, h * hd});
}

}  // namespace

bool sdpa_available() {
#if TORCH_VERSION_MAJOR >= 2
  return true;
#else
  return false;
#endif
}

torch::Tensor attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const torch::Tensor& mask, double dropout_p, bool training, bool use_sdpa,
                        torch::Tensor* weights_out) {
  const double p = training ? dropout_p : 0.0;
#if TORCH_VERSION_MAJOR >= 2
  if (use_sdpa && !weights_out) {
    return at::scaled_dot_product_attention(q, k, v, mask.defined() ? c10::optional<torch::Tensor>(mask) : c10::nullopt,
                                            p, false);  // [b, h, tq, hd]
  }
#else
  (void)use_sdpa;
#endif
  const double scale = 1.0 / std::sqrt(double(q.size(-1)));
  torch::Tensor scores = batched_matmul(q, k.transpose(-2, -1)) * scale;  // [b, h, tq, tk]
  scores = mask_scores(scores, mask);
  torch::Tensor weights = torch::softmax(scores, -1);  // [b, h, tq, tk]
  if (weights_out) *weights_out = weights.detach();
  if (p > 0) weights = model::dropout(weights, p, true);
  return batched_matmul(weights, v);  // [b, h, tq, hd]
}

SelfAttentionImpl::SelfAttentionImpl(const AttentionOptions& o) : options(o) {
  TORCH_CHECK(o.d_model() % o.heads() == 0, "d_model ", o.d_model(), " is not divisible by heads ", o.heads());
  qkv = register_module("qkv", Linear(o.d_model(), 3 * o.d_model()));
  out = register_module("out", Linear(o.d_model(), o.d_model()));
}

torch::Tensor SelfAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& mask, SelfKV* cache) {
  const auto parts = qkv->forward(x).chunk(3, -1);  // 3 x [b, t, d]
  torch::Tensor q = split_heads(parts[0], options.heads());  // [b, h, t, hd]
  torch::Tensor k = split_heads(parts[1], options.heads());  // [b, h, t, hd]
  torch::Tensor v = split_heads(parts[2], options.heads());  // [b, h, t, hd]
  if (cache) {
    if (cache->k.defined()) {
      k = torch::cat({cache->k, k}, 2);  // [b, h, steps, hd]
      v = torch::cat({cache->v, v}, 2);
    }
    cache->k = k;
    cache->v = v;
  }
  const torch::Tensor y = attention(q, k, v, mask, options.dropout(), is_training(), options.use_sdpa(),
                                    keep_weights ? &weights : nullptr);  // [b, h, t, hd]
  return out->forward(merge_heads(y));  // [b, t, d]
}

CrossAttentionImpl::CrossAttentionImpl(const AttentionOptions& o) : options(o) {
  TORCH_CHECK(o.d_model() % o.heads() == 0, "d_model ", o.d_model(), " is not divisible by heads ", o.heads());
  q = register_module("q", Linear(o.d_model(), o.d_model()));
  kv = register_module("kv", Linear(o.d_model(), 2 * o.d_model()));
  out = register_module("out", Linear(o.d_model(), o.d_model()));
}

SelfKV CrossAttentionImpl::project_memory(const torch::Tensor& memory) {
  const auto parts = kv->forward(memory).chunk(2, -1);  // 2 x [b, s, d]
  return {split_heads(parts[0], options.heads()), split_heads(parts[1], options.heads())};  // [b, h, s, hd]
}

torch::Tensor CrossAttentionImpl::forward(const torch::Tensor& x, const SelfKV& memory, const torch::Tensor& mask) {
  const torch::Tensor queries = split_heads(q->forward(x), options.heads());  // [b, h, t, hd]
  const torch::Tensor y = attention(queries, memory.k, memory.v, mask, options.dropout(), is_training(),
                                    options.use_sdpa(), keep_weights ? &weights : nullptr);  // [b, h, t, hd]
  return out->forward(merge_heads(y));  // [b, t, d]
}

}  // namespace mtx::model
