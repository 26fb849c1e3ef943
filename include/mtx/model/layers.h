// Transformer building blocks: positions (sinusoidal or learned), the feed-forward block, and
// encoder/decoder layers in post-norm (Vaswani, the PyTorch seq2seq tutorial) or pre-norm
// (Annotated Transformer) arrangement.
#pragma once

#include <torch/nn/cloneable.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include <ostream>

#include "mtx/config/config.h"
#include "mtx/model/attention.h"
#include "mtx/model/linear.h"

namespace mtx::model {

// The defaults are config::ModelConfig's, as TransformerOptions' are.
struct LayerOptions {
  LayerOptions(int64_t d_model, int64_t heads, int64_t ffn_dim) : d_model_(d_model), heads_(heads), ffn_dim_(ffn_dim) {}
  TORCH_ARG(int64_t, d_model);
  TORCH_ARG(int64_t, heads);
  TORCH_ARG(int64_t, ffn_dim);
  TORCH_ARG(double, dropout) = config::ModelConfig{}.dropout;                        // on each residual branch
  TORCH_ARG(double, attention_dropout) = config::ModelConfig{}.attention_dropout;    // on attention weights
  TORCH_ARG(double, activation_dropout) = config::ModelConfig{}.activation_dropout;  // after the FFN activation
  TORCH_ARG(bool, pre_norm) = config::ModelConfig{}.norm == config::Norm::pre;
  TORCH_ARG(config::Activation, activation) = config::ModelConfig{}.activation;  // of the feed-forward block
  TORCH_ARG(double, layer_norm_eps) = config::ModelConfig{}.layer_norm_eps;
  TORCH_ARG(bool, use_sdpa) = true;
};

// Each module below is Cloneable, as LibTorch's are: reset() builds its parameters, buffers and submodules
// (what the constructor does, drawing the same random numbers), so that clone() is a deep copy.

// Adds position information to [b, t, d] embeddings starting at position `offset`. Position p reads row
// p + row_offset of a table of max_len + row_offset rows (model.position_offset).
class PositionalEncodingImpl : public torch::nn::Cloneable<PositionalEncodingImpl> {
 public:
  PositionalEncodingImpl(int64_t max_len, int64_t d_model, config::Positions kind, int64_t row_offset = 0);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  torch::Tensor forward(const torch::Tensor& x, int64_t offset = 0);
  // x [b, 1, d], positions [b] int64: row i at positions[i] (rows of a decode that joined at different steps).
  torch::Tensor forward_rows(const torch::Tensor& x, const torch::Tensor& positions);
  int64_t max_len;
  int64_t d_model;
  config::Positions kind;
  int64_t row_offset = 0;
  torch::Tensor table;                      // sinusoidal: [max_len + row_offset, d] buffer
  torch::nn::Embedding embedding{nullptr};  // learned: [max_len + row_offset, d]
};
TORCH_MODULE(PositionalEncoding);

class FeedForwardImpl : public torch::nn::Cloneable<FeedForwardImpl> {
 public:
  explicit FeedForwardImpl(const LayerOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  torch::Tensor forward(const torch::Tensor& x);  // [b, t, d] -> [b, t, d]
  LayerOptions options;
  Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(FeedForward);

class EncoderLayerImpl : public torch::nn::Cloneable<EncoderLayerImpl> {
 public:
  explicit EncoderLayerImpl(const LayerOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  // x [b, s, d], mask [b, 1, 1, s] (or causal [b|1, 1, s, s]) -> [b, s, d]. With `cache` (a decoder-only
  // language model generating), x holds the new step(s): their K/V are appended, as in DecoderLayer.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask, SelfKV* cache = nullptr);
  LayerOptions options;
  SelfAttention self_attn{nullptr};
  FeedForward ffn{nullptr};
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
};
TORCH_MODULE(EncoderLayer);

// Per-layer decoding state: cached self-attention K/V and the projected encoder output.
struct DecoderLayerCache {
  SelfKV self;
  SelfKV memory;
};

class DecoderLayerImpl : public torch::nn::Cloneable<DecoderLayerImpl> {
 public:
  explicit DecoderLayerImpl(const LayerOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  // Teacher-forced: x [b, t, d], self_mask [b, 1, t, t], memory_kv projected encoder output,
  // memory_mask [b, 1, 1, s] -> [b, t, d]. With `cache`, x is the new step and K/V are appended.
  // `cross_weights`: as CrossAttention::forward's weights_out.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& self_mask, const SelfKV& memory_kv,
                        const torch::Tensor& memory_mask, SelfKV* cache = nullptr,
                        torch::Tensor* cross_weights = nullptr);
  LayerOptions options;
  SelfAttention self_attn{nullptr};
  CrossAttention cross_attn{nullptr};
  FeedForward ffn{nullptr};
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr}, norm3{nullptr};
};
TORCH_MODULE(DecoderLayer);

}  // namespace mtx::model
