// The encoder-decoder Transformer (Options / Impl / TORCH_MODULE), or with decoder_only the LM tutorial's
// causal language model built of the same layers. Offers the teacher-forced pass for training and one
// incremental step over a cache for search and sampling (which live in decode/).
#pragma once

#include <torch/nn/cloneable.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>

#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>
#include <functional>
#include <string>

#include <memory>
#include <ostream>
#include <vector>

#include "mtx/config/config.h"
#include "mtx/model/layers.h"
#include "mtx/model/linear.h"

namespace mtx::model {

// Each default is config::ModelConfig's (the task's: translation), written once in config/config.h; the
// vocabulary sizes and pad_id come from the tokenizer. options_from_config(ModelConfig{}, src, tgt, 0) equals
// TransformerOptions(src, tgt) field by field.
struct TransformerOptions {
  TransformerOptions(int64_t src_vocab, int64_t tgt_vocab)
      : src_vocab_(src_vocab),
        tgt_vocab_(tgt_vocab),
        share_embeddings_(config::ModelConfig{}.share_embeddings && src_vocab == tgt_vocab) {}
  TORCH_ARG(int64_t, src_vocab);
  TORCH_ARG(int64_t, tgt_vocab);
  TORCH_ARG(int64_t, d_model) = config::ModelConfig{}.d_model;
  TORCH_ARG(int64_t, heads) = config::ModelConfig{}.heads;
  TORCH_ARG(int64_t, encoder_layers) = config::ModelConfig{}.encoder_layers;
  TORCH_ARG(int64_t, decoder_layers) = config::ModelConfig{}.decoder_layers;
  TORCH_ARG(int64_t, ffn_dim) = config::ModelConfig{}.ffn_dim;
  TORCH_ARG(double, dropout) = config::ModelConfig{}.dropout;
  TORCH_ARG(double, attention_dropout) = config::ModelConfig{}.attention_dropout;
  TORCH_ARG(double, activation_dropout) = config::ModelConfig{}.activation_dropout;
  TORCH_ARG(int64_t, max_len) = config::ModelConfig{}.max_len;
  // pre-norm with final LayerNorms; false: post-norm
  TORCH_ARG(bool, pre_norm) = config::ModelConfig{}.norm == config::Norm::pre;
  // false: sinusoidal
  TORCH_ARG(config::Positions, positions) = config::ModelConfig{}.positions;
  TORCH_ARG(config::Activation, activation) = config::ModelConfig{}.activation;
  TORCH_ARG(double, layer_norm_eps) = config::ModelConfig{}.layer_norm_eps;
  TORCH_ARG(bool, scale_embeddings) = config::ModelConfig{}.scale_embeddings;
  TORCH_ARG(bool, embedding_norm) = config::ModelConfig{}.embedding_norm;
  TORCH_ARG(int64_t, position_offset) = config::ModelConfig{}.position_offset;
  TORCH_ARG(bool, share_positions) = config::ModelConfig{}.share_positions;
  TORCH_ARG(bool, ssru) = config::ModelConfig{}.decoder_autoreg == config::DecoderAutoreg::ssru;  // decoder
  // false: xavier-uniform (or uniform_embeddings)
  TORCH_ARG(bool, kaiming_init) = config::ModelConfig{}.init == config::Init::kaiming;
  // embeddings and output U(-0.1, 0.1), output bias 0, the other matrices xavier (LM tutorial)
  TORCH_ARG(bool, uniform_embeddings) = config::ModelConfig{}.init == config::Init::uniform;
  // A language model: encoder layers under a causal mask over tgt_embed (no source side, no decoder
  // stack, no cross-attention); the tutorial's TransformerEncoder with its square subsequent mask.
  TORCH_ARG(bool, decoder_only) = config::Config{}.task == config::Task::lm;
  TORCH_ARG(bool, tie_output) = config::ModelConfig{}.tie_output;    // output projection = target embedding
  TORCH_ARG(bool, output_bias) = config::ModelConfig{}.output_bias;  // the tied projection's bias [tgt_vocab]
  // One embedding for source and target; needs src_vocab == tgt_vocab. Default: the config's where the two
  // vocabularies are one size (a joint vocabulary), false otherwise -- as options_from_config decides.
  TORCH_ARG(bool, share_embeddings);
  TORCH_ARG(int64_t, pad_id) = 0;
  TORCH_ARG(bool, use_sdpa) = true;  // scaled_dot_product_attention when LibTorch has it
};

// Builds options from the config section and the tokenizer's vocabulary sizes (task lm: decoder-only).
TransformerOptions options_from_config(const config::ModelConfig& config, int64_t src_vocab, int64_t tgt_vocab,
                                       int64_t pad_id, config::Task task = config::Task::translation);

// Attention weights of one teacher-forced pass, per layer [heads, query, key] (batch row 0).
struct AttentionMaps {
  std::vector<torch::Tensor> encoder_self;  // [h, s, s] each (decoder-only: the causal self-attention)
  std::vector<torch::Tensor> decoder_self;  // [h, t, t]; empty for an SSRU decoder
  std::vector<torch::Tensor> cross;         // [h, t, s]
};

// What the encoder hands the decoder.
struct Memory {
  torch::Tensor states;  // [batch, src_len, d_model]
  torch::Tensor mask;    // [batch, 1, 1, src_len] bool, true = real token
};

// Incremental decoding state for a batch of hypotheses.
struct DecoderCache {
  std::vector<DecoderLayerCache> layers;
  // [batch, 1, 1, src_len] (undefined for a decoder-only model). On the CPU it keeps one row per sentence of
  // the encoded batch, as the memory's K/V do, and each layer's memory.pending_rows maps state rows to them.
  torch::Tensor memory_mask;
  int64_t steps = 0;  // positions in the self-attention cache: target positions decoded so far
  int64_t rows = 0;   // rows of the state (after the last reorder)
  // Continuous batching (TransformerImpl::join_decoding): sentences joined since the last reorder, and per row
  // the cache position its sentence started at (empty: every row at 0). A row attends to its own positions only
  // and counts its target positions from its start, so that it decodes as it would alone.
  int64_t joining = 0;
  std::vector<int64_t> starts;
  // keep_attention: each step leaves in `attention` its rows' cross-attention of the last decoder layer, averaged
  // over heads, [rows, src_len] float (a search's return_attention). keep_layers_attention: in
  // `layers_attention` the same averaged over every decoder layer too (what source-tied terms read: the layers
  // together align words better than any one). The step's outputs are the same either way.
  bool keep_attention = false, keep_layers_attention = false;
  torch::Tensor attention, layers_attention;
  // Keeps the rows `indices` ([new_batch] int64), e.g. the beams chosen this step; index rows + i is the fresh
  // row of the i-th sentence joined since the last reorder. same_memory: every row keeps the encoder memory it
  // had (beams reselected within their sentences, none joined), so it need not move.
  void reorder(const torch::Tensor& indices, bool same_memory = false);
};

// Cloneable, as LibTorch's modules are: clone() is a deep copy -- parameters, buffers and submodules of its own,
// its embeddings shared within it where the original's are -- and not packed (pack_fp32() it to use mtx's float
// kernel). It leaves LibTorch's CPU generator as it found it (dropout and batch order draw from it). A model
// holding int8 weights refuses it: clone the float model, then quantize the copy.
class TransformerImpl : public torch::nn::Cloneable<TransformerImpl> {
 public:
  explicit TransformerImpl(const TransformerOptions& options);
  // A model to load weights into: the same modules, parameters and buffers, but every parameter a placeholder
  // of its shape (model::placeholder) that nothing initialises, so building it takes next to no memory.
  struct Unfilled {};
  TransformerImpl(const TransformerOptions& options, Unfilled);

  // Builds the submodules from `options` and initialises them (reset_parameters), drawing the same random
  // numbers in the same order for the same options. Run by the constructor, and by clone() on a copy whose
  // parameters, buffers and submodules it cleared (on a built model it throws: the names are taken).
  void reset() override;
  std::shared_ptr<torch::nn::Module> clone(const c10::optional<torch::Device>& device = c10::nullopt) const override;
  // "mtx::model::Transformer(src_vocab=.., tgt_vocab=.., d_model=.., ...)": every option.
  void pretty_print(std::ostream& stream) const override;

  Memory encode(const torch::Tensor& src);  // src [batch, src_len] -> memory
  // Teacher-forced decoder: tgt_in [batch, tgt_len] -> logits [batch, tgt_len, tgt_vocab].
  torch::Tensor decode(const torch::Tensor& tgt_in, const Memory& memory);
  torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& tgt_in);  // -> logits
  // Teacher-forced logits only where `positions` [batch, tgt_len] is true -> [n, tgt_vocab] (row-major
  // order): what forward() gives at those positions, without projecting padding onto the vocabulary.
  // Decoder-only: src is undefined and tgt_in holds the input tokens.
  torch::Tensor logits_at(const torch::Tensor& src, const torch::Tensor& tgt_in, const torch::Tensor& positions);
  // The decoder's output before the vocabulary projection: [batch, tgt_len, d_model].
  torch::Tensor decode_hidden(const torch::Tensor& tgt_in, const Memory& memory);
  // The cross-attention weights of one teacher-forced pass in eval mode, per decoder layer [b, h, t, s]. It
  // changes nothing in the model (unlike attention_maps), so other threads may decode with it meanwhile.
  std::vector<torch::Tensor> cross_attention(const torch::Tensor& src, const torch::Tensor& tgt_in);
  torch::Tensor project(const torch::Tensor& hidden);  // [.., d] -> [.., vocab]

  // Projects the encoder output once per layer and returns an empty cache.
  DecoderCache start_decoding(const Memory& memory);
  // Continuous batching: adds the sentences of `memory` (encoded apart) to a running decode; the next
  // cache.reorder places their fresh rows. Each decodes exactly as in a decode of its own (on the CPU in float).
  void join_decoding(DecoderCache& cache, const Memory& memory);
  // Decoder-only: an empty cache (its batch is set by the first step's tokens).
  DecoderCache start_generation();
  // One step: tokens [batch] (the previous outputs; BOS first) -> logits [batch, tgt_vocab]. Decoder-only:
  // the next token of each stream, over a cache from start_generation().
  torch::Tensor decode_step(const torch::Tensor& tokens, DecoderCache& cache);
  // decode_step before the vocabulary projection: -> [batch, d_model] (project() gives the logits).
  torch::Tensor decode_step_hidden(const torch::Tensor& tokens, DecoderCache& cache);

  // Decoder-only: tokens [batch, len] -> hidden states [batch, len, d_model], position i seeing 0..i.
  torch::Tensor lm_hidden(const torch::Tensor& tokens);
  // The attention weights (explicit path, eval mode, no grad) of one pair, or (decoder-only, src
  // undefined) of one token sequence in encoder_self: src [1, s], tgt_in [1, t].
  AttentionMaps attention_maps(const torch::Tensor& src, const torch::Tensor& tgt_in);

  int64_t parameter_count() const;
  void reset_parameters();

  TransformerOptions options;
  torch::nn::Embedding src_embed{nullptr};
  torch::nn::Embedding tgt_embed{nullptr};  // the same module as src_embed when share_embeddings; the LM's
                                            // only embedding (src_embed is then null)
  PositionalEncoding positions{nullptr};
  PositionalEncoding tgt_positions{nullptr};         // the decoder's own (share_positions false)
  torch::nn::ModuleList encoder{nullptr};            // decoder-only: the causal layers
  torch::nn::ModuleList decoder{nullptr};            // empty when decoder-only
  torch::nn::LayerNorm encoder_norm{nullptr};        // pre-norm only
  torch::nn::LayerNorm decoder_norm{nullptr};        // pre-norm only
  torch::nn::LayerNorm encoder_embed_norm{nullptr};  // embedding_norm only
  torch::nn::LayerNorm decoder_embed_norm{nullptr};  // embedding_norm only (a language model's too)
  Linear output{nullptr};                            // untied output projection only
  torch::Tensor output_bias;                         // tied projection with options.output_bias only: [tgt_vocab]

  // CPU inference with int8 weights (model/linear.h) for every Linear of the layers and, with
  // include_output, the output projection (the tied one too: the target embedding then holds its
  // dequantized values). Irreversible; the model must be on the CPU.
  void quantize_int8(bool include_output);
  bool is_int8() const { return int8_; }
  bool int8_output() const { return int8_output_; }
  // The tied output projection's int8 weight (undefined unless quantized with include_output), and
  // loading one stored in an int8 bundle.
  const int8::PackedLinear& tied_output_int8() const { return tied_output_int8_; }
  // The target embedding becomes its dequantized values, or with keep_float false is released (release_float).
  void load_tied_output_int8(const int8::Weight& weight, bool keep_float = true);
  // After loading an int8 bundle's layers one by one: records what is quantized.
  void mark_int8(bool include_output);
  // Packs every float Linear and the tied output projection for mtx's AVX-512 float kernel (linear.h,
  // fp32_gemm.h), where the CPU runs it; inference uses each pack while its weight is unchanged. Cheap when
  // already packed; call it before translating, not while another thread runs the model.
  void pack_fp32();
  // Inference only from here (eval mode, CPU): packs each float layer as pack_fp32 does and drops every float
  // weight that a pack (float or int8) holds too -- the layers' (LinearImpl::release_float) and the tied target
  // embedding's, whose lookups then read the output projection's pack -- one layer at a time, so the model
  // never holds much more than one copy. Outputs stay bit for bit the same. Afterwards the model cannot be
  // trained, cloned or saved; visit_weights() still gives every weight's value.
  void release_float();
  bool embedding_released() const { return embedding_released_; }
  // Every parameter and buffer, by name in sorted order, in blocks of its leading dimension: visit(name, its
  // full shape, the next rows of it), each weight's blocks in order. A released weight's rows are rebuilt a
  // block at a time, so hashing a released model never holds a second copy of it.
  using WeightVisitor = std::function<void(const std::string& name, c10::IntArrayRef sizes, const torch::Tensor& rows)>;
  void visit_weights(const WeightVisitor& visit) const;

 private:
  // Scaled embeddings plus positions from `offset`, or, with `row_positions` [b] (tokens [b, 1]), each row's own.
  torch::Tensor embed(torch::nn::Embedding& table, const torch::Tensor& tokens, int64_t offset,
                      const torch::Tensor& row_positions = torch::Tensor());
  // embed's lookup, scaling and positions in one pass at CPU float inference without gradients (the same numbers);
  // undefined elsewhere.
  torch::Tensor embed_cpu(torch::nn::Embedding& table, const torch::Tensor& tokens, int64_t offset,
                          const torch::Tensor& row_positions, PositionalEncodingImpl& where);
  torch::Tensor lookup(torch::nn::Embedding& table, const torch::Tensor& tokens);  // [..] -> [.., d]
  bool unfilled_ = false;  // reset() builds placeholders (the Unfilled constructor)
  bool int8_ = false;
  bool int8_output_ = false;
  bool embedding_released_ = false;  // tgt_embed's weight: lookups read the tied output projection's pack
  int8::PackedLinear tied_output_int8_;
  fp32::TrackedLinear tied_output_fp32_;
};
TORCH_MODULE(Transformer);

}  // namespace mtx::model
