#include "mtx/model/transformer.h"
#include "mtx/model/param_names.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <vector>

#include "mtx/model/dropout.h"
#include "mtx/model/masks.h"

namespace mtx::model {

TransformerOptions options_from_config(const config::ModelConfig& c, int64_t src_vocab, int64_t tgt_vocab,
                                       int64_t pad_id, config::Task task) {
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
      .positions(c.positions)
      .activation(c.activation)
      .layer_norm_eps(c.layer_norm_eps)
      .scale_embeddings(c.scale_embeddings)
      .embedding_norm(c.embedding_norm)
      .position_offset(c.position_offset)
      .share_positions(c.share_positions)
      .ssru(c.decoder_autoreg == config::DecoderAutoreg::ssru)
      .kaiming_init(c.init == config::Init::kaiming)
      .uniform_embeddings(c.init == config::Init::uniform)
      .decoder_only(task == config::Task::lm)
      .tie_output(c.tie_output)
      .output_bias(c.output_bias)
      .share_embeddings(c.share_embeddings && src_vocab == tgt_vocab)
      .pad_id(pad_id);
}

void DecoderCache::reorder(const torch::Tensor& indices, bool same_memory) {
  // On the CPU the encoder memory stays one row per sentence and the rows read it through a row map (the fused
  // attention loop indexes it); elsewhere it is gathered to one row per state row.
  const bool mapped = memory_mask.defined() && memory_mask.device().is_cpu();
  const int64_t fresh = joining;
  TORCH_CHECK(fresh == 0 || !same_memory, "DecoderCache::reorder: sentences joined, so the memory moves");
  const auto long_options = indices.options().dtype(torch::kLong);
  // Rows of sentences that joined read nothing cached (-1) and, on the CPU, their own memory rows (the last ones).
  const torch::Tensor self_fresh = fresh ? torch::full({fresh}, -1, long_options) : torch::Tensor();  // [fresh]
  torch::Tensor memory_fresh;                                                                         // [fresh]
  if (fresh && mapped) {
    const int64_t m = memory_mask.size(0);
    memory_fresh = torch::arange(m - fresh, m, long_options);
  }
  for (auto& layer : layers) {
    layer.self.reorder(indices, rows, self_fresh);  // applied when the next step appends
    if (same_memory || !layer.memory.k.defined()) continue;
    if (mapped) {
      layer.memory.reorder(indices, rows, memory_fresh);  // composes the row map
    } else {
      layer.memory.k = layer.memory.k.index_select(0, indices);  // [new_batch, h, src_len, hd]
      layer.memory.v = layer.memory.v.index_select(0, indices);
    }
  }
  if (!same_memory && !mapped && memory_mask.defined()) {
    memory_mask = memory_mask.index_select(0, indices);  // [new_batch, 1, 1, src_len]
  }
  // Continuous batching: the sentences' own starts; positions no row attends to any more are dropped.
  if (!starts.empty() || (fresh && steps > 0)) {
    std::vector<int64_t> from = starts.empty() ? std::vector<int64_t>(size_t(rows), 0) : starts;
    from.resize(size_t(rows + fresh), steps);
    const torch::Tensor idx = indices.to(torch::kCPU, torch::kLong).contiguous();
    const int64_t* ip = idx.data_ptr<int64_t>();
    starts.assign(size_t(idx.numel()), 0);
    for (int64_t i = 0; i < idx.numel(); ++i) starts[size_t(i)] = from.at(size_t(ip[i]));
    const int64_t drop = starts.empty() ? 0 : *std::min_element(starts.begin(), starts.end());
    if (drop > 0) {
      for (auto& layer : layers) layer.self.pending_skip += drop;
      for (auto& s : starts) s -= drop;
      steps -= drop;
    }
    if (std::all_of(starts.begin(), starts.end(), [](int64_t s) { return s == 0; })) starts.clear();
    for (auto& layer : layers) layer.self.starts = starts;
  }
  // The memory of sentences no row reads any more is let go once it is most of it.
  if (mapped && !same_memory && !layers.empty() && layers.front().memory.pending_rows.defined()) {
    const torch::Tensor map = layers.front().memory.pending_rows;  // [new_batch]
    const auto unique = at::_unique(map, /*sorted=*/true, /*return_inverse=*/true);
    const torch::Tensor used = std::get<0>(unique);  // [kept] memory rows, ascending
    if (used.size(0) * 2 < memory_mask.size(0)) {
      for (auto& layer : layers) {
        layer.memory.k = layer.memory.k.index_select(0, used);  // [kept, h, src_len, hd]
        layer.memory.v = layer.memory.v.index_select(0, used);
        layer.memory.pending_rows = std::get<1>(unique);
      }
      memory_mask = memory_mask.index_select(0, used);  // [kept, 1, 1, src_len]
    }
  }
  rows = indices.size(0);
  joining = 0;
}

TransformerImpl::TransformerImpl(const TransformerOptions& o) : options(o) { reset(); }

TransformerImpl::TransformerImpl(const TransformerOptions& o, Unfilled) : options(o), unfilled_(true) {
  reset();
  unfilled_ = false;  // (a clone of it is built and filled as usual)
}

namespace {

// Unfilled models: a module's parameters become placeholders as soon as it is built, one module at a time.
void empty_parameters(torch::nn::Module& m) {
  torch::NoGradGuard no_grad;
  for (auto& p : m.parameters()) p.set_(placeholder(p));
}

}  // namespace

void TransformerImpl::reset() {
  const TransformerOptions& o = options;
  TORCH_CHECK(o.d_model() % o.heads() == 0, "d_model ", o.d_model(), " not divisible by heads ", o.heads());
  TORCH_CHECK(!o.share_embeddings() || o.src_vocab() == o.tgt_vocab(), "shared embeddings need one vocabulary, got ",
              o.src_vocab(), " and ", o.tgt_vocab());
  TORCH_CHECK(children().empty(), "reset: the model is built already (it builds a new one, or a cleared copy)");
  // A copy being cloned holds the original's submodules and inference state until here.
  src_embed = nullptr;
  tgt_embed = nullptr;
  positions = nullptr;
  tgt_positions = nullptr;
  encoder = nullptr;
  decoder = nullptr;
  encoder_norm = nullptr;
  decoder_norm = nullptr;
  encoder_embed_norm = nullptr;
  decoder_embed_norm = nullptr;
  output = nullptr;
  output_bias = torch::Tensor();
  int8_ = false;
  int8_output_ = false;
  embedding_released_ = false;
  tied_output_int8_ = int8::PackedLinear();
  tied_output_fp32_ = fp32::TrackedLinear();
  const auto embedding_options = [&](int64_t rows) {
    auto eo = torch::nn::EmbeddingOptions(rows, o.d_model()).padding_idx(o.pad_id());
    if (unfilled_) eo._weight(placeholder({rows, o.d_model()}));
    return eo;
  };
  if (o.decoder_only()) {
    tgt_embed = register_module(names::kTgtEmbed, torch::nn::Embedding(embedding_options(o.tgt_vocab())));
  } else {
    src_embed = register_module(names::kSrcEmbed, torch::nn::Embedding(embedding_options(o.src_vocab())));
  }
  if (o.decoder_only()) {
    // no source side
  } else if (o.share_embeddings()) {
    tgt_embed = src_embed;  // registered once: its parameters appear once in parameters()
  } else {
    tgt_embed = register_module(names::kTgtEmbed, torch::nn::Embedding(embedding_options(o.tgt_vocab())));
  }
  positions = register_module(names::kPositions,
                              PositionalEncoding(o.max_len(), o.d_model(), o.positions(), o.position_offset()));
  if (!o.share_positions() && !o.decoder_only()) {
    tgt_positions = register_module(names::kTgtPositions,
                                    PositionalEncoding(o.max_len(), o.d_model(), o.positions(), o.position_offset()));
  }
  if (o.embedding_norm()) {
    const auto norm = [&] {
      return torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.d_model()}).eps(o.layer_norm_eps()));
    };
    if (!o.decoder_only()) encoder_embed_norm = register_module(names::kEncoderEmbedNorm, norm());
    decoder_embed_norm = register_module(names::kDecoderEmbedNorm, norm());
  }
  const LayerOptions lo = LayerOptions(o.d_model(), o.heads(), o.ffn_dim())
                              .dropout(o.dropout())
                              .attention_dropout(o.attention_dropout())
                              .activation_dropout(o.activation_dropout())
                              .pre_norm(o.pre_norm())
                              .activation(o.activation())
                              .layer_norm_eps(o.layer_norm_eps())
                              .use_sdpa(o.use_sdpa());
  encoder = register_module(names::kEncoder, torch::nn::ModuleList());
  for (int64_t i = 0; i < o.encoder_layers(); ++i) {
    encoder->push_back(EncoderLayer(lo));
    if (unfilled_) empty_parameters(*encoder->ptr(i));
  }
  decoder = register_module(names::kDecoder, torch::nn::ModuleList());
  for (int64_t i = 0; i < (o.decoder_only() ? 0 : o.decoder_layers()); ++i) {
    decoder->push_back(DecoderLayer(LayerOptions(lo).ssru(o.ssru())));
    if (unfilled_) empty_parameters(*decoder->ptr(i));
  }
  if (o.pre_norm()) {
    encoder_norm = register_module(
        names::kEncoderNorm, torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.d_model()}).eps(o.layer_norm_eps())));
    if (!o.decoder_only()) {
      decoder_norm =
          register_module(names::kDecoderNorm,
                          torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.d_model()}).eps(o.layer_norm_eps())));
    }
  }
  if (!o.tie_output()) {
    output = register_module(names::kOutput, Linear(o.d_model(), o.tgt_vocab()));
    if (unfilled_) empty_parameters(*output);
  }
  if (o.tie_output() && o.output_bias())
    output_bias = register_parameter(names::kOutputBias, torch::zeros({o.tgt_vocab()}));
  if (unfilled_) {
    empty_parameters(*this);
  } else {
    reset_parameters();
  }
}

std::shared_ptr<torch::nn::Module> TransformerImpl::clone(const c10::optional<torch::Device>& device) const {
  TORCH_CHECK(!int8_, "clone: this model holds int8 weights; clone the float model, then quantize the clone");
  TORCH_CHECK(!embedding_released_, "clone: this model released its float weights (inference only)");
  // reset() initialises the copy before its weights are overwritten: the generator it drew from is put back.
  at::Generator cpu = at::detail::getDefaultCPUGenerator();
  torch::Tensor state;
  {
    std::lock_guard<std::mutex> lock(cpu.mutex());
    state = cpu.get_state();
  }
  std::shared_ptr<torch::nn::Module> copy = torch::nn::Cloneable<TransformerImpl>::clone(device);
  std::lock_guard<std::mutex> lock(cpu.mutex());
  cpu.set_state(state);
  return copy;
}

void TransformerImpl::pretty_print(std::ostream& stream) const {
  const TransformerOptions& o = options;
  const auto flag = [](bool on) { return on ? "true" : "false"; };
  stream << "mtx::model::Transformer(src_vocab=" << o.src_vocab() << ", tgt_vocab=" << o.tgt_vocab()
         << ", d_model=" << o.d_model() << ", heads=" << o.heads() << ", encoder_layers=" << o.encoder_layers()
         << ", decoder_layers=" << o.decoder_layers() << ", ffn_dim=" << o.ffn_dim() << ", dropout=" << o.dropout()
         << ", attention_dropout=" << o.attention_dropout() << ", activation_dropout=" << o.activation_dropout()
         << ", max_len=" << o.max_len() << ", pre_norm=" << flag(o.pre_norm())
         << ", scale_embeddings=" << flag(o.scale_embeddings()) << ", embedding_norm=" << flag(o.embedding_norm())
         << ", position_offset=" << o.position_offset() << ", share_positions=" << flag(o.share_positions())
         << ", ssru=" << flag(o.ssru()) << ", positions=" << config::to_string(o.positions())
         << ", activation=" << config::to_string(o.activation()) << ", kaiming_init=" << flag(o.kaiming_init())
         << ", uniform_embeddings=" << flag(o.uniform_embeddings()) << ", decoder_only=" << flag(o.decoder_only())
         << ", tie_output=" << flag(o.tie_output()) << ", output_bias=" << flag(o.output_bias())
         << ", share_embeddings=" << flag(o.share_embeddings()) << ", pad_id=" << o.pad_id()
         << ", use_sdpa=" << flag(o.use_sdpa()) << (int8_ ? ", int8" : "") << ")";
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
  if (options.uniform_embeddings()) {
    // The LM tutorial's init_weights(): U(-0.1, 0.1) for the embedding and the output layer, zero bias.
    for (auto& table : {src_embed, tgt_embed}) {
      if (table) table->weight.uniform_(-0.1, 0.1);
    }
    if (output) {
      output->weight.uniform_(-0.1, 0.1);
      output->bias.zero_();
    }
  }
  for (const auto& table : {src_embed, tgt_embed}) {
    if (table) table->weight[options.pad_id()].zero_();
  }
}

torch::Tensor TransformerImpl::embed(torch::nn::Embedding& table, const torch::Tensor& tokens, int64_t offset,
                                     const torch::Tensor& row_positions) {
  // The source table's stack has the encoder's positions and norm; the target's (a language model's too) the
  // decoder's.
  const bool source = &table == &src_embed;
  PositionalEncoding& where = source || !tgt_positions ? positions : tgt_positions;
  torch::Tensor x = embed_cpu(table, tokens, offset, row_positions, *where);  // [b, t, d] or undefined
  if (!x.defined()) {
    x = lookup(table, tokens);  // [b, t, d]
    if (options.scale_embeddings()) x = x * std::sqrt(double(options.d_model()));
    x = row_positions.defined() ? where->forward_rows(x, row_positions) : where->forward(x, offset);
  }
  if (options.embedding_norm()) x = (source ? encoder_embed_norm : decoder_embed_norm)->forward(x);
  return model::dropout(x, options.dropout(), is_training());
}

torch::Tensor TransformerImpl::embed_cpu(torch::nn::Embedding& table, const torch::Tensor& tokens, int64_t offset,
                                         const torch::Tensor& row_positions, PositionalEncodingImpl& where) {
  const bool learned = where.kind == config::Positions::learned;
  const torch::Tensor& pt = learned ? where.embedding->weight : where.table;  // [rows, d]
  const bool own_rows = !embedding_released_ || table.get() != tgt_embed.get();
  const torch::Tensor& w = table->weight;  // [vocab, d] (undefined once released)
  const int64_t d = options.d_model();
  const auto float_cpu = [d](const torch::Tensor& t) {
    return t.defined() && t.device().is_cpu() && t.scalar_type() == torch::kFloat && t.dim() == 2 && t.size(1) == d &&
           t.is_contiguous();
  };
  if (torch::GradMode::is_enabled() || tokens.dim() != 2 || !tokens.device().is_cpu() ||
      (tokens.scalar_type() != torch::kLong && tokens.scalar_type() != torch::kInt) || !float_cpu(pt) ||
      (own_rows && !float_cpu(w)) ||
      (row_positions.defined() &&
       (row_positions.dim() != 1 || row_positions.scalar_type() != torch::kLong || !row_positions.device().is_cpu() ||
        row_positions.numel() != tokens.size(0) || tokens.size(1) != 1))) {
    return {};
  }
  const int64_t b = tokens.size(0), t = tokens.size(1);
  TORCH_CHECK(row_positions.defined() || offset + t <= where.max_len, "sequence of ", offset + t,
              " positions exceeds model.max_len ", where.max_len);
  const torch::Tensor ids = tokens.to(torch::kLong).contiguous();  // [b, t]
  const int64_t* ip = ids.data_ptr<int64_t>();
  torch::Tensor x;  // [b, t, d]
  if (own_rows) {
    x = torch::empty({b, t, d}, w.options());
    const float* wp = w.data_ptr<float>();
    float* xp = x.data_ptr<float>();
    const int64_t vocab = w.size(0);
    for (int64_t i = 0; i < b * t; ++i) {
      TORCH_CHECK(ip[i] >= 0 && ip[i] < vocab, "embedding: token id ", ip[i], " is not below the vocabulary's ", vocab);
      std::memcpy(xp + i * d, wp + ip[i] * d, size_t(d) * sizeof(float));
    }
  } else {
    x = lookup(table, ids);  // a fresh [b, t, d]
    if (!x.is_contiguous() || x.scalar_type() != torch::kFloat) return {};
  }
  float* xp = x.data_ptr<float>();
  if (options.scale_embeddings()) {
    // As LibTorch multiplies a float tensor by a double: by the scalar rounded to float, each product rounded.
    const float scale = float(std::sqrt(double(d)));
    for (int64_t i = 0; i < b * t * d; ++i) xp[i] = xp[i] * scale;
  }
  const torch::Tensor row_at = row_positions.defined() ? row_positions.contiguous() : torch::Tensor();  // [b]
  const int64_t* rp = row_at.defined() ? row_at.data_ptr<int64_t>() : nullptr;
  const float* pp = pt.data_ptr<float>();
  for (int64_t r = 0; r < b; ++r) {
    for (int64_t j = 0; j < t; ++j) {
      const int64_t p = rp ? rp[r] : offset + j;
      TORCH_CHECK(p >= 0, "embedding: row ", r, "'s position ", p, " is negative");
      TORCH_CHECK(p < where.max_len, "sequence of ", p + 1, " positions exceeds model.max_len ", where.max_len);
      const float* row = pp + (where.row_offset + p) * d;
      float* o = xp + (r * t + j) * d;
      for (int64_t c = 0; c < d; ++c) o[c] = o[c] + row[c];
    }
  }
  return x;
}

torch::Tensor TransformerImpl::lookup(torch::nn::Embedding& table, const torch::Tensor& tokens) {
  if (!embedding_released_ || table.get() != tgt_embed.get()) return table->forward(tokens);  // [.., d]
  const torch::Tensor ids = tokens.reshape({-1}).to(torch::kLong);                            // [n]
  std::vector<int64_t> shape = tokens.sizes().vec();
  shape.push_back(options.d_model());
  if (tied_output_int8_.defined()) {
    return int8::dequantize_rows(tied_output_int8_.weight(), ids).view(shape);  // the weight the embedding held
  }
  return tied_output_fp32_.packed().rows(ids).view(shape);  // [.., d]
}

torch::Tensor TransformerImpl::project(const torch::Tensor& hidden) {
  if (options.tie_output()) {
    if (tied_output_int8_.defined()) return tied_output_int8_.forward(hidden);  // [.., vocab]
    if (embedding_released_) {
      if (fp32::PackedLinear::available() && hidden.device().is_cpu() && !torch::GradMode::is_enabled()) {
        return tied_output_fp32_.packed().forward(hidden);  // [.., vocab]
      }
      return torch::nn::functional::linear(hidden, tied_output_fp32_.packed().unpack(), output_bias);
    }
    if (tied_output_fp32_.runs(hidden, tgt_embed->weight, output_bias)) {
      return tied_output_fp32_.packed().forward(hidden);  // [.., vocab]
    }
    return torch::nn::functional::linear(hidden, tgt_embed->weight, output_bias);  // [.., vocab]
  }
  return output->forward(hidden);
}

namespace {

// An encoder call's fixed cost (dispatch and allocations per layer) as a count of tokens whose layer work at
// width d costs as much: kEncoderCallWork / d^2 (docs/serving.md derives it).
constexpr double kEncoderCallWork = 150000.0;

// Sentences of one chunk of an encoder batch: rows of the batch, and the positions they need (up to the last
// real token of the longest).
struct EncoderChunk {
  std::vector<int64_t> rows;
  int64_t extent = 0;
};

// The chunks, by length, whose padded tokens plus `call_tokens` per chunk (an encoder call's fixed cost, in
// tokens' worth of its layers) are fewest; one chunk where cutting gains nothing. src [b, s] int64 on the CPU.
std::vector<EncoderChunk> encoder_chunks(const torch::Tensor& src, int64_t pad_id, double call_tokens) {
  const torch::Tensor tokens = src.contiguous();
  const int64_t b = tokens.size(0), s = tokens.size(1);
  const int64_t* tp = tokens.data_ptr<int64_t>();
  std::vector<int64_t> extent(static_cast<size_t>(b), 0);
  for (int64_t i = 0; i < b; ++i) {
    for (int64_t j = s; j > 0; --j) {
      if (tp[i * s + j - 1] != pad_id) {
        extent[size_t(i)] = j;
        break;
      }
    }
  }
  std::vector<int64_t> order(static_cast<size_t>(b));
  for (int64_t i = 0; i < b; ++i) order[size_t(i)] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t x, int64_t y) { return extent[size_t(x)] > extent[size_t(y)]; });
  // Cut only between different lengths: groups [starts[g], starts[g + 1]) of `order` share one.
  std::vector<size_t> starts;
  for (size_t i = 0; i < order.size(); ++i) {
    if (i == 0 || extent[size_t(order[i])] != extent[size_t(order[i - 1])]) starts.push_back(i);
  }
  const size_t groups = starts.size();
  starts.push_back(order.size());
  // cost[g]: the fewest of the groups from g on; a chunk starting at group g pads to group g's length.
  std::vector<double> cost(groups + 1, 0.0);
  std::vector<size_t> cut(groups + 1, groups);
  for (size_t g = groups; g-- > 0;) {
    cost[g] = std::numeric_limits<double>::infinity();
    const double longest = double(std::max<int64_t>(1, extent[size_t(order[starts[g]])]));
    for (size_t e = g + 1; e <= groups; ++e) {
      const double c = call_tokens + double(starts[e] - starts[g]) * longest + cost[e];
      if (c < cost[g]) {
        cost[g] = c;
        cut[g] = e;
      }
    }
  }
  std::vector<EncoderChunk> chunks;
  for (size_t g = 0; g < groups; g = cut[g]) {
    EncoderChunk c;
    c.rows.assign(order.begin() + std::ptrdiff_t(starts[g]), order.begin() + std::ptrdiff_t(starts[cut[g]]));
    std::sort(c.rows.begin(), c.rows.end());
    c.extent = std::max<int64_t>(1, extent[size_t(order[starts[g]])]);
    chunks.push_back(std::move(c));
  }
  return chunks;
}

}  // namespace

Memory TransformerImpl::encode(const torch::Tensor& src) {
  TORCH_CHECK(!options.decoder_only(), "encode: a decoder-only language model has no source side");
  TORCH_CHECK(src.dim() == 2, "encode: expected src [batch, src_len], got ", src.sizes());
  const auto run = [this](const torch::Tensor& tokens) {
    Memory m;
    m.mask = key_padding_mask(tokens, options.pad_id());  // [b, 1, 1, s]
    torch::Tensor x = embed(src_embed, tokens, 0);        // [b, s, d]
    for (const auto& layer : *encoder) x = layer->as<EncoderLayer>()->forward(x, m.mask);
    m.states = options.pre_norm() ? encoder_norm->forward(x) : x;  // [b, s, d]
    return m;
  };
  // At CPU inference a batch of mixed lengths (a server's) is encoded in chunks of like lengths, so that its
  // layers do not run on padding. Where the Linear layers are mtx's (packed float or int8, row-independent) each
  // sentence's states are then bit for bit the ones it gets alone; positions past a sentence's chunk are zeros
  // (they are masked). Not while attention weights are kept (attention_maps reads one whole-batch pass).
  const auto keeps_weights = [this] {
    for (const auto& layer : *encoder) {
      if (layer->as<EncoderLayer>()->self_attn->keep_weights) return true;
    }
    return false;
  };
  if (is_training() || torch::GradMode::is_enabled() || !src.device().is_cpu() || src.size(0) < 2 || src.size(1) == 0 ||
      src.scalar_type() != torch::kLong || keeps_weights()) {
    return run(src);
  }
  const double d = double(options.d_model());
  const std::vector<EncoderChunk> chunks = encoder_chunks(src, options.pad_id(), kEncoderCallWork / (d * d));
  if (chunks.size() == 1 && chunks.front().extent == src.size(1)) return run(src);
  Memory m;
  m.mask = key_padding_mask(src, options.pad_id());  // [b, 1, 1, s]
  for (const auto& c : chunks) {
    const torch::Tensor rows = torch::tensor(c.rows, torch::kLong);
    const Memory part = run(src.index_select(0, rows).narrow(1, 0, c.extent));  // [n, extent, d]
    if (!m.states.defined())
      m.states = torch::zeros({src.size(0), src.size(1), part.states.size(2)}, part.states.options());
    m.states.narrow(1, 0, c.extent).index_copy_(0, rows, part.states);
  }
  return m;
}

torch::Tensor TransformerImpl::decode(const torch::Tensor& tgt_in, const Memory& memory) {
  return project(decode_hidden(tgt_in, memory));  // [b, t, vocab]
}

torch::Tensor TransformerImpl::decode_hidden(const torch::Tensor& tgt_in, const Memory& memory) {
  TORCH_CHECK(!options.decoder_only(), "decode: a decoder-only language model has no decoder stack (lm_hidden)");
  TORCH_CHECK(tgt_in.dim() == 2, "decode: expected tgt_in [batch, tgt_len], got ", tgt_in.sizes());
  const torch::Tensor self_mask = decoder_self_mask(tgt_in, options.pad_id());  // [b, 1, t, t]
  torch::Tensor x = embed(tgt_embed, tgt_in, 0);                                // [b, t, d]
  for (const auto& module : *decoder) {
    auto layer = module->as<DecoderLayer>();
    const SelfKV kv = layer->cross_attn->project_memory(memory.states);  // [b, h, s, hd] each
    x = layer->forward(x, self_mask, kv, memory.mask);
  }
  if (options.pre_norm()) x = decoder_norm->forward(x);
  return x;  // [b, t, d]
}

std::vector<torch::Tensor> TransformerImpl::cross_attention(const torch::Tensor& src, const torch::Tensor& tgt_in) {
  TORCH_CHECK(!options.decoder_only(), "cross_attention: a decoder-only language model has no cross-attention");
  TORCH_CHECK(!is_training(), "cross_attention: the model must be in eval mode");
  TORCH_CHECK(tgt_in.dim() == 2, "cross_attention: expected tgt_in [batch, tgt_len], got ", tgt_in.sizes());
  torch::NoGradGuard no_grad;
  const Memory memory = encode(src);
  const torch::Tensor self_mask = decoder_self_mask(tgt_in, options.pad_id());  // [b, 1, t, t]
  torch::Tensor x = embed(tgt_embed, tgt_in, 0);                                // [b, t, d]
  std::vector<torch::Tensor> weights(decoder->size());
  size_t i = 0;
  for (const auto& module : *decoder) {
    auto layer = module->as<DecoderLayer>();
    const SelfKV kv = layer->cross_attn->project_memory(memory.states);  // [b, h, s, hd] each
    x = layer->forward(x, self_mask, kv, memory.mask, nullptr, &weights[i++]);
  }
  return weights;  // [b, h, t, s] per layer
}

torch::Tensor TransformerImpl::forward(const torch::Tensor& src, const torch::Tensor& tgt_in) {
  return decode(tgt_in, encode(src));
}

torch::Tensor TransformerImpl::logits_at(const torch::Tensor& src, const torch::Tensor& tgt_in,
                                         const torch::Tensor& positions) {
  TORCH_CHECK(positions.sizes() == tgt_in.sizes() && positions.scalar_type() == torch::kBool,
              "logits_at: positions must be a bool tensor shaped like tgt_in ", tgt_in.sizes(), ", got ",
              positions.sizes());
  const torch::Tensor hidden =
      options.decoder_only() ? lm_hidden(tgt_in) : decode_hidden(tgt_in, encode(src));  // [b, t, d]
  return project(hidden.index({positions}));                                            // [n, vocab]
}

torch::Tensor TransformerImpl::lm_hidden(const torch::Tensor& tokens) {
  TORCH_CHECK(options.decoder_only(), "lm_hidden: this is an encoder-decoder model");
  TORCH_CHECK(tokens.dim() == 2, "lm_hidden: expected tokens [batch, len], got ", tokens.sizes());
  const torch::Tensor mask = causal_mask(tokens.size(1), tokens.options().dtype(torch::kBool));  // [1, 1, t, t]
  torch::Tensor x = embed(tgt_embed, tokens, 0);                                                 // [b, t, d]
  for (const auto& layer : *encoder) x = layer->as<EncoderLayer>()->forward(x, mask);
  return options.pre_norm() ? encoder_norm->forward(x) : x;  // [b, t, d]
}

namespace {

// Turns weight keeping on for every attention module under `module` (or off), clearing what was kept.
void keep_attention(torch::nn::Module& module, bool on) {
  for (auto& m : module.modules()) {
    if (auto* self = m->as<SelfAttention>()) {
      self->keep_weights = on;
      self->weights = torch::Tensor();
    } else if (auto* cross = m->as<CrossAttention>()) {
      cross->keep_weights = on;
      cross->weights = torch::Tensor();
    }
  }
}

}  // namespace

AttentionMaps TransformerImpl::attention_maps(const torch::Tensor& src, const torch::Tensor& tgt_in) {
  torch::NoGradGuard no_grad;
  const bool was_training = is_training();
  eval();
  keep_attention(*this, true);
  AttentionMaps maps;
  try {
    if (options.decoder_only()) {
      lm_hidden(tgt_in);
    } else {
      decode_hidden(tgt_in, encode(src));
    }
  } catch (...) {
    keep_attention(*this, false);
    train(was_training);
    throw;
  }
  for (const auto& layer : *encoder) maps.encoder_self.push_back(layer->as<EncoderLayer>()->self_attn->weights[0]);
  for (const auto& module : *decoder) {
    auto layer = module->as<DecoderLayer>();
    if (layer->self_attn) maps.decoder_self.push_back(layer->self_attn->weights[0]);  // [h, t, t] (none: SSRU)
    maps.cross.push_back(layer->cross_attn->weights[0]);                              // [h, t, s]
  }
  keep_attention(*this, false);
  train(was_training);
  return maps;
}

DecoderCache TransformerImpl::start_generation() {
  TORCH_CHECK(options.decoder_only(), "start_generation: an encoder-decoder model starts from start_decoding(memory)");
  DecoderCache cache;
  cache.layers.resize(encoder->size());
  return cache;
}

DecoderCache TransformerImpl::start_decoding(const Memory& memory) {
  TORCH_CHECK(!options.decoder_only(), "start_decoding: a decoder-only model starts from start_generation()");
  DecoderCache cache;
  cache.memory_mask = memory.mask;
  cache.rows = memory.states.size(0);
  for (const auto& module : *decoder) {
    DecoderLayerCache layer;
    layer.memory = module->as<DecoderLayer>()->cross_attn->project_memory(memory.states);
    cache.layers.push_back(layer);
  }
  return cache;
}

void TransformerImpl::join_decoding(DecoderCache& cache, const Memory& memory) {
  TORCH_CHECK(!options.decoder_only() && cache.memory_mask.defined() && cache.layers.size() == decoder->size(),
              "join_decoding: the cache was not started by start_decoding for this model");
  TORCH_CHECK(memory.mask.device() == cache.memory_mask.device(), "join_decoding: the memory is on another device");
  // The old and the new memory padded to one source length: padded keys are masked, and on the CPU the fused
  // attention adds exact zeros for them, so nobody's result changes.
  const int64_t length = std::max(cache.memory_mask.size(-1), memory.mask.size(-1));
  const auto pad = [length](const torch::Tensor& x, int64_t dim) {  // zeros (false) up to `length` along dim
    if (x.size(dim) == length) return x;
    std::vector<int64_t> shape = x.sizes().vec();
    shape[size_t(dim)] = length - x.size(dim);
    return torch::cat({x, torch::zeros(shape, x.options())}, dim);
  };
  size_t i = 0;
  for (const auto& module : *decoder) {
    DecoderLayerCache& layer = cache.layers[i++];
    const SelfKV added = module->as<DecoderLayer>()->cross_attn->project_memory(memory.states);  // [n, h, s, hd]
    layer.memory.k = torch::cat({pad(layer.memory.k, 2), pad(added.k, 2)}, 0);  // [rows + n, h, length, hd]
    layer.memory.v = torch::cat({pad(layer.memory.v, 2), pad(added.v, 2)}, 0);
  }
  cache.memory_mask = torch::cat({pad(cache.memory_mask, 3), pad(memory.mask, 3)}, 0);  // [rows + n, 1, 1, length]
  cache.joining += memory.states.size(0);
}

torch::Tensor TransformerImpl::decode_step_hidden(const torch::Tensor& tokens, DecoderCache& cache) {
  TORCH_CHECK(tokens.dim() == 1, "decode_step: expected tokens [batch], got ", tokens.sizes());
  if (options.decoder_only()) {
    TORCH_CHECK(cache.layers.size() == encoder->size(), "decode_step: cache was not started for this model");
    torch::Tensor x = embed(tgt_embed, tokens.unsqueeze(1), cache.steps);  // [b, 1, d]
    size_t i = 0;
    for (const auto& layer : *encoder)
      x = layer->as<EncoderLayer>()->forward(x, torch::Tensor(), &cache.layers[i++].self);
    ++cache.steps;
    if (options.pre_norm()) x = encoder_norm->forward(x);
    return x.squeeze(1);  // [b, d]
  }
  TORCH_CHECK(cache.layers.size() == decoder->size(), "decode_step: cache was not started for this model");
  TORCH_CHECK(cache.joining == 0, "decode_step: sentences joined; reorder the cache first");
  torch::Tensor x;          // [b, 1, d]
  torch::Tensor self_mask;  // [b, 1, 1, steps + 1]: a row's own positions (undefined: every cached position)
  if (cache.starts.empty()) {
    x = embed(tgt_embed, tokens.unsqueeze(1), cache.steps);
  } else {
    TORCH_CHECK(int64_t(cache.starts.size()) == tokens.size(0), "decode_step: ", cache.starts.size(),
                " row starts for ", tokens.size(0), " rows");
    // Each row's position (steps since its start) and its own positions' mask, written directly: a search that
    // sentences joined makes these every step.
    const int64_t b = tokens.size(0), keys = cache.steps + 1;
    torch::Tensor where = torch::empty({b}, torch::kLong);            // [b]
    torch::Tensor own = torch::empty({b, 1, 1, keys}, torch::kBool);  // [b, 1, 1, steps + 1]
    int64_t* wp = where.data_ptr<int64_t>();
    bool* op = own.data_ptr<bool>();
    for (int64_t r = 0; r < b; ++r) {
      const int64_t start = cache.starts[size_t(r)];
      wp[r] = cache.steps - start;
      for (int64_t k = 0; k < keys; ++k) op[r * keys + k] = k >= start;
    }
    x = embed(tgt_embed, tokens.unsqueeze(1), 0, where);  // [b, 1, d]
    self_mask = own.to(x.device());
  }
  size_t i = 0;
  torch::Tensor weights;  // a layer's [b, h, 1, s], when kept
  torch::Tensor layers;   // the sum over layers of their [b, 1, s] head means (keep_layers_attention)
  for (const auto& module : *decoder) {
    DecoderLayerCache& layer = cache.layers[i++];
    const bool last = i == cache.layers.size();
    const bool keep = (last && cache.keep_attention) || cache.keep_layers_attention;
    x = module->as<DecoderLayer>()->forward(x, self_mask, layer.memory, cache.memory_mask, &layer.self,
                                            keep ? &weights : nullptr);
    if (cache.keep_layers_attention) {
      const torch::Tensor heads = weights.to(torch::kFloat).mean(1);
      layers = layers.defined() ? layers.add_(heads) : heads;
    }
  }
  if (cache.keep_attention) cache.attention = weights.mean(1).squeeze(1).to(torch::kFloat);  // [b, s]
  if (cache.keep_layers_attention) cache.layers_attention = layers.squeeze(1).div_(double(cache.layers.size()));
  ++cache.steps;
  if (options.pre_norm()) x = decoder_norm->forward(x);
  return x.squeeze(1);  // [b, d]
}

torch::Tensor TransformerImpl::decode_step(const torch::Tensor& tokens, DecoderCache& cache) {
  return project(decode_step_hidden(tokens, cache));  // [b, vocab]
}

void TransformerImpl::quantize_int8(bool include_output) {
  TORCH_CHECK(!is_training(), "quantize_int8: int8 is for inference (call eval() first)");
  for (const auto& m : modules(/*include_self=*/false)) {
    auto* linear = m->as<LinearImpl>();
    if (!linear || linear->is_int8()) continue;
    if (output && linear == output.get() && !include_output) continue;
    linear->quantize_int8();
  }
  if (include_output && options.tie_output() && !tied_output_int8_.defined()) {
    load_tied_output_int8(int8::quantize(tgt_embed->weight));
  }
  mark_int8(include_output);
}

void TransformerImpl::pack_fp32() {
  if (!fp32::PackedLinear::available()) return;
  torch::NoGradGuard no_grad;
  for (const auto& m : modules(/*include_self=*/false)) {
    if (auto* linear = m->as<LinearImpl>()) linear->pack_fp32();
  }
  const torch::Tensor& w = tgt_embed->weight;
  if (options.tie_output() && !tied_output_int8_.defined() && !embedding_released_ && w.device().is_cpu() &&
      w.scalar_type() == torch::kFloat) {
    tied_output_fp32_.pack(w, output_bias);
  }
}

void TransformerImpl::load_tied_output_int8(const int8::Weight& weight, bool keep_float) {
  TORCH_CHECK(options.tie_output(), "load_tied_output_int8: this model's output projection is not tied");
  TORCH_CHECK(!embedding_released_, "load_tied_output_int8: the target embedding was released");
  const std::vector<int64_t> sizes = {options.tgt_vocab(), options.d_model()};
  TORCH_CHECK(weight.values.sizes() == sizes, "tied int8 output ", weight.values.sizes(),
              " does not fit the target embedding ", sizes);
  torch::NoGradGuard no_grad;
  tied_output_int8_ = int8::PackedLinear(weight, output_bias);
  // (set_: the embedding's storage may have been emptied before a load)
  tgt_embed->weight.set_(keep_float ? int8::dequantize(weight) : placeholder(tgt_embed->weight));
  embedding_released_ = !keep_float;
}

void TransformerImpl::mark_int8(bool include_output) {
  int8_ = true;
  int8_output_ = include_output;
}

int64_t TransformerImpl::parameter_count() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();  // (a released weight's placeholder keeps its shape)
  return n;
}

void TransformerImpl::release_float() {
  TORCH_CHECK(!is_training(), "release_float: inference only (call eval() first)");
  torch::NoGradGuard no_grad;
  // The largest first: the tied output projection, packed, then the embedding it duplicates dropped.
  if (options.tie_output() && !embedding_released_ && tgt_embed->weight.device().is_cpu()) {
    if (!tied_output_int8_.defined() && fp32::PackedLinear::available() &&
        tgt_embed->weight.scalar_type() == torch::kFloat) {
      tied_output_fp32_.pack(tgt_embed->weight, output_bias);
    }
    if (tied_output_int8_.defined() || tied_output_fp32_.current(tgt_embed->weight, output_bias)) {
      tgt_embed->weight.set_(placeholder(tgt_embed->weight));
      embedding_released_ = true;
    }
  }
  for (const auto& m : modules(/*include_self=*/false)) {
    if (auto* linear = m->as<LinearImpl>()) {
      if (!linear->weight.device().is_cpu()) continue;
      linear->pack_fp32();
      linear->release_float();
    }
  }
}

void TransformerImpl::visit_weights(const WeightVisitor& visit) const {
  // name -> its shape and its rows [begin, end): the tensor's own, or rebuilt from a pack.
  struct Source {
    std::vector<int64_t> sizes;
    std::function<torch::Tensor(int64_t, int64_t)> rows;
  };
  std::map<std::string, Source> all;
  const auto own = [](const torch::Tensor& t) {
    return Source{t.sizes().vec(),
                  [t](int64_t begin, int64_t end) { return t.dim() == 0 ? t : t.narrow(0, begin, end - begin); }};
  };
  for (const auto& m : named_modules(/*name_prefix=*/"", /*include_self=*/true)) {
    const std::string prefix = m.key().empty() ? "" : m.key() + ".";
    const auto* linear = dynamic_cast<const LinearImpl*>(m.value().get());
    for (const auto& p : m.value()->named_parameters(/*recurse=*/false)) {
      const torch::Tensor t = p.value();
      if (linear && linear->released() && p.key() == "weight") {
        all.emplace(prefix + p.key(), Source{t.sizes().vec(), [linear](int64_t begin, int64_t end) {
                                               return linear->float_rows(begin, end);
                                             }});
      } else if (embedding_released_ && m.value().get() == tgt_embed.get() && p.key() == "weight") {
        all.emplace(prefix + p.key(), Source{t.sizes().vec(), [this](int64_t begin, int64_t end) {
                                               const torch::Tensor ids = torch::arange(begin, end, torch::kLong);
                                               return tied_output_int8_.defined()
                                                          ? int8::dequantize_rows(tied_output_int8_.weight(), ids)
                                                          : tied_output_fp32_.packed().rows(ids);
                                             }});
      } else {
        all.emplace(prefix + p.key(), own(t));
      }
    }
    for (const auto& b : m.value()->named_buffers(/*recurse=*/false)) all.emplace(prefix + b.key(), own(b.value()));
  }
  constexpr int64_t kBlock = 4096;  // rows rebuilt at a time
  for (const auto& [name, source] : all) {
    const int64_t rows = source.sizes.empty() ? 1 : source.sizes[0];
    if (rows == 0) visit(name, source.sizes, source.rows(0, 0));
    for (int64_t begin = 0; begin < rows; begin += kBlock) {
      visit(name, source.sizes, source.rows(begin, std::min(rows, begin + kBlock)));
    }
  }
}

}  // namespace mtx::model
