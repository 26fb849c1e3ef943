#include "mtx/model/layers.h"
#include "mtx/model/param_names.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "mtx/model/dropout.h"

namespace mtx::model {
namespace {

AttentionOptions attention_options(const LayerOptions& o) {
  return AttentionOptions(o.d_model(), o.heads()).dropout(o.attention_dropout()).use_sdpa(o.use_sdpa());
}

torch::nn::LayerNorm layer_norm(int64_t d, double eps) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}).eps(eps));
}

// x + y for a sublayer's fresh output y: without gradients, into y itself (no new tensor to allocate and fault
// in; addition commutes, so the numbers are the same).
torch::Tensor residual(const torch::Tensor& x, torch::Tensor y) {
  if (torch::GradMode::is_enabled() || y.sizes() != x.sizes() || y.scalar_type() != x.scalar_type() ||
      !y.is_contiguous()) {
    return x + y;
  }
  return y.add_(x);
}

void print_layer_options(std::ostream& stream, const LayerOptions& o) {
  stream << "d_model=" << o.d_model() << ", heads=" << o.heads() << ", ffn_dim=" << o.ffn_dim()
         << ", dropout=" << o.dropout() << ", attention_dropout=" << o.attention_dropout()
         << ", activation_dropout=" << o.activation_dropout() << ", norm=" << (o.pre_norm() ? "pre" : "post")
         << ", activation=" << config::to_string(o.activation());
}

}  // namespace

PositionalEncodingImpl::PositionalEncodingImpl(int64_t max_len_, int64_t d_model_, config::Positions kind_,
                                               int64_t row_offset_)
    : max_len(max_len_), d_model(d_model_), kind(kind_), row_offset(row_offset_) {
  reset();
}

void PositionalEncodingImpl::reset() {
  const int64_t rows = max_len + row_offset;
  if (kind == config::Positions::learned) {
    embedding = register_module(names::kPositionsEmbedding, torch::nn::Embedding(rows, d_model));
    return;
  }
  torch::Tensor t = torch::zeros({rows, d_model});  // [rows, d]
  if (kind == config::Positions::sinusoidal_halves) {
    // Sines of every wave, then their cosines (an odd width: one sine more than cosines), computed in double
    // and rounded once, as Hugging Face's MarianMT computes its table.
    const torch::Tensor pos = torch::arange(rows, torch::kDouble).unsqueeze(1);  // [max_len, 1]
    const torch::Tensor angle =
        pos / torch::pow(10000.0, torch::arange(0, d_model, 2, torch::kDouble) / double(d_model));  // [max_len, sines]
    const int64_t sines = (d_model + 1) / 2;
    t.narrow(1, 0, sines).copy_(torch::sin(angle));                                      // [max_len, sines]
    t.narrow(1, sines, d_model / 2).copy_(torch::cos(angle).narrow(1, 0, d_model / 2));  // [max_len, d / 2]
  } else if (kind == config::Positions::sinusoidal_marian) {
    // Marian's table, computed as Marian computes it (float throughout): d/2 waves, wave i at
    // 10000^(-i / (d/2 - 1)); sines in the first half, cosines in the second.
    const float waves = float(d_model) / 2;
    const float step = std::log(10000.f) / (waves - 1.f);
    float* out = t.data_ptr<float>();
    for (int64_t p = 0; p < rows; ++p) {
      for (int64_t i = 0; i < d_model; ++i) {
        const float v = float(p) * std::exp(float(i % int64_t(waves)) * -step);
        out[p * d_model + i] = i < int64_t(waves) ? std::sin(v) : std::cos(v);
      }
    }
  } else {
    const torch::Tensor pos = torch::arange(rows, torch::kFloat).unsqueeze(1);  // [max_len, 1]
    const torch::Tensor div =
        torch::exp(torch::arange(0, d_model, 2, torch::kFloat) * (-std::log(10000.0) / double(d_model)));  // [d/2]
    t.index_put_({torch::indexing::Slice(), torch::indexing::Slice(0, torch::indexing::None, 2)},
                 torch::sin(pos * div));
    t.index_put_({torch::indexing::Slice(), torch::indexing::Slice(1, torch::indexing::None, 2)},
                 torch::cos(pos * div).index({torch::indexing::Slice(), torch::indexing::Slice(0, d_model / 2)}));
  }
  table = register_buffer(names::kPositionsTable, t);
}

void PositionalEncodingImpl::pretty_print(std::ostream& stream) const {
  stream << "mtx::model::PositionalEncoding(max_len=" << max_len << ", d_model=" << d_model
         << ", kind=" << config::to_string(kind) << (row_offset ? ", row_offset=" + std::to_string(row_offset) : "")
         << ")";
}

torch::Tensor PositionalEncodingImpl::forward(const torch::Tensor& x, int64_t offset) {
  const int64_t t = x.size(1);
  TORCH_CHECK(offset + t <= max_len, "sequence of ", offset + t, " positions exceeds model.max_len ", max_len);
  if (kind == config::Positions::learned) {
    const torch::Tensor positions =
        torch::arange(row_offset + offset, row_offset + offset + t, x.options().dtype(torch::kLong));  // [t]
    return x + embedding->forward(positions).unsqueeze(0).to(x.scalar_type());                         // [b, t, d]
  }
  return x + table.narrow(0, row_offset + offset, t).unsqueeze(0).to(x.scalar_type());  // [b, t, d]
}

torch::Tensor PositionalEncodingImpl::forward_rows(const torch::Tensor& x, const torch::Tensor& positions) {
  TORCH_CHECK(x.dim() == 3 && x.size(1) == 1 && positions.dim() == 1 && positions.size(0) == x.size(0),
              "forward_rows: x ", x.sizes(), ", positions ", positions.sizes());
  const int64_t top = positions.numel() ? positions.max().item<int64_t>() : 0;
  TORCH_CHECK(top < max_len, "sequence of ", top + 1, " positions exceeds model.max_len ", max_len);
  const torch::Tensor p = row_offset ? positions.to(x.device()) + row_offset : positions.to(x.device());
  if (kind == config::Positions::learned) {
    return x + embedding->forward(p).unsqueeze(1).to(x.scalar_type());  // [b, 1, d]
  }
  return x + table.index_select(0, p).unsqueeze(1).to(x.scalar_type());  // [b, 1, d]
}

FeedForwardImpl::FeedForwardImpl(const LayerOptions& o) : options(o) { reset(); }

void FeedForwardImpl::reset() {
  fc1 = register_module(names::kFc1, Linear(options.d_model(), options.ffn_dim()));
  fc2 = register_module(names::kFc2, Linear(options.ffn_dim(), options.d_model()));
}

void FeedForwardImpl::pretty_print(std::ostream& stream) const {
  stream << "mtx::model::FeedForward(d_model=" << options.d_model() << ", ffn_dim=" << options.ffn_dim()
         << ", activation=" << config::to_string(options.activation())
         << ", activation_dropout=" << options.activation_dropout() << ")";
}

torch::Tensor FeedForwardImpl::forward(const torch::Tensor& x) {
  torch::Tensor h = fc1->forward(x);  // [b, t, ffn]
  switch (options.activation()) {
    case config::Activation::relu:
      h = torch::GradMode::is_enabled() ? torch::relu(h) : torch::relu_(h);  // fc1's fresh output
      break;
    case config::Activation::gelu:
      h = torch::gelu(h);
      break;
    case config::Activation::swish:
      h = torch::silu(h);
      break;
    case config::Activation::gelu_sigmoid:
      h = h * torch::sigmoid(1.702 * h);
      break;  // Marian's gelu
  }
  if (options.activation_dropout() > 0) h = model::dropout(h, options.activation_dropout(), is_training());
  return fc2->forward(h, options.activation() == config::Activation::relu);  // [b, t, d]
}

SsruImpl::SsruImpl(int64_t d) : d_model(d) { reset(); }

void SsruImpl::reset() { proj = register_module(names::kProj, Linear(d_model, 2 * d_model)); }

void SsruImpl::pretty_print(std::ostream& stream) const { stream << "mtx::model::Ssru(d_model=" << d_model << ")"; }

namespace {

// The state of each new row: row rows[r] of c [n, d], or zeros where rows[r] is -1 (a row that joined). On the CPU
// one pass of copies; elsewhere a gather and a fill.
torch::Tensor reordered_state(const torch::Tensor& c, const torch::Tensor& rows_any) {
  const torch::Tensor rows = rows_any.to(torch::kCPU, torch::kLong).contiguous();  // [b]
  if (c.device().is_cpu() && c.scalar_type() == torch::kFloat && c.is_contiguous()) {
    const int64_t b = rows.size(0), d = c.size(1), n = c.size(0);
    torch::Tensor out = torch::empty({b, d}, c.options());
    const float* from = c.data_ptr<float>();
    float* to = out.data_ptr<float>();
    const int64_t* row = rows.data_ptr<int64_t>();
    for (int64_t r = 0; r < b; ++r) {
      TORCH_CHECK(row[r] < n, "Ssru: state row ", row[r], " of ", n);
      if (row[r] < 0) {
        std::fill(to + r * d, to + (r + 1) * d, 0.0f);
      } else {
        std::copy(from + row[r] * d, from + (row[r] + 1) * d, to + r * d);
      }
    }
    return out;
  }
  const torch::Tensor on = rows.to(c.device());
  return c.index_select(0, on.clamp_min(0)).masked_fill(on.lt(0).unsqueeze(1), 0.0);
}

}  // namespace

torch::Tensor SsruImpl::forward(const torch::Tensor& x, SelfKV* cache) {
  TORCH_CHECK(x.dim() == 3 && x.size(2) == d_model, "Ssru: x ", x.sizes());
  const int64_t b = x.size(0), t = x.size(1);
  const std::vector<torch::Tensor> parts = proj->forward(x).chunk(2, -1);  // [b, t, d] each
  const torch::Tensor& value = parts[0];
  const torch::Tensor forget = torch::sigmoid(parts[1]);
  torch::Tensor c;  // [b, d]
  if (cache && cache->k.defined()) {
    c = cache->k;
    if (cache->pending_rows.defined()) c = reordered_state(c, cache->pending_rows);
    TORCH_CHECK(c.size(0) == b, "Ssru: a state of ", c.size(0), " rows for ", b);
  } else {
    c = torch::zeros({b, d_model}, x.options());
  }
  const auto keep = [&] {
    if (!cache) return;
    cache->k = c;
    cache->pending_rows = torch::Tensor();
    cache->pending_skip = 0;
  };
  if (t == 1) {  // a decoding step: c = f * c + (1 - f) * v in one kernel
    c = torch::lerp(value.select(1, 0), c, forget.select(1, 0));
    keep();
    return torch::relu(c).unsqueeze(1);  // [b, 1, d]
  }
  std::vector<torch::Tensor> out;
  out.reserve(size_t(t));
  for (int64_t i = 0; i < t; ++i) {
    c = torch::lerp(value.select(1, i), c, forget.select(1, i));  // [b, d]
    out.push_back(c);
  }
  keep();
  return torch::relu(torch::stack(out, 1));  // [b, t, d]
}

EncoderLayerImpl::EncoderLayerImpl(const LayerOptions& o) : options(o) { reset(); }

void EncoderLayerImpl::reset() {
  self_attn = register_module(names::kSelfAttn, SelfAttention(attention_options(options)));
  ffn = register_module(names::kFfn, FeedForward(options));
  norm1 = register_module(names::kNorm1, layer_norm(options.d_model(), options.layer_norm_eps()));
  norm2 = register_module(names::kNorm2, layer_norm(options.d_model(), options.layer_norm_eps()));
}

void EncoderLayerImpl::pretty_print(std::ostream& stream) const {
  stream << "mtx::model::EncoderLayer(";
  print_layer_options(stream, options);
  stream << ")";
}

torch::Tensor EncoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& mask, SelfKV* cache) {
  const double p = options.dropout();
  const bool train = is_training();
  if (options.pre_norm()) {
    torch::Tensor h =
        residual(x, model::dropout(self_attn->forward(norm1->forward(x), mask, cache), p, train));  // [b, s, d]
    return residual(h, model::dropout(ffn->forward(norm2->forward(h)), p, train));
  }
  torch::Tensor h =
      norm1->forward(residual(x, model::dropout(self_attn->forward(x, mask, cache), p, train)));  // [b, s, d]
  return norm2->forward(residual(h, model::dropout(ffn->forward(h), p, train)));
}

DecoderLayerImpl::DecoderLayerImpl(const LayerOptions& o) : options(o) { reset(); }

void DecoderLayerImpl::reset() {
  if (options.ssru()) {
    ssru = register_module(names::kSsru, Ssru(options.d_model()));
  } else {
    self_attn = register_module(names::kSelfAttn, SelfAttention(attention_options(options)));
  }
  cross_attn = register_module(names::kCrossAttn, CrossAttention(attention_options(options)));
  ffn = register_module(names::kFfn, FeedForward(options));
  norm1 = register_module(names::kNorm1, layer_norm(options.d_model(), options.layer_norm_eps()));
  norm2 = register_module(names::kNorm2, layer_norm(options.d_model(), options.layer_norm_eps()));
  norm3 = register_module(names::kNorm3, layer_norm(options.d_model(), options.layer_norm_eps()));
}

void DecoderLayerImpl::pretty_print(std::ostream& stream) const {
  stream << "mtx::model::DecoderLayer(";
  print_layer_options(stream, options);
  stream << ")";
}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& self_mask, const SelfKV& memory_kv,
                                        const torch::Tensor& memory_mask, SelfKV* cache, torch::Tensor* cross_weights) {
  const double p = options.dropout();
  const bool train = is_training();
  const auto autoreg = [&](const torch::Tensor& in) {
    return options.ssru() ? ssru->forward(in, cache) : self_attn->forward(in, self_mask, cache);
  };
  if (options.pre_norm()) {
    torch::Tensor h = residual(x, model::dropout(autoreg(norm1->forward(x)), p, train));
    h = residual(
        h, model::dropout(cross_attn->forward(norm2->forward(h), memory_kv, memory_mask, cross_weights), p, train));
    return residual(h, model::dropout(ffn->forward(norm3->forward(h)), p, train));  // [b, t, d]
  }
  torch::Tensor h = norm1->forward(residual(x, model::dropout(autoreg(x), p, train)));
  h = norm2->forward(
      residual(h, model::dropout(cross_attn->forward(h, memory_kv, memory_mask, cross_weights), p, train)));
  return norm3->forward(residual(h, model::dropout(ffn->forward(h), p, train)));  // [b, t, d]
}

}  // namespace mtx::model
