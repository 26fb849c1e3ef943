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
  TORCH_ARG(bool, ssru) = false;  // decoder layers: Marian's SSRU in place of self-attention (model.decoder_autoreg)
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

// Marian's simpler simple recurrent unit (Kim et al. 2019), a decoder layer's autoregressive block in place of
// self-attention: f_t = sigmoid(x_t W_f + b_f), c_t = f_t * c_(t-1) + (1 - f_t) * x_t W, output relu(c_t), c_0 = 0.
// W and W_f are one projection d -> 2d (`proj`: W's rows first; Marian's W has no bias, an import sets that half
// of the bias to 0).
class SsruImpl : public torch::nn::Cloneable<SsruImpl> {
 public:
  explicit SsruImpl(int64_t d_model);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  // x [b, t, d] -> [b, t, d], from c_0 = 0. With `cache`, x holds the new step(s) of each row and the state
  // carries on: cache->k holds each row's c [rows, d] (undefined before the first step); the cache's pending
  // reorder (SelfKV::pending_rows) picks each row's state, and a row that joined (-1) starts from 0.
  torch::Tensor forward(const torch::Tensor& x, SelfKV* cache = nullptr);
  int64_t d_model;
  Linear proj{nullptr};  // d -> 2d
};
TORCH_MODULE(Ssru);

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
  SelfAttention self_attn{nullptr};  // null with options.ssru()
  Ssru ssru{nullptr};                // options.ssru() only
  CrossAttention cross_attn{nullptr};
  FeedForward ffn{nullptr};
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr}, norm3{nullptr};
};
TORCH_MODULE(DecoderLayer);

}  // namespace mtx::model
