// Multi-head attention: self-attention with one fused QKV projection (and an append-only K/V cache
// for incremental decoding), cross-attention with a fused KV projection of the encoder output.
// LibTorch >= 2.0 runs scaled_dot_product_attention; 1.x runs the explicit path (same numbers).
#pragma once

#include <torch/nn/cloneable.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <ostream>
#include <vector>

#include "mtx/config/config.h"
#include "mtx/model/linear.h"

namespace mtx::model {

// Whether this LibTorch has scaled_dot_product_attention.
bool sdpa_available();

// softmax(q k^T / sqrt(d) + mask) v; q [b, h, tq, hd], k/v [b, h, tk, hd], mask bool broadcastable
// to [b, h, tq, tk] (true = attend) or undefined. use_sdpa falls back to explicit when unavailable.
// With `weights`, the explicit path runs and the attention weights [b, h, tq, tk] (before dropout)
// are stored there (for pictures and inspection).
torch::Tensor attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const torch::Tensor& mask, double dropout, bool training, bool use_sdpa,
                        torch::Tensor* weights = nullptr);

struct AttentionOptions {
  AttentionOptions(int64_t d_model, int64_t heads) : d_model_(d_model), heads_(heads) {}
  TORCH_ARG(int64_t, d_model);
  TORCH_ARG(int64_t, heads);
  TORCH_ARG(double, dropout) = config::ModelConfig{}.attention_dropout;  // on the attention weights
  TORCH_ARG(bool, use_sdpa) = true;
};

// Self-attention K/V of the steps decoded so far: [batch, heads, steps, head_dim] each (or the encoder
// memory's projected K/V: [sentences, heads, src_len, head_dim]).
struct SelfKV {
  torch::Tensor k;
  torch::Tensor v;
  // The row of k/v that each row of the decoding state stands on ([rows] int64), when the search reordered the
  // rows (beams chosen). Self-attention: applied when the next step appends (one gathering copy instead of a
  // reorder and an append). Encoder memory: read through (beams share their sentence's memory, which never
  // moves). Undefined: row i is row i.
  torch::Tensor pending_rows;
  // Leading positions of k/v dropped at the next append (self-attention: positions no row attends to any more).
  int64_t pending_skip = 0;
  // Self-attention under continuous batching: per row (after the pending reorder and skip), its sentence's first
  // position; the positions before it are masked, and the next append need not copy them. Empty: every row's
  // first position is 0.
  std::vector<int64_t> starts;
  // Composes with a pending reorder. With `fresh` ([n] int64): rows `rows` .. rows + n of `indices` name rows
  // that joined the state (continuous batching), reading rows `fresh` of k/v, or -1: a row with nothing cached
  // (zeros, to be masked). `rows`: the state's rows before the reorder.
  void reorder(const torch::Tensor& indices, int64_t rows = -1, const torch::Tensor& fresh = torch::Tensor());
};

// Cloneable (reset() builds the projections, as the constructor does; clone() is a deep copy).
class SelfAttentionImpl : public torch::nn::Cloneable<SelfAttentionImpl> {
 public:
  explicit SelfAttentionImpl(const AttentionOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  // x [b, t, d], mask [b|1, 1, t, t] -> [b, t, d]. With `cache`, x holds the new step(s) only: their
  // K/V are appended and the queries attend to everything cached (mask may then be undefined).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask, SelfKV* cache = nullptr);

  AttentionOptions options;
  bool keep_weights = false;  // store each forward's attention weights in `weights` [b, h, tq, tk]
  torch::Tensor weights;
  Linear qkv{nullptr};  // d -> 3d
  Linear out{nullptr};  // d -> d

 private:
  // forward's one step with a cache at CPU float inference, q/k/v read in place (the same numbers).
  torch::Tensor step_cpu(const torch::Tensor& x, const torch::Tensor& mask, SelfKV& cache);
};
TORCH_MODULE(SelfAttention);

// Cloneable (reset() builds the projections, as the constructor does; clone() is a deep copy).
class CrossAttentionImpl : public torch::nn::Cloneable<CrossAttentionImpl> {
 public:
  explicit CrossAttentionImpl(const AttentionOptions& options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;
  // Encoder output [b, s, d] -> K, V [b, h, s, hd]: computed once per batch when decoding.
  SelfKV project_memory(const torch::Tensor& memory);
  // x [b, t, d] attends to projected memory; mask [b, 1, 1, s] -> [b, t, d].
  // mask [memory rows|1, 1, 1, s]; rows of x read memory (and mask) rows memory.pending_rows when defined.
  // With `weights_out`, the explicit path runs and this call's attention weights [b, h, t, s] are stored there
  // (without touching the module's state, so that other threads may decode with it meanwhile).
  torch::Tensor forward(const torch::Tensor& x, const SelfKV& memory, const torch::Tensor& mask,
                        torch::Tensor* weights_out = nullptr);

  AttentionOptions options;
  bool keep_weights = false;  // as SelfAttention's
  torch::Tensor weights;
  Linear q{nullptr};   // d -> d
  Linear kv{nullptr};  // d -> 2d
  Linear out{nullptr};
};
TORCH_MODULE(CrossAttention);

}  // namespace mtx::model
