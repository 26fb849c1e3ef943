#include "mtx/model/transformer.h"

#include <torch/torch.h>

#include <cmath>

#include "mtx/model/dropout.h"
#include "mtx/model/masks.h"

namespace mtx::model {

TransformerOptions options_from_config(const config::ModelConfig& c, int64_t src_vocab, int64_t tgt_vocab,
                                       int64_t pad_id) {
  return TransformerOptions(src_vocab, tgt_vocab)
      .d_model(c.d_model)
      .heads(c.heads)
      .encoder_layers(c.encoder_layers)
      .decoder_layers(c.decoder_layers)
      .ffn_dim(c.ffn_dim)
      .dropout(c.dropout)
      .attention_dropout(c.attention_dropout)
      .activation_dropout(c.activation_dropout)
      .max_len(c.max_len)
      .pre_norm(c.norm == config::Norm::pre)
      .learned_positions(c.positions == config::Positions::learned)
      .gelu(c.activation == config::Activation::gelu)
      .kaiming_init(c.init == config::Init::kaiming)
      .tie_output(c.tie_output)
      .share_embeddings(c.share_embeddings && src_vocab == tgt_vocab)
      .pad_id(pad_id);
}

void DecoderCache::reorder(const torch::Tensor& indices, bool same_memory) {
  for (auto& layer : layers) {
    if (layer.self.k.defined()) {  // nothing cached before the first step
      layer.self.k = layer.self.k.index_select(0, indices);  // [new_batch, h, steps, hd]
      layer.self.v = layer.self.v.index_select(0, indices);
    }
    if (!same_memory) {
      layer.memory.k = layer.memory.k.index_select(0, indices);  // [new_batch, h, src_len, hd]
      layer.memory.v = layer.memory.v.index_select(0, indices);
    }
  }
  if (!same_memory) memory_mask = memory_mask.index_select(0, indices);  // [new_batch, 1, 1, src_len]
}

TransformerImpl::TransformerImpl(const TransformerOptions& o) : options(o) {
  TORCH_CHECK(o.d_model() % o.heads() == 0, "d_model ", o.d_model(), " not divisible by heads ", o.heads());
  TORCH_CHECK(!o.share_embeddings() || o.src_vocab() == o.tgt_vocab(),
              "shared embeddings need one vocabulary, got ", o.src_vocab(), " and ", o.tgt_vocab());
  src_embed = register_module(
      "src_embed", torch::nn::Embedding(torch::nn::EmbeddingOptions(o.src_vocab(), o.d_model()).padding_idx(o.pad_id())));
  if (o.share_embeddings()) {
    tgt_embed = src_embed;  // registered once: its parameters appear once in parameters()
  } else {
    tgt_embed = register_module(
        "tgt_embed", torch::nn::Embedding(torch::nn::EmbeddingOptions(o.tgt_vocab(), o.d_model()).padding_idx(o.pad_id())));
  }
  positions = register_module("positions", PositionalEncoding(o.max_len(), o.d_model(), o.learned_positions()));
  const LayerOptions lo = LayerOptions(o.d_model(), o.heads(), o.ffn_dim())
                              .dropout(o.dropout())
                              .attention_dropout(o.attention_dropout())
                              .activation_dropout(o.activation_dropout())
                              .pre_norm(o.pre_norm())
                              .gelu(o.gelu())
                              .use_sdpa(o.use_sdpa());
  encoder = register_module("encoder", torch::nn::ModuleList());
  for (int64_t i = 0; i < o.encoder_layers(); ++i) encoder->push_back(EncoderLayer(lo));
  decoder = register_module("decoder", torch::nn::ModuleList());
  for (int64_t i = 0; i < o.decoder_layers(); ++i) decoder->push_back(DecoderLayer(lo));
  if (o.pre_norm()) {
    encoder_norm = register_module("encoder_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.d_model()})));
    decoder_norm = register_module("decoder_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.d_model()})));
  }
  if (!o.tie_output()) output = register_module("output", torch::nn::Linear(o.d_model(), o.tgt_vocab()));
  reset_parameters();
}

void TransformerImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  for (auto& p : parameters()) {
    if (p.dim() < 2) continue;
    if (options.kaiming_init()) {
      torch::nn::init::kaiming_uniform_(p, 0, torch::kFanIn, torch::kReLU);
    } else {
      torch::nn::init::xavier_uniform_(p);
    }
  }
  for (const auto& table : {src_embed, tgt_embed}) table->weight[options.pad_id()].zero_();
}

torch::Tensor TransformerImpl::embed(torch::nn::Embedding& table, const torch::Tensor& tokens, int64_t offset) {
  torch::Tensor x = table->forward(tokens) * std::sqrt(double(options.d_model()));  // [b, t, d]
  x = positions->forward(x, offset);
  return model::dropout(x, options.dropout(), is_training());
}

torch::Tensor TransformerImpl::project(const torch::Tensor& hidden) {
  if (options.tie_output()) return torch::nn::functional::linear(hidden, tgt_embed->weight);  // [.., vocab]
  return output->forward(hidden);
}

Memory TransformerImpl::encode(const torch::Tensor& src) {
  TORCH_CHECK(src.dim() == 2, "encode: expected src [batch, src_len], got ", src.sizes());
  Memory m;
  m.mask = key_padding_mask(src, options.pad_id());  // [b, 1, 1, s]
  torch::Tensor x = embed(src_embed, src, 0);         // [b, s, d]
  for (const auto& layer : *encoder) x = layer->as<EncoderLayer>()->forward(x, m.mask);
  m.states = options.pre_norm() ? encoder_norm->forward(x) : x;  // [b, s, d]
  return m;
}

torch::Tensor TransformerImpl::decode(const torch::Tensor& tgt_in, const Memory& memory) {
  return project(decode_hidden(tgt_in, memory));  // [b, t, vocab]
}

torch::Tensor TransformerImpl::decode_hidden(const torch::Tensor& tgt_in, const Memory& memory) {
  TORCH_CHECK(tgt_in.dim() == 2, "decode: expected tgt_in [batch, tgt_len], got ", tgt_in.sizes());
  const torch::Tensor self_mask = decoder_self_mask(tgt_in, options.pad_id());  // [b, 1, t, t]
  torch::Tensor x = embed(tgt_embed, tgt_in, 0);                                 // [b, t, d]
  for (const auto& module : *decoder) {
    auto layer = module->as<DecoderLayer>();
    const SelfKV kv = layer->cross_attn->project_memory(memory.states);  // [b, h, s, hd] each
    x = layer->forward(x, self_mask, kv, memory.mask);
  }
  if (options.pre_norm()) x = decoder_norm->forward(x);
  return x;  // [b, t, d]
}

torch::Tensor TransformerImpl::forward(const torch::Tensor& src, const torch::Tensor& tgt_in) {
  return decode(tgt_in, encode(src));
}

torch::Tensor TransformerImpl::logits_at(const torch::Tensor& src, const torch::Tensor& tgt_in,
                                         const torch::Tensor& positions) {
  TORCH_CHECK(positions.sizes() == tgt_in.sizes() && positions.scalar_type() == torch::kBool,
              "logits_at: positions must be a bool tensor shaped like tgt_in ", tgt_in.sizes(), ", got ",
              positions.sizes());
  const torch::Tensor hidden = decode_hidden(tgt_in, encode(src));  // [b, t, d]
  return project(hidden.index({positions}));                        // [n, vocab]
}

DecoderCache TransformerImpl::start_decoding(const Memory& memory) {
  DecoderCache cache;
  cache.memory_mask = memory.mask;
  for (const auto& module : *decoder) {
    DecoderLayerCache layer;
    layer.memory = module->as<DecoderLayer>()->cross_attn->project_memory(memory.states);
    cache.layers.push_back(layer);
  }
  return cache;
}

torch::Tensor TransformerImpl::decode_step(const torch::Tensor& tokens, DecoderCache& cache) {
  TORCH_CHECK(tokens.dim() == 1, "decode_step: expected tokens [batch], got ", tokens.sizes());
  TORCH_CHECK(cache.layers.size() == decoder->size(), "decode_step: cache was not started for this model");
  torch::Tensor x = embed(tgt_embed, tokens.unsqueeze(1), cache.steps);  // [b, 1, d]
  size_t i = 0;
  for (const auto& module : *decoder) {
    DecoderLayerCache& layer = cache.layers[i++];
    // The new query may attend to every cached position: no self mask is needed.
    x = module->as<DecoderLayer>()->forward(x, torch::Tensor(), layer.memory, cache.memory_mask, &layer.self);
  }
  ++cache.steps;
  if (options.pre_norm()) x = decoder_norm->forward(x);
  return project(x.squeeze(1));  // [b, vocab]
}

int64_t TransformerImpl::parameter_count() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

}  // namespace mtx::model
